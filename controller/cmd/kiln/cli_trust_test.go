package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/tlstest"
)

// TestCLIBasicAuthOverTLS: the CLI takes credentials from OS_USERNAME /
// OS_PASSWORD (OS_AUTH_TYPE=http_basic, as the OpenStack client does) and
// the controller's CA from OS_CACERT, against kiln serve with --htpasswd and
// a certificate of a private CA.
func TestCLIBasicAuthOverTLS(t *testing.T) {
	for _, k := range []string{"KILN_URL", "OS_ENDPOINT", "OS_AUTH_TYPE", "OS_USERNAME", "OS_PASSWORD", "OS_CACERT"} {
		t.Setenv(k, "")
	}
	t.Setenv("KILN_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	dir := t.TempDir()
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	ht := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(ht, []byte("ops:"+string(h)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "kiln test CA")
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir)
	caFile := filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM)
	p := kilnproc.Start(t, kilnBin, filepath.Join(dir, "kiln.db"), "--conductor", "test-conductor", "--power-sync-interval", "0",
		"--htpasswd", ht, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(p.URL, "https://") {
		t.Fatalf("URL %s", p.URL)
	}

	// Not trusting the controller's CA: refused, saying why.
	_, stderr, code := cli(t, p, "node", "list")
	if code == 0 || !strings.Contains(stderr, "certificate signed by unknown authority") {
		t.Fatalf("untrusted CA: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("OS_CACERT", caFile)
	// Trusted, no credentials: the API's 401.
	_, stderr, code = cli(t, p, "node", "list")
	if code == 0 || !strings.Contains(stderr, "credentials") {
		t.Fatalf("no credentials: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("OS_AUTH_TYPE", "http_basic")
	t.Setenv("OS_USERNAME", "ops")
	t.Setenv("OS_PASSWORD", "wrong")
	_, stderr, code = cli(t, p, "node", "list")
	if code == 0 || !strings.Contains(stderr, "Incorrect username or password") {
		t.Fatalf("wrong password: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("OS_PASSWORD", "s3cret")
	if out, stderr, code := cli(t, p, "node", "create", "--driver", "fake-hardware", "--name", "tls-node"); code != 0 {
		t.Fatalf("create: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code := cli(t, p, "node", "list")
	if code != 0 || !strings.Contains(out, "tls-node") {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}

	// --insecure skips verification, for a first look at a new controller.
	t.Setenv("OS_CACERT", "")
	if out, stderr, code := cli(t, p, "node", "list", "--insecure"); code != 0 || !strings.Contains(out, "tls-node") {
		t.Fatalf("--insecure: exit %d\n%s%s", code, out, stderr)
	}
	// The config file carries the CA and the credentials too.
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("auth_type: http_basic\nusername: ops\npassword: s3cret\ncacert: "+caFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"OS_AUTH_TYPE", "OS_USERNAME", "OS_PASSWORD"} {
		t.Setenv(k, "")
	}
	if out, stderr, code := cli(t, p, "node", "list", "--config", cfg); code != 0 || !strings.Contains(out, "tls-node") {
		t.Fatalf("config file: exit %d\n%s%s", code, out, stderr)
	}
}
