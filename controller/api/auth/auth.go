package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Options configure an Authenticator.
type Options struct {
	// Htpasswd is the Apache htpasswd file of user:bcrypt-hash lines.
	Htpasswd string
	// Roles, when set, is a file of user:role lines (admin or reader); users
	// it does not name are admins.
	Roles string
	// CheckEvery is how often, at most, the files are stat'ed for changes
	// [2s]. A request arriving later than that after the last check triggers
	// the check; nothing runs in the background.
	CheckEvery time.Duration
	// Now is the clock [time.Now]; tests pass a fake one.
	Now func() time.Time
	// Log reports reloads and files that fail to parse [slog.Default()].
	Log *slog.Logger
}

// maxCache bounds the verification cache: past it the cache starts afresh,
// so that a stream of distinct valid credentials cannot grow memory.
const maxCache = 4096

// Authenticator checks basic credentials against the htpasswd file. A
// successful check is cached per credential (a salted hash of user and
// password, never the password itself), so bcrypt's deliberate cost is paid
// once per credential rather than once per request; a reload empties the cache.
type Authenticator struct {
	opts Options
	salt [32]byte

	mu        sync.Mutex
	lastCheck time.Time
	htStat    os.FileInfo
	roleStat  os.FileInfo
	users     map[string][]byte
	roles     map[string]Role
	gen       uint64
	dummyCost int // the highest bcrypt cost in the file
	cache     map[[32]byte]Role
	// compare is bcrypt.CompareHashAndPassword; tests count its calls.
	compare func(hash, password []byte) error
}

// New reads the files; an unreadable or invalid file is an error, so that
// kiln serve refuses to start rather than run with fewer users than meant.
func New(o Options) (*Authenticator, error) {
	if o.Htpasswd == "" {
		return nil, errors.New("no htpasswd file given")
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	a := &Authenticator{opts: o, cache: map[[32]byte]Role{}, compare: bcrypt.CompareHashAndPassword}
	if _, err := rand.Read(a.salt[:]); err != nil {
		return nil, err
	}
	if err := a.load(); err != nil {
		return nil, err
	}
	a.lastCheck = o.Now()
	return a, nil
}

// load reads both files and replaces users, roles and cache; on error nothing changes.
func (a *Authenticator) load() error {
	htStat, data, err := readFile(a.opts.Htpasswd)
	if err != nil {
		return err
	}
	users, err := parseHtpasswd(a.opts.Htpasswd, data)
	if err != nil {
		return err
	}
	var roleStat os.FileInfo
	roles := map[string]Role{}
	if a.opts.Roles != "" {
		if roleStat, data, err = readFile(a.opts.Roles); err != nil {
			return err
		}
		if roles, err = parseRoles(a.opts.Roles, data); err != nil {
			return err
		}
	}
	a.dummyCost = bcrypt.MinCost
	for _, h := range users {
		if c, err := bcrypt.Cost(h); err == nil && c > a.dummyCost {
			a.dummyCost = c
		}
	}
	a.htStat, a.roleStat, a.users, a.roles = htStat, roleStat, users, roles
	a.gen++
	clear(a.cache)
	return nil
}

func readFile(name string) (os.FileInfo, []byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() > 16<<20 {
		return nil, nil, fmt.Errorf("%s: larger than 16 MiB", name)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	return st, data, nil
}

// changed reports whether the file at name is no longer the one last read.
func changed(name string, old os.FileInfo) bool {
	st, err := os.Stat(name)
	if err != nil {
		return true
	}
	return !os.SameFile(st, old) || !st.ModTime().Equal(old.ModTime()) || st.Size() != old.Size()
}

// maybeReload re-reads the files when CheckEvery has passed and one of them
// changed. A file that no longer parses leaves the last good one in force
// (an editor's half-written save must not lock every operator out) and is
// logged at error level. Call with a.mu held.
func (a *Authenticator) maybeReload() {
	now := a.opts.Now()
	if now.Sub(a.lastCheck) < a.opts.CheckEvery {
		return
	}
	a.lastCheck = now
	if !changed(a.opts.Htpasswd, a.htStat) && (a.opts.Roles == "" || !changed(a.opts.Roles, a.roleStat)) {
		return
	}
	if err := a.load(); err != nil {
		a.opts.Log.Error("auth files changed but cannot be read: still using the previous ones", "err", err)
		return
	}
	a.opts.Log.Info("auth files reloaded", "htpasswd", a.opts.Htpasswd, "roles", a.opts.Roles, "users", len(a.users))
}

func (a *Authenticator) key(user, password string) [32]byte {
	h := sha256.New()
	h.Write(a.salt[:])
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(password))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// dummyHashes holds, per bcrypt cost, a hash compared against when the user
// is unknown, so that an unknown user costs as much as a wrong password
// and timing tells nothing.
var dummyHashes sync.Map

func dummyHash(cost int) []byte {
	if h, ok := dummyHashes.Load(cost); ok {
		return h.([]byte)
	}
	h, _ := bcrypt.GenerateFromPassword([]byte("kiln-no-such-user"), cost)
	dummyHashes.Store(cost, h)
	return h
}

// Authenticate checks user and password and returns the user's role.
func (a *Authenticator) Authenticate(user, password string) (Role, bool) {
	k := a.key(user, password)
	a.mu.Lock()
	a.maybeReload()
	if r, ok := a.cache[k]; ok {
		a.mu.Unlock()
		return r, true
	}
	hash, known := a.users[user]
	role := a.roles[user]
	gen, dummyCost := a.gen, a.dummyCost
	a.mu.Unlock()
	if role == "" {
		role = Admin
	}
	if !known {
		_ = a.compare(dummyHash(dummyCost), []byte(password))
		return "", false
	}
	if a.compare(hash, []byte(password)) != nil {
		return "", false
	}
	a.mu.Lock()
	if a.gen == gen {
		if len(a.cache) >= maxCache {
			clear(a.cache)
		}
		a.cache[k] = role
	}
	a.mu.Unlock()
	return role, true
}
