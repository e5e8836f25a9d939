// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package imagepages lets a process that runs a small part of a big binary
// give back the pages of the binary that it touched once and no longer
// needs.
//
// kubestellar is one binary: the syncer is the same executable as the
// server. Go runs the init functions of every package linked in before
// main, so a syncer starts by touching the code and read-only data of the
// whole server (API server, kine and its datastore drivers, the
// controllers): tens of MiB of the executable's pages, which then count
// in its resident set (VmRSS, RssFile) for as long as it runs, although it
// never uses them again.
//
// Release unmaps those pages from the process. They are clean, file-backed
// pages, and a page the process uses again is mapped back on its next
// access. Only read-only mappings of the executable that hold no private
// (written) pages are released: never the data segment, and never RELRO
// pages that the dynamic loader wrote.
//
// Unmapping alone is not enough on kernels that cache files in large
// folios (Linux 6.x on ext4, xfs, btrfs): the readahead that served the
// start-up faults cached the executable in folios of up to 2 MiB, and a
// fault maps the folio it lands in whole, so that a process touching one
// function maps the megabyte around it. So Release, asked to read on demand, also
// marks the mappings as read at random (MADV_RANDOM: a fault reads its
// own page, no readahead) and asks the kernel to drop the executable's
// cached pages that no process maps (POSIX_FADV_DONTNEED). The pages the
// process uses again are then read back one by one, and it maps what it
// uses. Pages another process maps (a
// server run from the same file on the same machine) stay cached, and
// this process maps them as they are. The price is a read from disk, of
// one page, the first time each page is used again: done once a process
// is through its start, that is what its steady work uses.
package imagepages

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// mapping is one line of /proc/self/smaps with the fields Release needs.
type mapping struct {
	start, end uint64
	perms      string
	path       string
	rss        uint64 // bytes
	anonymous  uint64 // bytes
}

// Released is what a Release did.
type Released struct {
	// Mappings is how many mappings were released.
	Mappings int
	// Bytes is their resident size before (what VmRSS loses).
	Bytes uint64
}

// Release unmaps the resident pages of the running executable's read-only
// mappings (code, read-only data) from this process; with onDemand, it
// also marks those mappings as read at random and drops the executable's
// pages that no process maps from the page cache. It is safe at any time:
// a page needed again is read back in.
func Release(onDemand bool) (Released, error) {
	exe, err := os.Executable()
	if err != nil {
		return Released{}, err
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return Released{}, err
	}
	defer f.Close()
	maps, err := parseSmaps(f)
	if err != nil {
		return Released{}, err
	}
	var out Released
	for _, m := range releasable(maps, exe) {
		if onDemand {
			if err := madvise(m, unix.MADV_RANDOM); err != nil {
				return out, err
			}
		}
		if m.rss == 0 {
			continue
		}
		// MADV_DONTNEED on a private file mapping drops this process's page
		// table entries; the pages stay in the page cache.
		if err := madvise(m, unix.MADV_DONTNEED); err != nil {
			return out, err
		}
		out.Mappings++
		out.Bytes += m.rss
	}
	if !onDemand {
		return out, nil
	}
	f, err = os.Open(exe)
	if err != nil {
		return out, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return out, fmt.Errorf("dropping %s from the page cache: %w", exe, err)
	}
	return out, nil
}

func madvise(m mapping, advice int) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), uintptr(advice)); errno != 0 {
		return fmt.Errorf("madvise %x-%x %s: %w", m.start, m.end, m.path, errno)
	}
	return nil
}

// releasable picks the mappings of exe that are read-only (r-xp, r--p) and
// hold no private page: those Release may drop.
func releasable(maps []mapping, exe string) []mapping {
	var out []mapping
	for _, m := range maps {
		if m.path != exe || (m.perms != "r-xp" && m.perms != "r--p") || m.anonymous != 0 {
			continue
		}
		out = append(out, m)
	}
	return out
}

// parseSmaps reads the format of proc(5)'s /proc/PID/smaps: a header line
// per mapping ("START-END PERMS OFFSET DEV INODE [PATH]") followed by
// "Field: N kB" lines.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if name, ok := strings.CutSuffix(fields[0], ":"); ok {
			if len(out) == 0 || len(fields) != 3 || fields[2] != "kB" {
				continue
			}
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps: %q: %w", line, err)
			}
			switch name {
			case "Rss":
				out[len(out)-1].rss = kb * 1024
			case "Anonymous":
				out[len(out)-1].anonymous = kb * 1024
			}
			continue
		}
		if len(fields) < 5 {
			return nil, fmt.Errorf("smaps: unexpected line %q", line)
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("smaps: unexpected line %q", line)
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("smaps: %q: %w", line, err)
		}
		m := mapping{start: start, end: end, perms: fields[1]}
		if len(fields) >= 6 {
			m.path = strings.Join(fields[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}
