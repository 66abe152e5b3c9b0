package store

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/pgtest"
)

// The PostgreSQL half of the suite runs on test/pgtest's database: the one
// named by KILN_TEST_POSTGRES_DSN, or a throwaway cluster (as root, with
// Debian's postgresql), or it skips saying why.

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// backend names a fresh, empty database of one kind.
type backend struct {
	name  string
	newDB func(t testing.TB) string
}

var backends = []backend{
	{"sqlite", func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "kiln.db") }},
	{"postgres", pgtest.DSN},
}

// eachBackend runs f as a subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b.newDB(t)) })
	}
}

func openT(t testing.TB, dsn string, opts Options) Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	if ss, ok := s.(*sqlStore); ok && ss.d.name == "sqlite" {
		guardRowVersion(t, ss)
	}
	return s
}

// guardRowVersion makes SQLite refuse, for the rest of the test, any
// UPDATE of nodes that changes what the API renders of a node without
// bumping its row version (bumpRowVersion): every store test then checks
// every write path it runs. Setting masked_doc to NULL is allowed (the
// trigger on doc does it after a bumped write; it derives the same view).
func guardRowVersion(t testing.TB, s *sqlStore) {
	t.Helper()
	if _, err := s.wdb.ExecContext(context.Background(), "CREATE TRIGGER IF NOT EXISTS test_nodes_row_version BEFORE UPDATE ON nodes"+
		" WHEN NEW.row_version = OLD.row_version AND (NEW.doc IS NOT OLD.doc OR NEW.reservation IS NOT OLD.reservation"+
		" OR NEW.provision_state IS NOT OLD.provision_state OR (NEW.masked_doc IS NOT OLD.masked_doc AND NEW.masked_doc IS NOT NULL))"+
		" BEGIN SELECT RAISE(ABORT, '"+rowVersionNotBumped+"'); END"); err != nil {
		t.Fatalf("guard row_version: %v", err)
	}
}

// rowVersionNotBumped is guardRowVersion's error.
const rowVersionNotBumped = "an UPDATE of nodes changed what the API renders without bumping row_version"

// fakeClock is an injectable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
