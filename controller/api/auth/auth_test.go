package auth

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kilnhq/kiln/proto"
)

func hash(t *testing.T, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// apacheHash is a bcrypt hash with the $2y$ prefix Apache's htpasswd -B
// writes (the same algorithm as $2a$/$2b$).
func apacheHash(t *testing.T, pw string) string {
	return "$2y$" + strings.TrimPrefix(hash(t, pw), "$2a$")
}

func TestParseHtpasswd(t *testing.T) {
	good := hash(t, "pw")
	for _, tc := range []struct {
		name, data, wantErr string
		users               int
	}{
		{"bcrypt", "# operators\n\nalice:" + good + "\nbob:" + apacheHash(t, "pw") + "\n", "", 2},
		{"apr1", "alice:" + good + "\nbob:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n", "f line 2: user \"bob\" has a MD5 (apr1) hash", 0},
		{"sha", "carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "f line 1: user \"carol\" has a SHA-1 ({SHA}) hash", 0},
		{"crypt", "dave:rOK3FHD0Q5mUo\n", "f line 1: user \"dave\" has a DES crypt or plain-text hash", 0},
		{"md5crypt", "erin:$1$abc$def\n", "MD5 crypt", 0},
		{"sha512crypt", "erin:$6$abc$def\n", "SHA crypt", 0},
		{"plain", "frank:hunter2\n", "f line 1: user \"frank\" has a plain-text or unknown hash", 0},
		{"truncated bcrypt", "gina:" + good[:40] + "\n", "malformed bcrypt", 0},
		{"no colon", "\n\nhank\n", "f line 3: want user:bcrypt-hash", 0},
		{"duplicate", "alice:" + good + "\nalice:" + good + "\n", "appears twice", 0},
		{"empty", "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			users, err := parseHtpasswd("f", []byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				for _, line := range strings.Split(tc.data, "\n") {
					if _, h, _ := strings.Cut(line, ":"); len(h) > 4 && strings.Contains(err.Error(), h) {
						t.Fatalf("error shows the hash: %v", err)
					}
				}
				return
			}
			if err != nil || len(users) != tc.users {
				t.Fatalf("users = %v, err = %v; want %d users", users, err, tc.users)
			}
		})
	}
}

func TestParseRoles(t *testing.T) {
	roles, err := parseRoles("r", []byte("# roles\nalice: admin\nbob:reader\n"))
	if err != nil || roles["alice"] != Admin || roles["bob"] != Reader || len(roles) != 2 {
		t.Fatalf("roles = %v, err = %v", roles, err)
	}
	if _, err := parseRoles("r", []byte("bob:reader\ncarol:root\n")); err == nil || !strings.Contains(err.Error(), `r line 2: user "carol": unknown role "root"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		method, path, raw string
		open              bool
	}{
		{"GET", "/", "", true},
		{"HEAD", "/", "", true},
		{"POST", "/", "", false},
		{"GET", "/v1", "", true},
		{"GET", "/v1/", "", true},
		{"DELETE", "/v1/", "", false},
		{"GET", "/v1/lookup", "", true},
		{"POST", "/v1/heartbeat/1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "", true},
		{"POST", "/v1/heartbeat/", "", false},
		{"POST", "/v1/heartbeat/x/y", "", false},
		{"POST", "/v1/continue_inspection", "", true},
		{"GET", "/boot/boot.ipxe", "", true},
		{"GET", "/boot/files/kiln-agent.kernel", "", true},
		{"GET", "/boot/../v1/nodes", "", false},
		{"GET", "/boot/x/../../v1/nodes", "", false},
		{"GET", "//v1/lookup", "", false},
		{"GET", "/boot/a/b", "/boot%2Fa/b", false},
		{"GET", "/v1/nodes", "", false},
		{"GET", "/v1/events", "", false},
		{"GET", "/metrics", "", false},
		{"GET", "/v1/lookup/../nodes", "", false},
		{"GET", "", "", false},
	} {
		if got := Open(tc.method, tc.path, tc.raw); got != tc.open {
			t.Errorf("Open(%s %q raw %q) = %v, want %v", tc.method, tc.path, tc.raw, got, tc.open)
		}
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	a        *Authenticator
	clock    *fakeClock
	ht, role string
	compares atomic.Int64
}

func newFixture(t *testing.T, htpasswd, roles string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}, ht: filepath.Join(dir, "htpasswd")}
	writeFile(t, f.ht, htpasswd)
	o := Options{Htpasswd: f.ht, CheckEvery: 5 * time.Second, Now: f.clock.Now, Log: slog.New(slog.DiscardHandler)}
	if roles != "" {
		f.role = filepath.Join(dir, "roles")
		writeFile(t, f.role, roles)
		o.Roles = f.role
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	compare := a.compare
	a.compare = func(h, p []byte) error { f.compares.Add(1); return compare(h, p) }
	f.a = a
	return f
}

// writeFile replaces the file atomically (rename), as editors and
// configuration tools do, so a new inode tells the change apart even when
// size and modification time happen to match.
func writeFile(t *testing.T, name, data string) {
	t.Helper()
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) check(t *testing.T, user, pw string, want Role, wantOK bool) {
	t.Helper()
	role, ok := f.a.Authenticate(user, pw)
	if ok != wantOK || role != want {
		t.Fatalf("Authenticate(%s) = %q, %v; want %q, %v", user, role, ok, want, wantOK)
	}
}

func TestAuthenticateCachesPerCredential(t *testing.T) {
	f := newFixture(t, "alice:"+hash(t, "a-pw")+"\nbob:"+hash(t, "b-pw")+"\n", "bob:reader\n")
	for range 100 {
		f.check(t, "alice", "a-pw", Admin, true)
		f.check(t, "bob", "b-pw", Reader, true)
	}
	if n := f.compares.Load(); n != 2 {
		t.Fatalf("bcrypt ran %d times for 200 checks of 2 credentials, want 2", n)
	}
	// Wrong passwords and unknown users are never cached as good, and
	// each costs one bcrypt comparison (unknown users too: no timing oracle).
	f.check(t, "alice", "b-pw", "", false)
	f.check(t, "alice", "a-pw ", "", false)
	f.check(t, "mallory", "a-pw", "", false)
	if n := f.compares.Load(); n != 5 {
		t.Fatalf("bcrypt ran %d times, want 5", n)
	}
}

func TestReloadOnChange(t *testing.T) {
	f := newFixture(t, "alice:"+hash(t, "old")+"\n", "")
	f.check(t, "alice", "old", Admin, true)

	// The password changes; until CheckEvery has passed the file is not
	// even looked at, and the cached credential still works.
	writeFile(t, f.ht, "alice:"+hash(t, "new")+"\ncarol:"+hash(t, "c")+"\n")
	f.clock.Advance(4 * time.Second)
	f.check(t, "alice", "old", Admin, true)
	f.check(t, "carol", "c", "", false)

	f.clock.Advance(time.Second)
	f.check(t, "alice", "old", "", false) // the cache went with the reload
	f.check(t, "alice", "new", Admin, true)
	f.check(t, "carol", "c", Admin, true)

	// A broken file keeps the last good one in force.
	writeFile(t, f.ht, "alice:$apr1$x$y\n")
	f.clock.Advance(5 * time.Second)
	f.check(t, "alice", "new", Admin, true)
	f.check(t, "carol", "c", Admin, true)

	// Removing a user revokes it at the next check.
	writeFile(t, f.ht, "alice:"+hash(t, "new")+"\n")
	f.clock.Advance(5 * time.Second)
	f.check(t, "carol", "c", "", false)
	f.check(t, "alice", "new", Admin, true)
}

func TestApacheBcryptPrefix(t *testing.T) {
	f := newFixture(t, "alice:"+apacheHash(t, "pw")+"\n", "")
	f.check(t, "alice", "pw", Admin, true)
	f.check(t, "alice", "pW", "", false)
}

func TestRolesReload(t *testing.T) {
	f := newFixture(t, "bob:"+hash(t, "b")+"\n", "# none yet\n")
	f.check(t, "bob", "b", Admin, true)
	writeFile(t, f.role, "bob:reader\n")
	f.clock.Advance(5 * time.Second)
	f.check(t, "bob", "b", Reader, true)
}

func TestNewRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	ht := filepath.Join(dir, "htpasswd")
	writeFile(t, ht, "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n")
	if _, err := New(Options{Htpasswd: ht}); err == nil || !strings.Contains(err.Error(), ht+" line 1") {
		t.Fatalf("err = %v, want it to name %s line 1", err, ht)
	}
	if _, err := New(Options{Htpasswd: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("missing file accepted")
	}
	writeFile(t, ht, "alice:"+hash(t, "a")+"\n")
	roles := filepath.Join(dir, "roles")
	writeFile(t, roles, "alice:superuser\n")
	if _, err := New(Options{Htpasswd: ht, Roles: roles}); err == nil || !strings.Contains(err.Error(), "unknown role") {
		t.Fatalf("err = %v", err)
	}
}

func TestMiddleware(t *testing.T) {
	f := newFixture(t, "alice:"+hash(t, "a")+"\nbob:"+hash(t, "b")+"\n", "bob:reader\n")
	var seen Identity
	h := f.a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = FromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tc := range []struct {
		method, path, user, pw string
		want                   int
		who                    Identity
	}{
		{"GET", "/v1/nodes", "", "", 401, Identity{}},
		{"GET", "/v1/nodes", "alice", "wrong", 401, Identity{}},
		{"GET", "/v1/nodes", "nobody", "a", 401, Identity{}},
		{"GET", "/v1/nodes", "alice", "a", 204, Identity{"alice", Admin}},
		{"POST", "/v1/nodes", "alice", "a", 204, Identity{"alice", Admin}},
		{"GET", "/v1/nodes", "bob", "b", 204, Identity{"bob", Reader}},
		{"HEAD", "/metrics", "bob", "b", 204, Identity{"bob", Reader}},
		{"PATCH", "/v1/nodes/x", "bob", "b", 403, Identity{}},
		{"DELETE", "/v1/nodes/x", "bob", "b", 403, Identity{}},
		{"POST", "/v1/heartbeat/x", "", "", 204, Identity{}},
		{"POST", "/v1/heartbeat/x", "bob", "wrong", 204, Identity{}},
	} {
		seen = Identity{}
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.user != "" {
			req.SetBasicAuth(tc.user, tc.pw)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want || seen != tc.who {
			t.Errorf("%s %s as %q: %d as %+v, want %d as %+v", tc.method, tc.path, tc.user, rec.Code, seen, tc.want, tc.who)
			continue
		}
		if tc.want == 401 && rec.Header().Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
			t.Errorf("401 without the Basic challenge: %q", rec.Header().Get("WWW-Authenticate"))
		}
		if tc.want >= 400 {
			var body proto.ErrorBody
			var inner proto.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || json.Unmarshal([]byte(body.ErrorMessage), &inner) != nil || inner.FaultString == "" || inner.FaultCode != "Client" {
				t.Errorf("%s %s: not Ironic's error body: %s", tc.method, tc.path, rec.Body)
			}
		}
	}
}

// TestConcurrentAuthenticate runs checks and reloads at once (go test -race).
func TestConcurrentAuthenticate(t *testing.T) {
	line := "alice:" + hash(t, "a") + "\n"
	f := newFixture(t, line, "")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				if i == 0 && j%10 == 0 {
					// A fresh inode: the next check reloads.
					tmp := f.ht + ".tmp"
					if err := os.WriteFile(tmp, []byte(line), 0o600); err != nil || os.Rename(tmp, f.ht) != nil {
						t.Error("rewrite htpasswd failed")
						return
					}
					f.clock.Advance(5 * time.Second)
				}
				if _, ok := f.a.Authenticate("alice", "a"); !ok {
					t.Error("alice refused")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkMiddlewareCached is what auth adds to each request once a
// credential has been checked: the salted hash, the cache lookup, the
// stat-interval check; first-check is bcrypt at
// cost 12, paid once per credential.
func BenchmarkMiddlewareCached(b *testing.B) {
	h, err := bcrypt.GenerateFromPassword([]byte("bench-pw"), 12)
	if err != nil {
		b.Fatal(err)
	}
	ht := filepath.Join(b.TempDir(), "htpasswd")
	if err := os.WriteFile(ht, []byte("bench:"+string(h)+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	a, err := New(Options{Htpasswd: ht, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	req := httptest.NewRequest("GET", "/v1/nodes?limit=100", nil)
	req.SetBasicAuth("bench", "bench-pw")
	b.Run("first-check", func(b *testing.B) {
		for b.Loop() {
			a.mu.Lock()
			clear(a.cache)
			a.mu.Unlock()
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				b.Fatal(rec.Code)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				b.Fatal(rec.Code)
			}
		}
	})
}
