// Package auth guards Kiln's HTTP API with HTTP basic authentication against
// an Apache htpasswd file of bcrypt hashes (the file Ironic's http_basic auth
// reads), plus a role per user: admin (everything) or reader (GET and HEAD).
// Both files are re-read when they change, so that credentials rotate without
// a restart.
package auth

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Role is what an authenticated user may do.
type Role string

const (
	// Admin may call every route. It is the role of a user the roles file
	// does not name.
	Admin Role = "admin"
	// Reader may only read: GET and HEAD. Secrets stay masked for readers.
	Reader Role = "reader"
)

// parseHtpasswd reads "user:hash" lines; blank lines and # comments are
// skipped. Only bcrypt hashes are accepted: the other schemes htpasswd can
// write (apr1 MD5, {SHA}, crypt, plain text) are cheap to brute-force.
func parseHtpasswd(name string, data []byte) (map[string][]byte, error) {
	users := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" || hash == "" {
			return nil, fmt.Errorf("%s line %d: want user:bcrypt-hash", name, n)
		}
		if scheme := weakScheme(hash); scheme != "" {
			return nil, fmt.Errorf("%s line %d: user %q has a %s hash; only bcrypt is accepted (htpasswd -B)", name, n, user, scheme)
		}
		if _, dup := users[user]; dup {
			return nil, fmt.Errorf("%s line %d: user %q appears twice", name, n, user)
		}
		users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return users, nil
}

// weakScheme names the hash scheme of h when it is not bcrypt, "" when it is.
func weakScheme(h string) string {
	switch {
	case strings.HasPrefix(h, "$2y$"), strings.HasPrefix(h, "$2a$"), strings.HasPrefix(h, "$2b$"):
		if len(h) == 60 {
			return ""
		}
		return "malformed bcrypt"
	case strings.HasPrefix(h, "$apr1$"):
		return "MD5 (apr1)"
	case strings.HasPrefix(h, "{SHA}"):
		return "SHA-1 ({SHA})"
	case strings.HasPrefix(h, "$1$"):
		return "MD5 crypt ($1$)"
	case strings.HasPrefix(h, "$5$"), strings.HasPrefix(h, "$6$"):
		return "SHA crypt"
	case len(h) == 13:
		return "DES crypt or plain-text"
	default:
		return "plain-text or unknown"
	}
}

// parseRoles reads "user:role" lines (role admin or reader); blank lines and
// # comments are skipped.
func parseRoles(name string, data []byte) (map[string]Role, error) {
	roles := map[string]Role{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, role, ok := strings.Cut(line, ":")
		user, role = strings.TrimSpace(user), strings.TrimSpace(role)
		if !ok || user == "" {
			return nil, fmt.Errorf("%s line %d: want user:role", name, n)
		}
		switch Role(role) {
		case Admin, Reader:
		default:
			return nil, fmt.Errorf("%s line %d: user %q: unknown role %q (want admin or reader)", name, n, user, role)
		}
		roles[user] = Role(role)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return roles, nil
}
