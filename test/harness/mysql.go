// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// MySQL is a throwaway MariaDB server (Debian's mariadb-server) on a
// loopback port, run as the mysql user when running as root (mariadbd
// refuses root).
type MySQL struct {
	// DSN reaches database "kubestellar" as user "ks" with Password, in
	// kine's form: mysql://user:password@tcp(host:port)/database.
	DSN      string
	Password string
	Port     int
	Dir      string
	server   *background
}

// StartMySQL starts MariaDB for a test and stops it when the test ends.
func StartMySQL(t testing.TB) *MySQL {
	t.Helper()
	m, err := NewMySQL(t.Context())
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	return m
}

// NewMySQL starts MariaDB on a free loopback port; Stop removes it.
func NewMySQL(ctx context.Context) (_ *MySQL, err error) {
	for _, bin := range []string{"mariadbd", "mariadb-install-db", "mariadb"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found: install Debian's mariadb-server package (hack/test-deps.sh does)", bin)
		}
	}
	dir, err := os.MkdirTemp("", "ks-mysql-")
	if err != nil {
		return nil, err
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	// ':' and '@' in the password: the DSN's parser and the log redaction
	// must both cope.
	m := &MySQL{Password: "p@ss:" + strconv.FormatInt(time.Now().UnixNano(), 36), Port: port, Dir: dir}
	defer func() {
		if err != nil {
			m.Stop()
		}
	}()
	install := []string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--auth-root-authentication-method=socket", "--skip-test-db"}
	server := []string{"mariadbd", "--no-defaults", "--datadir=" + filepath.Join(dir, "data"),
		"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0", "--max-connections=500"}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "mysql", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown: %w: %s", err, out)
		}
		install = append(install, "--user=mysql")
		server = append([]string{"runuser", "-u", "mysql", "--"}, server...)
	}
	if out, err := exec.CommandContext(ctx, "mariadb-install-db", install...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w: %s", err, out)
	}
	if m.server, err = startBackground(filepath.Join(dir, "mariadbd.log"), server...); err != nil {
		return nil, err
	}
	// root reaches the server on its socket, as the OS user root.
	rootSQL := func(sql string) *exec.Cmd {
		return exec.CommandContext(ctx, "mariadb", "--no-defaults", "-S", filepath.Join(dir, "mysqld.sock"), "-u", "root", "-e", sql)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if m.server.hasExited() {
			return false, errors.New("mariadbd exited")
		}
		return rootSQL("SELECT 1").Run() == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("MariaDB did not come up: %w; log:\n%s", err, m.server.log())
	}
	if out, err := rootSQL(fmt.Sprintf("CREATE DATABASE kubestellar; CREATE USER 'ks'@'127.0.0.1' IDENTIFIED BY '%s'; "+
		"GRANT ALL ON kubestellar.* TO 'ks'@'127.0.0.1';", m.Password)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("creating the database: %w: %s", err, out)
	}
	m.DSN = fmt.Sprintf("mysql://ks:%s@tcp(127.0.0.1:%d)/kubestellar", m.Password, m.Port)
	return m, nil
}

// Stop stops MariaDB and removes its files.
func (m *MySQL) Stop() {
	m.server.stop()
	os.RemoveAll(m.Dir)
}
