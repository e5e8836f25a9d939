// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package databases starts throwaway databases for tests and make bench:
// PostgreSQL on a loopback port. It imports nothing of kubestellar's, so
// that the tests of any package can use it (test/harness imports the
// server).
package databases

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Postgres is a throwaway PostgreSQL server on a loopback port, run as the
// postgres user (initdb refuses root).
type Postgres struct {
	// DSN reaches database "kubestellar" as user "ks" with Password.
	DSN      string
	Password string
	Port     int
	Dir      string
	bin      string
}

// postgresBin finds PostgreSQL's server binaries.
func postgresBin() (string, error) {
	for _, dir := range []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install Debian's postgresql package")
}

func (p *Postgres) asPostgres(args ...string) *exec.Cmd {
	if os.Geteuid() != 0 {
		return exec.Command(args[0], args[1:]...)
	}
	return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
}

// NewPostgres starts PostgreSQL on a free loopback port; Stop removes it.
func NewPostgres(ctx context.Context) (_ *Postgres, err error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ks-postgres-")
	if err != nil {
		return nil, err
	}
	port, err := FreeLoopbackPort()
	if err != nil {
		return nil, err
	}
	p := &Postgres{Password: "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36), Port: port, Dir: dir, bin: bin}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "pwfile"), []byte(p.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown: %w: %s", err, out)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := p.asPostgres(filepath.Join(bin, "initdb"), "-D", data, "-U", "ks", "--pwfile", filepath.Join(dir, "pwfile"),
		"--auth=scram-sha-256", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if out, err := p.asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60", "start",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off -c max_connections=300", p.Port, dir)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	if p.DSN, err = p.CreateDatabase("kubestellar"); err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)))
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		return nil, errors.New("PostgreSQL did not listen")
	}
	return p, nil
}

// CreateDatabase creates a database of that name and returns its DSN, for
// a test that wants a datastore of its own on a server it shares.
func (p *Postgres) CreateDatabase(name string) (string, error) {
	create := exec.Command(filepath.Join(p.bin, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "ks", name)
	create.Env = append(os.Environ(), "PGPASSWORD="+p.Password)
	if out, err := create.CombinedOutput(); err != nil {
		return "", fmt.Errorf("createdb %s: %w: %s", name, err, out)
	}
	return fmt.Sprintf("postgres://ks:%s@127.0.0.1:%d/%s?sslmode=disable", p.Password, p.Port, name), nil
}

// Stop stops PostgreSQL and removes its files.
func (p *Postgres) Stop() {
	_ = p.asPostgres(filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.Dir, "data"), "-m", "immediate", "-w", "stop").Run()
	os.RemoveAll(p.Dir)
}

// StartPostgres starts PostgreSQL for a test and stops it when the test ends.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p, err := NewPostgres(context.Background())
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	return p
}

// FreeLoopbackPort is a TCP port free on 127.0.0.1 when asked.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
