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
	type heard struct{ who, payload string }
	got := make(chan heard, 16)
	errs := make(chan error, 3)
	ready := make(chan string, 3)
	listen := func(w Waker, who, conductor string) {
		errs <- w.Listen(ctx, conductor, func() { ready <- who }, func(p string) { got <- heard{who, p} })
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
	if err := sendA.Wake(ctx, "c2", "au1\nwu2\n"); err != nil {
		t.Fatal(err)
	}
	// A marker to c3 after it: once it arrived, the first one (sent
	// before, on the same connection) has been delivered everywhere it
	// was going to be.
	if err := sendA.Wake(ctx, "c3", "marker"); err != nil {
		t.Fatal(err)
	}
	var heardBy []string
	for done := false; !done; {
		select {
		case h := <-got:
			heardBy = append(heardBy, h.who+"="+h.payload)
			done = h.who == "A/c3"
		case <-time.After(time.Minute):
			t.Fatalf("heard after a minute: %q", heardBy)
		}
	}
	if want := []string{"A/c2=au1\nwu2\n", "A/c3=marker"}; strings.Join(heardBy, "|") != strings.Join(want, "|") {
		t.Errorf("heard %q, want %q", heardBy, want)
	}
	select {
	case h := <-got:
		t.Errorf("more heard: %+v", h)
	default:
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
