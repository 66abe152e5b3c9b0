package certreload_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/certreload"
	"github.com/kilnhq/kiln/test/tlstest"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testServer is an HTTPS server on loopback.
type testServer struct{ URL string }

// server serves handler over TLS with the reloaded certificate, configured
// as kiln serve does (httptest's StartTLS would put its own certificate first).
func server(t *testing.T, r *certreload.Reloader, clientCA string, handler http.Handler) *testServer {
	t.Helper()
	cfg, err := certreload.ServerConfig(r, clientCA)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: cfg, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close(); <-done })
	return &testServer{URL: "https://" + ln.Addr().String()}
}

// client trusts pool and opens a new connection per request, so each
// request is a fresh handshake.
func client(pool *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: certs},
	}}
}

func servedSerial(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.TLS.PeerCertificates[0].SerialNumber.String()
}

// TestReloadWhileInFlight: a request in flight when the certificate is
// replaced completes on its connection; new handshakes see the new one.
func TestReloadWhileInFlight(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	old, renewed := ca.Server(t), ca.Server(t)
	dir := t.TempDir()
	certFile, keyFile := old.WriteFiles(t, dir)
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	r, err := certreload.New(certFile, keyFile, certreload.Options{CheckEvery: 10 * time.Second, Now: clock.Now, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	srv := server(t, r, "", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	c := client(ca.Pool())
	if got := servedSerial(t, c, srv.URL); got != old.Cert.SerialNumber.String() {
		t.Fatalf("served %s, want the first certificate", got)
	}

	type result struct {
		serial, body string
		err          error
	}
	slow := make(chan result, 1)
	go func() {
		resp, err := c.Get(srv.URL + "/slow")
		if err != nil {
			slow <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		slow <- result{serial: resp.TLS.PeerCertificates[0].SerialNumber.String(), body: string(b), err: err}
	}()
	<-entered

	renewed.WriteFiles(t, dir)
	// Within CheckEvery the files are not looked at.
	clock.Advance(9 * time.Second)
	if got := servedSerial(t, c, srv.URL); got != old.Cert.SerialNumber.String() {
		t.Fatalf("reloaded before CheckEvery passed")
	}
	clock.Advance(time.Second)
	if got := servedSerial(t, c, srv.URL); got != renewed.Cert.SerialNumber.String() {
		t.Fatalf("new handshake served %s, want the renewed certificate %s", got, renewed.Cert.SerialNumber)
	}

	close(release)
	res := <-slow
	if res.err != nil || res.body != "ok" || res.serial != old.Cert.SerialNumber.String() {
		t.Fatalf("request in flight across the reload: %+v", res)
	}
}

// TestBrokenRenewalKeepsServing: a certificate whose key does not match
// (renewed before its key was written) leaves the old pair in service.
func TestBrokenRenewalKeepsServing(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	old, renewed := ca.Server(t), ca.Server(t)
	dir := t.TempDir()
	certFile, keyFile := old.WriteFiles(t, dir)
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	r, err := certreload.New(certFile, keyFile, certreload.Options{CheckEvery: time.Second, Now: clock.Now, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tlstest.WriteFile(t, certFile, renewed.CertPEM)
	clock.Advance(time.Second)
	if got := r.Certificate().Leaf.SerialNumber; got.Cmp(old.Cert.SerialNumber) != 0 {
		t.Fatalf("serving %s after a mismatched renewal, want the old pair", got)
	}
	tlstest.WriteFile(t, keyFile, renewed.KeyPEM)
	clock.Advance(time.Second)
	if got := r.Certificate().Leaf.SerialNumber; got.Cmp(renewed.Cert.SerialNumber) != 0 {
		t.Fatalf("serving %s once the key arrived, want the renewed pair", got)
	}
	if _, err := certreload.New(certFile, filepath.Join(dir, "missing.pem"), certreload.Options{}); err == nil {
		t.Fatal("missing key accepted")
	}
}

// TestUnknownCARefused: a client that does not trust the server's CA fails
// the handshake with an unknown-authority error.
func TestUnknownCARefused(t *testing.T) {
	ca, other := tlstest.NewCA(t, "test CA"), tlstest.NewCA(t, "other CA")
	certFile, keyFile := ca.Server(t).WriteFiles(t, t.TempDir())
	r, err := certreload.New(certFile, keyFile, certreload.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := server(t, r, "", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	_, err = client(other.Pool()).Get(srv.URL)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("client of another CA: err = %v, want unknown authority", err)
	}
	if r.SelfSigned() {
		t.Fatal("a CA-issued certificate reported self-signed")
	}
}

// TestClientCA: with a client CA, a client without a certificate, or with
// one another CA signed, is refused; one the client CA signed gets through.
func TestClientCA(t *testing.T) {
	ca, clients, other := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA"), tlstest.NewCA(t, "other CA")
	dir := t.TempDir()
	certFile, keyFile := ca.Server(t).WriteFiles(t, dir)
	clientCA := filepath.Join(dir, "clients.pem")
	tlstest.WriteFile(t, clientCA, clients.PEM)
	r, err := certreload.New(certFile, keyFile, certreload.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := server(t, r, clientCA, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.WriteString(w, req.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"no certificate", nil, false},
		{"other CA", []tls.Certificate{other.Client(t, "mallory").TLS}, false},
		{"client CA", []tls.Certificate{clients.Client(t, "operator").TLS}, true},
	} {
		resp, err := client(ca.Pool(), tc.certs...).Get(srv.URL)
		if !tc.ok {
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: accepted", tc.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "operator" {
			t.Errorf("%s: served %q", tc.name, b)
		}
	}
	if _, err := certreload.ServerConfig(r, filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("missing client CA accepted")
	}
	tlstest.WriteFile(t, clientCA, []byte("not PEM"))
	if _, err := certreload.ServerConfig(r, clientCA); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("garbage client CA: %v", err)
	}
}
