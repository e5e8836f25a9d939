// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Systemd is how install and uninstall reach systemd; tests replace both
// functions.
type Systemd struct {
	// Running reports whether systemd manages this machine.
	Running func() bool
	// Systemctl runs systemctl with args.
	Systemctl func(ctx context.Context, args ...string) error
}

// HostSystemd is this machine's systemd: running when /run/systemd/system
// exists (as sd_booted(3) checks), reached through the systemctl command,
// whose output goes to out and errOut.
func HostSystemd(out, errOut io.Writer) Systemd {
	return Systemd{
		Running: func() bool {
			fi, err := os.Stat("/run/systemd/system")
			return err == nil && fi.IsDir()
		},
		Systemctl: func(ctx context.Context, args ...string) error {
			cmd := exec.CommandContext(ctx, "systemctl", args...)
			cmd.Stdout, cmd.Stderr = out, errOut
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
			}
			return nil
		},
	}
}

// Host is the machine that install and uninstall change.
type Host struct {
	// Root, when not "" or "/", is the directory standing for / (a package
	// build, a test): every file goes under it.
	Root string
	// Systemd is the machine's systemd, or nil when Root is a directory, not
	// a running system: systemctl is then never run, and the commands to run
	// are printed instead.
	Systemd *Systemd
	// Out receives one line per step.
	Out io.Writer
}

// NewHost is this machine (root "" or "/"), or the directory root standing
// for one, with systemctl's output going to out and errOut.
func NewHost(root string, out, errOut io.Writer) Host {
	h := Host{Root: root, Out: out}
	if !h.rooted() {
		sd := HostSystemd(out, errOut)
		h.Systemd = &sd
	}
	return h
}

// Executable is the real absolute path of the running binary, for the
// units to run: symbolic links resolved, so a unit keeps working whatever
// becomes of the link it was installed through.
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this binary: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("finding this binary: %w", err)
	}
	return filepath.Abs(resolved)
}

func (h Host) rooted() bool { return h.Root != "" && filepath.Clean(h.Root) != "/" }

// path is p (absolute, on the target machine) on this host.
func (h Host) path(p string) string {
	if !h.rooted() {
		return p
	}
	return filepath.Join(h.Root, p)
}

// runsSystemd is whether install and uninstall run systemctl.
func (h Host) runsSystemd() bool {
	return h.Systemd != nil && h.Systemd.Running()
}

func (h Host) printf(format string, args ...any) {
	if h.Out != nil {
		fmt.Fprintf(h.Out, format, args...)
	}
}

// systemctl runs each command in turn, printing it first.
func (h Host) systemctl(ctx context.Context, cmds ...[]string) error {
	for _, args := range cmds {
		h.printf("running systemctl %s\n", strings.Join(args, " "))
		if err := h.Systemd.Systemctl(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// explain prints commands for the administrator to run, after why.
func (h Host) explain(why string, cmds ...[]string) {
	h.printf("%s\n", why)
	for _, args := range cmds {
		h.printf("  systemctl %s\n", strings.Join(args, " "))
	}
}

// file is a file install writes.
type file struct {
	path string // on the target machine
	data []byte
	mode fs.FileMode
}

// writeFiles writes files, creating their directories (mode 0755), and
// reports whether any of them existed before with other content.
func (h Host) writeFiles(files ...file) (changed bool, err error) {
	for _, f := range files {
		p := h.path(f.path)
		if old, err := os.ReadFile(p); err == nil && !bytes.Equal(old, f.data) {
			changed = true
		}
		if err := mkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
		if err := writeFileAtomic(p, f.data, f.mode); err != nil {
			return false, err
		}
		h.printf("wrote %s (mode %04o)\n", p, f.mode)
	}
	return changed, nil
}

// mkdirAll is os.MkdirAll with mode set on every directory it creates,
// whatever the umask.
func mkdirAll(dir string, mode fs.FileMode) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAll(parent, mode); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(dir, mode)
}

// writeFileAtomic replaces path with data: readers see the old file or the
// new one, never a part, and a secret is never readable under a looser mode.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// remove removes the file p (on the target machine), saying so; a file
// that is not there is no error.
func (h Host) remove(p string) (bool, error) {
	err := os.Remove(h.path(p))
	switch {
	case err == nil:
		h.printf("removed %s\n", h.path(p))
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// removeDirIfEmpty removes the directory p when nothing is left in it.
func (h Host) removeDirIfEmpty(p string) error {
	entries, err := os.ReadDir(h.path(p))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return nil
	}
	_, err = h.remove(p)
	return err
}

// exists is whether p (on the target machine) exists.
func (h Host) exists(p string) bool {
	_, err := os.Lstat(h.path(p))
	return err == nil
}

// checkPurgeable refuses data dirs whose removal would be a disaster or a
// guess: empty, relative, or the root directory.
func checkPurgeable(dataDir string) error {
	if strings.TrimSpace(dataDir) == "" || !filepath.IsAbs(dataDir) || filepath.Clean(dataDir) == "/" {
		return fmt.Errorf("refusing to purge the data dir %q: it must be an absolute path other than /", dataDir)
	}
	return nil
}

// purge removes the data dir (on the target machine) and everything in it.
func (h Host) purge(dataDir string) error {
	p := h.path(filepath.Clean(dataDir))
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		h.printf("data dir %s is already gone\n", p)
		return nil
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("purging %s: %w", p, err)
	}
	h.printf("removed %s and everything in it (--purge)\n", p)
	return nil
}
