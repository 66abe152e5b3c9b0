package kilnproc

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestMain lets the test binary stand in for kiln: with
// KILNPROC_FAKE_KILN set, `serve --listen ADDR` binds ADDR as kiln does
// (and fails as kiln does when it is taken) and answers GET /v1/.
func TestMain(m *testing.M) {
	if os.Getenv("KILNPROC_FAKE_KILN") != "" {
		fakeKiln(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

func fakeKiln(args []string) {
	addr := ""
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			addr = args[i+1]
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kiln: listen on %s: %v\n", addr, err)
		os.Exit(1)
	}
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
}

// TestStartTriesAnotherPortWhenOneIsTaken: a port taken between FreeAddr
// and kiln's bind (another process on a busy machine) costs a retry, not
// the test.
func TestStartTriesAnotherPortWhenOneIsTaken(t *testing.T) {
	t.Setenv("KILNPROC_FAKE_KILN", "1")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	freeAddr = func(t testing.TB) string {
		calls++
		if calls <= 2 {
			return taken.Addr().String() // "free" when chosen, taken at bind
		}
		return FreeAddr(t)
	}
	defer func() { freeAddr = FreeAddr }()
	p := Start(t, os.Args[0], filepath.Join(t.TempDir(), "kiln.db"))
	if calls != 3 {
		t.Errorf("Start chose %d addresses, want 3 (two taken)", calls)
	}
	if p.URL == "http://"+taken.Addr().String() {
		t.Errorf("Start answered with the taken address %s", p.URL)
	}
	resp, err := http.Get(p.URL + "/v1/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
