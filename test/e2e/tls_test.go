//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kilnhq/kiln/test/tlstest"
)

// secureAPI is kiln serve with HTTP basic auth and a self-signed certificate
// valid for 127.0.0.1 (the host's view) and 10.0.2.2 (the guests').
type secureAPI struct {
	flags          []string
	client         *http.Client
	user, password string
	cert           *tlstest.Pair
}

func newSecureAPI(t *testing.T, dir string) *secureAPI {
	t.Helper()
	cert := tlstest.SelfSignedServer(t, net.IPv4(10, 0, 2, 2))
	certFile, keyFile := cert.WriteFiles(t, dir)
	h, err := bcrypt.GenerateFromPassword([]byte("e2e-password"), 12)
	if err != nil {
		t.Fatal(err)
	}
	ht := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(ht, []byte("operator:"+string(h)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The client trusts the controller's certificate. The BMC simulator
	// (newLab) fetches the controller's ISO with it too, as a BMC set up
	// to trust the controller would; it is its own client, not a changed
	// http.DefaultTransport, which scenarios running in parallel share.
	return &secureAPI{
		flags:  []string{"--htpasswd", ht, "--tls-cert", certFile, "--tls-key", keyFile},
		client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool()}}},
		user:   "operator", password: "e2e-password", cert: cert,
	}
}

// TestTLSAuthVirtualMedia: the controller with --htpasswd and a self-signed
// certificate; a UEFI machine boots the ISO the controller builds, whose
// initramfs carries the certificate as the agents' CA. The agent verifies
// the controller over HTTPS (lookup, heartbeats), the machine is inspected,
// deployed and boots its image; the API refuses a caller without
// credentials throughout.
func TestTLSAuthVirtualMedia(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Skip("xorriso not found: the controller builds virtual-media ISOs with it (apt-get install xorriso)")
	}
	l := newLab(t, "tls", labOpts{uefi: true, secure: true})
	defer l.summary()
	if !strings.HasPrefix(l.kiln.URL, "https://") {
		t.Fatalf("controller URL %s", l.kiln.URL)
	}
	resp, err := l.secure.client.Get(l.kiln.URL + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /v1/nodes: %s", resp.Status)
	}

	l.enrollWith("redfish-virtual-media", false, nil)
	ons := l.vm.PowerOns()
	l.provision("manage", nil)
	l.waitState("manageable", time.Minute, nil)
	p := l.begin()
	l.provision("inspect", nil)
	l.waitState("manageable", 4*time.Minute, p)
	l.phaseTimings("inspect", p, time.Now())
	console := l.serialSince(ons)
	if !strings.Contains(console, "boot order cd") {
		t.Errorf("the agent did not boot from the virtual CD (power-on lines: %q)", powerOnLines(console))
	}
	if strings.Contains(console, "not trusted") {
		t.Errorf("the agent did not trust the controller:\n%s", tail(console, 4096))
	}

	l.provision("provide", nil)
	l.waitState("available", time.Minute, nil)
	_, ons = l.deployImage("good.qcow2", "qcow2", sha256Of(t, "good.qcow2"), "active")
	l.checkBooted(ons, "good", time.Now())
	if m, _ := l.vm.Media(context.Background()); m.Inserted {
		t.Errorf("the agent ISO is still inserted after the deploy: %+v", m)
	}
}
