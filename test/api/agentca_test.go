package api_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/tlstest"
)

// TestAgentCAInPerNodeRamdisk: kiln serve with a self-signed certificate
// hands agents https:// as ipa-api-url and boots every known node from a
// per-node ramdisk that carries the certificate at etc/kiln/api-ca.pem,
// where the agent looks for the CA to verify the controller with.
func TestAgentCAInPerNodeRamdisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bootDir := filepath.Join(dir, "boot")
	if err := os.MkdirAll(bootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"kiln-agent.kernel": "KERNEL", "kiln-agent.initramfs": "BASE-INITRAMFS"} {
		if err := os.WriteFile(filepath.Join(bootDir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cert := tlstest.SelfSignedServer(t)
	certFile, keyFile := cert.WriteFiles(t, dir)
	p := kilnproc.Start(t, kilnBin, filepath.Join(dir, "kiln.db"), "--conductor", "ca-test", "--boot-dir", bootDir,
		"--power-sync-interval", "0", "--tls-cert", certFile, "--tls-key", keyFile)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool()}}}
	call := func(method, path, body string) (int, []byte) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(context.Background(), method, p.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := call("POST", "/v1/nodes", `{"driver":"fake-hardware","name":"tls-node","deploy_interface":"direct","automated_clean":false,"instance_info":{"image_source":"http://x/y.raw","image_checksum":"`+strings.Repeat("0", 64)+`"}}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	var node struct{ UUID string }
	if err := json.Unmarshal(b, &node); err != nil {
		t.Fatal(err)
	}
	if code, b := call("POST", "/v1/ports", `{"node_uuid":"`+node.UUID+`","address":"52:54:00:cc:00:01"}`); code != 201 {
		t.Fatalf("port: %d %s", code, b)
	}
	for _, step := range [][2]string{{"manage", "manageable"}, {"provide", "available"}, {"active", "wait call-back"}} {
		if code, b := call("PUT", "/v1/nodes/"+node.UUID+"/states/provision", `{"target":"`+step[0]+`"}`); code != 202 {
			t.Fatalf("%s: %d %s", step[0], code, b)
		}
		deadline := time.Now().Add(3 * time.Minute) // a safety net; the loop ends on the state
		for {
			_, b := call("GET", "/v1/nodes/"+node.UUID+"?fields=provision_state", "")
			if strings.Contains(string(b), `"`+step[1]+`"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node never reached %s: %s", step[1], b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_, script := call("GET", "/boot/boot.ipxe?mac=52:54:00:cc:00:01", "")
	for _, want := range []string{"ipa-api-url=https://", "/boot/ramdisk/" + node.UUID} {
		if !strings.Contains(string(script), want) {
			t.Fatalf("agent script lacks %q:\n%s", want, script)
		}
	}
	code, rd := call("GET", "/boot/ramdisk/"+node.UUID, "")
	if code != 200 || !strings.HasPrefix(string(rd), "BASE-INITRAMFS") || !strings.Contains(string(rd), "etc/kiln/api-ca.pem") || !strings.Contains(string(rd), string(cert.CertPEM)) {
		t.Fatalf("per-node ramdisk does not carry the CA: %d %q", code, rd)
	}
}
