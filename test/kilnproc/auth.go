package kilnproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// AuthFlags writes an htpasswd file with the users admin (password
// admin-pw) and viewer (viewer-pw), and a roles file that makes viewer a
// reader, and returns the kiln serve flags that use them.
func AuthFlags(t testing.TB) []string {
	t.Helper()
	dir := t.TempDir()
	var ht strings.Builder
	for _, u := range [][2]string{{"admin", "admin-pw"}, {"viewer", "viewer-pw"}} {
		h, err := bcrypt.GenerateFromPassword([]byte(u[1]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		ht.WriteString(u[0] + ":" + string(h) + "\n")
	}
	htFile, rolesFile := filepath.Join(dir, "htpasswd"), filepath.Join(dir, "roles")
	if err := os.WriteFile(htFile, []byte(ht.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rolesFile, []byte("viewer:reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--htpasswd", htFile, "--auth-roles", rolesFile}
}
