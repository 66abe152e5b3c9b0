package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/pgtest"
)

func TestWakerOfSQLiteIsNil(t *testing.T) {
	s := openT(t, "sqlite://"+filepath.Join(t.TempDir(), "kiln.db"), Options{})
	if w := WakerOf(s); w != nil {
		t.Fatalf("WakerOf(SQLite) = %T, want nil: one controller wakes itself in process", w)
	}
}

// TestWakerPostgres: a wake-up reaches the conductor it names, on the
// schema it was sent on, and no other (channels are cluster-wide, and
// schemas in one database are separate Kilns).
func TestWakerPostgres(t *testing.T) {
	dsnA := pgtest.DSN(t)
	dsnB := pgtest.DSN(t)
	sendA := WakerOf(openT(t, dsnA, Options{}))
	listenA := WakerOf(openT(t, dsnA, Options{}))
	listenB := WakerOf(openT(t, dsnB, Options{}))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type note struct{ who, payload string }
	got := make(chan note, 16)
	errs := make(chan error, 3)
	ready := make(chan string, 3)
	listen := func(w Waker, who, conductor string) {
		errs <- w.Listen(ctx, conductor, func() { ready <- who }, func(p string) { got <- note{who, p} })
	}
	go listen(listenA, "A/c2", "c2")
	go listen(listenA, "A/c3", "c3")
	go listen(listenB, "B/c2", "c2") // same conductor name, other schema
	for range 3 {
		select {
		case <-ready:
		case err := <-errs:
			t.Fatalf("listen: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("listeners not ready after a minute")
		}
	}
	// Each listener hears its notifications in commit order; listeners
	// are not ordered among themselves. So: one to A's c2, one to A's c3,
	// then a last one to B's c2, sent after the first was committed. Had
	// the first reached B's channel, B would hear it before the last.
	if err := sendA.Wake(ctx, "c2", "au1\nwu2\n"); err != nil {
		t.Fatal(err)
	}
	if err := sendA.Wake(ctx, "c3", "marker"); err != nil {
		t.Fatal(err)
	}
	if err := listenB.Wake(ctx, "c2", "only-b"); err != nil {
		t.Fatal(err)
	}
	heard := map[string][]string{}
	for len(heard) < 3 {
		select {
		case h := <-got:
			heard[h.who] = append(heard[h.who], h.payload)
		case <-time.After(time.Minute):
			t.Fatalf("heard after a minute: %q", heard)
		}
	}
	want := map[string][]string{"A/c2": {"au1\nwu2\n"}, "A/c3": {"marker"}, "B/c2": {"only-b"}}
	for who, p := range want {
		if strings.Join(heard[who], "|") != strings.Join(p, "|") {
			t.Errorf("%s heard %q, want %q", who, heard[who], p)
		}
	}
	if err := sendA.Wake(ctx, "c2", strings.Repeat("x", WakePayloadMax+1)); err == nil {
		t.Error("an oversized payload was sent")
	}
	cancel()
	for range 3 {
		if err := <-errs; err == nil {
			t.Error("Listen returned nil after its context ended")
		}
	}
}
