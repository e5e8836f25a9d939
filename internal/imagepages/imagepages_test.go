package imagepages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = `00400000-00403000 r--p 00000000 fe:00 9979764                            /opt/ks/kubestellar
Size:                 12 kB
Rss:                  12 kB
Anonymous:             0 kB
00403000-03165000 r-xp 00003000 fe:00 9979764                            /opt/ks/kubestellar
Size:              46472 kB
Rss:               26256 kB
Anonymous:             0 kB
03165000-0649b000 r--p 02d65000 fe:00 9979764                            /opt/ks/kubestellar
Size:              52440 kB
Rss:               27392 kB
Anonymous:             0 kB
0649b000-0649e000 r--p 0609b000 fe:00 9979764                            /opt/ks/kubestellar
Size:                 12 kB
Rss:                  12 kB
Anonymous:            12 kB
0649e000-0659d000 rw-p 0609e000 fe:00 9979764                            /opt/ks/kubestellar
Size:               1020 kB
Rss:                 908 kB
Anonymous:           600 kB
0659d000-065a0000 r--p 00000000 fe:00 9979765                            /opt/ks/kubestellar (deleted)
Rss:                   4 kB
Anonymous:             0 kB
7f0000000000-7f0000200000 r-xp 00000000 fe:00 1234                       /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 912 kB
Anonymous:             0 kB
7f0000400000-7f0000600000 rw-p 00000000 00:00 0 
Rss:               13040 kB
Anonymous:         13040 kB
VmFlags: rd wr mr mw me ac sd
`

func TestReleasable(t *testing.T) {
	maps, err := parseSmaps(strings.NewReader(sample))
	require.NoError(t, err)
	require.Len(t, maps, 8)
	require.Equal(t, mapping{start: 0x00403000, end: 0x03165000, perms: "r-xp", path: "/opt/ks/kubestellar", rss: 26256 * 1024}, maps[1])
	require.Equal(t, "/opt/ks/kubestellar (deleted)", maps[5].path)
	require.Empty(t, maps[7].path)

	var got []string
	for _, m := range releasable(maps, "/opt/ks/kubestellar") {
		got = append(got, m.perms+" "+m.path)
	}
	// Code and read-only data; not the RELRO page the loader wrote
	// (anonymous), not the data segment, not another file.
	require.Equal(t, []string{"r--p /opt/ks/kubestellar", "r-xp /opt/ks/kubestellar", "r--p /opt/ks/kubestellar"}, got)
}

func TestParseSmapsRefusesGarbage(t *testing.T) {
	_, err := parseSmaps(strings.NewReader("zzz-yyy r--p 0 0 0 /x\n"))
	require.ErrorContains(t, err, "smaps")
	_, err = parseSmaps(strings.NewReader("00400000-00403000 r--p 0 0 0 /x\nRss: many kB\n"))
	require.ErrorContains(t, err, "Rss: many kB")
}

// residentImage is the resident size of this test binary's read-only
// mappings.
func residentImage(t *testing.T) uint64 {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	maps, err := parseSmaps(f)
	require.NoError(t, err)
	var sum uint64
	for _, m := range releasable(maps, exe) {
		sum += m.rss
	}
	return sum
}

// TestRelease releases this test binary's pages for real: they leave the
// resident set, and the process goes on running (the code it runs next
// comes back on its own).
func TestRelease(t *testing.T) {
	before := residentImage(t)
	require.NotZero(t, before)
	r, err := Release()
	require.NoError(t, err)
	require.NotZero(t, r.Mappings)
	require.GreaterOrEqual(t, r.Bytes, before/2, "released %+v of %d resident bytes", r, before)
	after := residentImage(t)
	require.Less(t, after, before, "resident bytes of the executable's read-only mappings, before and after")
	t.Logf("resident read-only pages of the test binary: %d KiB before, %d KiB after (released %d KiB in %d mappings)",
		before/1024, after/1024, r.Bytes/1024, r.Mappings)
}
