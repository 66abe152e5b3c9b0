package osctool_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/osctool"
)

// TestSessionMatchesTheScript: a session prints what the installed
// `openstack` prints, with the same exit status, for a help page, a
// command it does not know and one the server refuses.
func TestSessionMatchesTheScript(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-OpenStack-Ironic-API-Minimum-Version", "1.1")
		w.Header().Set("X-OpenStack-Ironic-API-Maximum-Version", "1.95")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error_message": "{\"faultstring\": \"Node n1 could not be found.\", \"faultcode\": \"Client\", \"debuginfo\": null}"}`)
	}))
	defer srv.Close()
	endpoint := srv.URL
	s := osctool.Start(t, endpoint)
	bin, err := exec.LookPath("openstack")
	if err != nil {
		t.Fatal(err) // Start skipped already if it were absent
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OS_") })
	env = append(env, "OS_ENDPOINT="+endpoint, "OS_AUTH_TYPE=none")
	for _, args := range [][]string{
		{"baremetal", "node", "show", "--help"},
		{"baremetal", "no-such-command"},
		{"baremetal", "node", "show", "n1", "-f", "json"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		want, err := cmd.CombinedOutput()
		wantCode := 0
		if ee, ok := err.(*exec.ExitError); ok {
			wantCode = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got, code, err := s.Run(args...)
		if err != nil {
			t.Fatal(err)
		}
		if code != wantCode || got != string(want) {
			t.Errorf("openstack %s: session printed (exit %d)\n%s\nthe script (exit %d)\n%s", strings.Join(args, " "), code, got, wantCode, want)
		}
	}
}
