package api_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// TestPprofOnItsOwnListener: --pprof-listen serves profiles on its address
// and the API's listener never does.
func TestPprofOnItsOwnListener(t *testing.T) {
	t.Parallel()
	paddr := kilnproc.FreeAddr(t)
	k := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "test-conductor", "--pprof-listen", paddr)
	defer k.Stop()
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + paddr + "/debug/pprof/cmdline"); code != 200 || !strings.Contains(body, "serve") {
		t.Errorf("pprof cmdline: %d %q", code, body)
	}
	if code, _ := get("http://" + paddr + "/debug/pprof/heap?debug=1"); code != 200 {
		t.Errorf("pprof heap: %d", code)
	}
	if code, _ := get(k.URL + "/debug/pprof/cmdline"); code == 200 {
		t.Errorf("the API listener serves pprof")
	}
}
