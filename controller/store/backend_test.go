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
	return s
}

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
