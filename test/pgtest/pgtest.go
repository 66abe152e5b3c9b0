// Package pgtest gives tests a real PostgreSQL database.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// The PostgreSQL half of the suite runs against, in order of preference:
//   - the server named by KILN_TEST_POSTGRES_DSN (a postgres:// URL; every test
//     gets its own schema in that database, dropped afterwards);
//   - a throwaway cluster this package starts (as root, with Debian's
//     /usr/lib/postgresql/*/bin/initdb, run as the postgres user, listening
//     only on a unix socket in a temp dir) and stops in TestMain;
//   - nothing: the PostgreSQL subtests skip, saying why.

var pg struct {
	once    sync.Once
	dsn     string // base DSN, "" if unavailable
	skip    string // why unavailable
	err     error  // the tools are there but the cluster did not start
	dir     string // temp dir of our own cluster
	pgCtl   string
	started bool
}

// Stop stops the throwaway cluster, if one was started; call it from TestMain
// after m.Run.
func Stop() {
	if !pg.started {
		return
	}
	cmd := exec.Command(pg.pgCtl, "-D", filepath.Join(pg.dir, "data"), "-m", "immediate", "-w", "stop")
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "stop test PostgreSQL: %v: %s\n", err, out)
	}
	os.RemoveAll(pg.dir)
}

var postgresCred *syscall.Credential

func asPostgres(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
}

// Server returns the base DSN of the PostgreSQL this package uses
// (KILN_TEST_POSTGRES_DSN, else a throwaway cluster it starts once and Stop
// stops), or why there is none (dsn and err empty), for programs that are
// not tests (test/fleet's benchmark).
func Server() (dsn, skip string, err error) {
	pg.once.Do(func() {
		if dsn := os.Getenv("KILN_TEST_POSTGRES_DSN"); dsn != "" {
			pg.dsn = dsn
			return
		}
		pg.dsn, pg.skip, pg.err = startTestCluster()
	})
	return pg.dsn, pg.skip, pg.err
}

// postgresBase returns the base DSN of a usable PostgreSQL, or skips t.
func postgresBase(t testing.TB) string {
	Server()
	if pg.err != nil {
		// The tools are there, so this is a failure, not a reason to skip.
		t.Fatalf("start a test PostgreSQL: %v", pg.err)
	}
	if pg.dsn == "" {
		t.Skipf("no PostgreSQL: %s", pg.skip)
	}
	return pg.dsn
}

func startTestCluster() (dsn, skip string, err error) {
	if os.Geteuid() != 0 {
		return "", "KILN_TEST_POSTGRES_DSN unset and not root (needed to run initdb as the postgres user)", nil
	}
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdbs) == 0 {
		return "", "KILN_TEST_POSTGRES_DSN unset and no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)", nil
	}
	sort.Slice(initdbs, func(i, j int) bool { // newest major version
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdbs[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdbs[j]))))
		return vi > vj
	})
	initdb := initdbs[0]
	pg.pgCtl = filepath.Join(filepath.Dir(initdb), "pg_ctl")
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", "no postgres user to run the test cluster as: " + err.Error(), nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	postgresCred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	dir, err := os.MkdirTemp("", "kiln-pg-")
	if err != nil {
		return "", "", fmt.Errorf("temp dir for the test cluster: %w", err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("chown test cluster dir: %w", err)
	}
	pg.dir = dir
	fail := func(what string, err error, out []byte) (string, string, error) {
		return "", "", fmt.Errorf("%s: %w\n%s", what, err, out)
	}
	cmd := exec.Command(initdb, "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail("initdb", err, out)
	}
	port := freePort()
	cmd = exec.Command(pg.pgCtl, "-D", filepath.Join(dir, "data"), "-l", filepath.Join(dir, "log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-k %s -p %d -c listen_addresses= -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", dir, port),
		"start")
	asPostgres(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return fail("pg_ctl start", err, append(out, log...))
	}
	pg.started = true
	return fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", url.QueryEscape(dir), port), "", nil
}

// freePort picks a port number for the socket file name (.s.PGSQL.<port>);
// the cluster listens on no TCP port, so a clash is harmless anyway.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 54329
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// DSN gives t an empty schema of its own and a DSN whose
// search_path points at it.
func DSN(t testing.TB) string {
	dsn, _, drop, err := NewSchema(postgresBase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// NewSchema creates an empty schema in the database of base and returns a
// DSN whose search_path points at it, its name, and a function dropping it.
func NewSchema(base string) (dsn, schema string, drop func() error, err error) {
	db, err := sql.Open("pgx", base)
	if err != nil {
		return "", "", nil, err
	}
	defer db.Close()
	b := make([]byte, 6)
	rand.Read(b)
	schema = "kiln_test_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		return "", "", nil, fmt.Errorf("create test schema: %w", err)
	}
	drop = func() error {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop test schema: %w", err)
		}
		return nil
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema, schema, drop, nil
}
