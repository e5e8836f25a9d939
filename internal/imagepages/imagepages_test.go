// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package imagepages

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// imageMappings are this test binary's read-only mappings, as now.
func imageMappings(t *testing.T) []mapping {
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
	return releasable(maps, exe)
}

// residentImage is the resident size of this test binary's read-only
// mappings.
func residentImage(t *testing.T) uint64 {
	t.Helper()
	var sum uint64
	for _, m := range imageMappings(t) {
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
	r, err := Release(false)
	require.NoError(t, err)
	require.NotZero(t, r.Mappings)
	require.GreaterOrEqual(t, r.Bytes, before/2, "released %+v of %d resident bytes", r, before)
	after := residentImage(t)
	require.Less(t, after, before, "resident bytes of the executable's read-only mappings, before and after")
	t.Logf("resident read-only pages of the test binary: %d KiB before, %d KiB after (released %d KiB in %d mappings)",
		before/1024, after/1024, r.Bytes/1024, r.Mappings)
}

// childEnv makes this test binary, run again, the child of
// TestReleasedPagesComeBackOneByOne.
const childEnv = "IMAGEPAGES_TEST_CHILD"

// TestReleasedPagesComeBackOneByOne runs copies of this test binary, as
// a syncer runs from a binary it shares with nobody, started with its
// file out of the page cache (as after a boot): once one has released its
// pages to be read on demand, touching a byte per 64 KiB of its code and
// read-only data maps about half of what it maps after releasing them
// only, where each touch maps the large folio around it that the
// start-up's readahead cached (on this machine's kernel; where files are
// cached a page at a time, there is nothing to gain, and the test says
// so). The running test's own code (the runtime, the testing package) is
// mapped as it was at the release either way, and counts in both.
func TestReleasedPagesComeBackOneByOne(t *testing.T) {
	if mode := os.Getenv(childEnv); mode != "" {
		releasedChild(t, mode == "on-demand")
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	// Not in /tmp, which may be a tmpfs (nothing to drop there): beside
	// the package, on the disk the tests run from.
	dir, err := os.MkdirTemp(".", ".imagepages-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	perTouch := map[string]float64{}
	for _, mode := range []string{"unmap-only", "on-demand"} {
		cp := filepath.Join(dir, mode+".test")
		require.NoError(t, os.WriteFile(cp, data, 0o755))
		f, err := os.Open(cp)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		require.NoError(t, f.Close())

		cmd := exec.Command(cp, "-test.run=^TestReleasedPagesComeBackOneByOne$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		m := regexp.MustCompile(`touched (\d+) pages 64 KiB apart: (\d+) KiB more resident`).FindSubmatch(out)
		require.NotNil(t, m, "%s", out)
		touches, _ := strconv.Atoi(string(m[1]))
		grew, _ := strconv.Atoi(string(m[2]))
		require.Greater(t, touches, 16, "the test binary has code and data enough to touch")
		perTouch[mode] = float64(grew) / float64(touches)
		t.Logf("%s: %d touches mapped %d KiB (%.1f KiB a touch)", mode, touches, grew, perTouch[mode])
	}
	if perTouch["unmap-only"] <= 8 {
		t.Skipf("this kernel maps %.1f KiB a touch anyway: no large folios to avoid", perTouch["unmap-only"])
	}
	require.Less(t, perTouch["on-demand"], 0.75*perTouch["unmap-only"], "read on demand, a touch maps about its page, not its neighbours'")
}

// releasedChild releases its pages (to be read on demand or not), then
// touches a byte per 64 KiB of its read-only mappings through
// /proc/self/mem (which faults them in as an access would) and says how
// much more of them is resident.
func releasedChild(t *testing.T, onDemand bool) {
	_, err := Release(onDemand)
	require.NoError(t, err)
	mem, err := os.Open("/proc/self/mem")
	require.NoError(t, err)
	defer mem.Close()
	// The code that measures maps its own pages back first.
	residentImage(t)
	maps := imageMappings(t)
	before := residentImage(t)
	touches := 0
	b := make([]byte, 1)
	for _, m := range maps {
		for addr := m.start; addr < m.end; addr += 64 << 10 {
			_, err := mem.ReadAt(b, int64(addr))
			require.NoError(t, err)
			touches++
		}
	}
	after := residentImage(t)
	fmt.Printf("touched %d pages 64 KiB apart: %d KiB more resident\n", touches, (after-before)/1024)
}
