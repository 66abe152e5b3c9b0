package agent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/tlstest"
)

func TestCAFileFromCmdline(t *testing.T) {
	c := DefaultConfig()
	ParseCmdline(&c, "ipa-api-url=https://10.0.0.1:6385 ipa-cafile=/etc/kiln/api-ca.pem", nil)
	if c.CAFile != "/etc/kiln/api-ca.pem" || c.Insecure {
		t.Fatalf("CAFile %q, Insecure %v", c.CAFile, c.Insecure)
	}
}

// TestLookupVerifiesController: the agent's lookup against a TLS controller
// fails, saying how to fix it, unless it trusts the controller's CA
// (ipa-cafile) or is told ipa-insecure.
func TestLookupVerifiesController(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/lookup" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(proto.LookupResponse{Node: proto.LookupNode{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"}})
	}))
	defer srv.Close()
	dir := t.TempDir()
	ownCA := filepath.Join(dir, "controller-ca.pem")
	if err := os.WriteFile(ownCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(dir, "other-ca.pem")
	tlstest.WriteFile(t, otherCA, tlstest.NewCA(t, "other CA").PEM)
	garbage := filepath.Join(dir, "garbage.pem")
	tlstest.WriteFile(t, garbage, []byte("not a certificate"))

	lookup := func(cfg Config) error {
		t.Helper()
		hc, err := controllerHTTPClient(cfg)
		if err != nil {
			return err
		}
		c := &client{base: srv.URL, http: hc, userAgent: "test"}
		resp, _, err := c.lookup(context.Background(), Microversion{1, 95}, []string{"52:54:00:12:34:56"}, "")
		if err == nil && resp.Node.UUID != "1be26c0b-03f2-4d2e-ae87-c02d7f33c123" {
			t.Fatalf("lookup answered %+v", resp)
		}
		return err
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"another CA", Config{CAFile: otherCA}, "is not trusted (give its CA with ipa-cafile, or set ipa-insecure=1)"},
		{"system CAs", Config{}, "is not trusted"},
		{"CA file not PEM", Config{CAFile: garbage}, "no PEM certificate"},
		{"CA file missing", Config{CAFile: filepath.Join(dir, "missing.pem")}, "ipa-cafile"},
		{"the controller's CA", Config{CAFile: ownCA}, ""},
		{"insecure", Config{Insecure: true, CAFile: otherCA}, ""},
	} {
		err := lookup(tc.cfg)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
