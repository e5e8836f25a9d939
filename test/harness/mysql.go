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
// loopback port, run as the mysql user when the tests run as root.
type MySQL struct {
	// DSN reaches database "kubestellar" as user "ks" with Password, in
	// kine's form: mysql://user:password@tcp(host:port)/database.
	DSN      string
	Password string
	Port     int
	Dir      string
	server   *Daemon
}

// asMySQL runs a command as the mysql user when running as root: mariadbd
// refuses to run as root.
func asMySQL(argv ...string) []string {
	if os.Geteuid() != 0 {
		return argv
	}
	return append([]string{"runuser", "-u", "mysql", "--"}, argv...)
}

// StartMySQL starts MariaDB for a test and stops it, removing its files,
// when the test ends.
func StartMySQL(t testing.TB) *MySQL {
	t.Helper()
	for _, bin := range []string{"mariadbd", "mariadb-install-db", "mariadb"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found: install Debian's mariadb-server package (hack/test-deps.sh does)", bin)
		}
	}
	dir, err := os.MkdirTemp("", "ks-mysql-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		out, err := exec.Command("chown", "mysql", dir).CombinedOutput()
		require.NoError(t, err, "chown: %s", out)
	}
	m := &MySQL{Password: "p@ss:" + strconv.FormatInt(time.Now().UnixNano(), 36), Port: FreePort(t), Dir: dir}
	install := []string{"mariadb-install-db", "--no-defaults", "--datadir=" + filepath.Join(dir, "data"),
		"--auth-root-authentication-method=socket", "--skip-test-db"}
	if os.Geteuid() == 0 {
		install = append(install, "--user=mysql")
	}
	out, err := exec.Command(install[0], install[1:]...).CombinedOutput()
	require.NoError(t, err, "mariadb-install-db: %s", out)

	socket := filepath.Join(dir, "mysqld.sock")
	m.server = (*Netns)(nil).StartDaemon(t, filepath.Join(dir, "mariadbd.log"), asMySQL("mariadbd", "--no-defaults",
		"--datadir="+filepath.Join(dir, "data"), "--socket="+socket, "--pid-file="+filepath.Join(dir, "mariadbd.pid"),
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(m.Port), "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0",
		"--max-connections=500")...)
	// The root user reaches the server on its socket, as the OS user root.
	sql := fmt.Sprintf("CREATE DATABASE kubestellar; CREATE USER 'ks'@'127.0.0.1' IDENTIFIED BY '%s'; "+
		"GRANT ALL ON kubestellar.* TO 'ks'@'127.0.0.1';", m.Password)
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if m.server.HasExited() {
			return false, errors.New("mariadbd exited")
		}
		return exec.Command("mariadb", "--no-defaults", "-S", socket, "-u", "root", "-e", "SELECT 1").Run() == nil, nil
	})
	require.NoError(t, err, "MariaDB did not come up; log:\n%s", m.server.Log())
	out, err = exec.Command("mariadb", "--no-defaults", "-S", socket, "-u", "root", "-e", sql).CombinedOutput()
	require.NoError(t, err, "creating the database: %s", out)
	m.DSN = fmt.Sprintf("mysql://ks:%s@tcp(127.0.0.1:%d)/kubestellar", m.Password, m.Port)
	return m
}
