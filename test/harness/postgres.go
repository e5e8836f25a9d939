package harness

import (
	"context"
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
// postgres user (initdb refuses root), removed when the test ends.
type Postgres struct {
	// DSN reaches database "kubestellar" as user "ks" with Password.
	DSN      string
	Password string
	Port     int
	Dir      string
	bin      string
}

// postgresBin finds PostgreSQL's server binaries.
func postgresBin(t testing.TB) string {
	t.Helper()
	for _, dir := range []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install Debian's postgresql package")
	return ""
}

// StartPostgres starts PostgreSQL and stops it when the test ends.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin := postgresBin(t)
	dir, err := os.MkdirTemp("", "ks-postgres-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &Postgres{Password: "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36), Port: FreePort(t), Dir: dir, bin: bin}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pwfile"), []byte(p.Password+"\n"), 0o600))
	asPostgres := func(args ...string) *exec.Cmd {
		if os.Geteuid() != 0 {
			return exec.Command(args[0], args[1:]...)
		}
		return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
	}
	if os.Geteuid() == 0 {
		require.NoError(t, exec.Command("chown", "-R", "postgres", dir).Run())
	}
	data := filepath.Join(dir, "data")
	out, err := asPostgres(filepath.Join(bin, "initdb"), "-D", data, "-U", "ks", "--pwfile", filepath.Join(dir, "pwfile"),
		"--auth=scram-sha-256", "-E", "UTF8", "--no-sync").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	out, err = asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60", "start",
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off -c max_connections=300", p.Port, dir)).CombinedOutput()
	require.NoError(t, err, "pg_ctl start: %s", out)
	t.Cleanup(func() {
		_ = asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop").Run()
	})
	create := exec.Command(filepath.Join(bin, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "ks", "kubestellar")
	create.Env = append(os.Environ(), "PGPASSWORD="+p.Password)
	out, err = create.CombinedOutput()
	require.NoError(t, err, "createdb: %s", out)
	p.DSN = fmt.Sprintf("postgres://ks:%s@127.0.0.1:%d/kubestellar?sslmode=disable", p.Password, p.Port)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)))
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	require.NoError(t, err, "PostgreSQL did not listen")
	return p
}
