// Package certreload serves a TLS certificate that follows its files: a
// renewed certificate (cert-manager, certbot, a rotation script) is picked up
// at the next handshake after the files change, without a restart and
// without dropping the connections already established.
package certreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Options configure a Reloader.
type Options struct {
	// CheckEvery is how often, at most, the files are stat'ed [2s]; the check
	// runs inside a handshake, nothing runs in the background.
	CheckEvery time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time
	// Log reports reloads and failed ones [slog.Default()].
	Log *slog.Logger
}

// Reloader holds the current key pair of a certificate and key file.
type Reloader struct {
	certFile, keyFile string
	opts              Options

	mu                sync.Mutex
	lastCheck         time.Time
	certStat, keyStat os.FileInfo
	current           *tls.Certificate
}

// New loads the key pair; an invalid pair is an error.
func New(certFile, keyFile string, o Options) (*Reloader, error) {
	if o.CheckEvery <= 0 {
		o.CheckEvery = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, opts: o}
	if err := r.load(); err != nil {
		return nil, err
	}
	r.lastCheck = o.Now()
	return r, nil
}

func (r *Reloader) load() error {
	cs, err := os.Stat(r.certFile)
	if err != nil {
		return err
	}
	ks, err := os.Stat(r.keyFile)
	if err != nil {
		return err
	}
	kp, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.certStat, r.keyStat, r.current = cs, ks, &kp
	return nil
}

func changed(name string, old os.FileInfo) bool {
	st, err := os.Stat(name)
	return err != nil || !os.SameFile(st, old) || !st.ModTime().Equal(old.ModTime()) || st.Size() != old.Size()
}

// Certificate returns the current key pair, re-reading the files first when
// CheckEvery has passed and either changed. A pair that does not load (a
// certificate renewed before its key, a half-written file) leaves the
// previous one in use and is retried at the next check.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	if now.Sub(r.lastCheck) < r.opts.CheckEvery {
		return r.current
	}
	r.lastCheck = now
	if !changed(r.certFile, r.certStat) && !changed(r.keyFile, r.keyStat) {
		return r.current
	}
	if err := r.load(); err != nil {
		r.opts.Log.Warn("TLS certificate files changed but do not load: still serving the previous certificate", "err", err)
		return r.current
	}
	r.opts.Log.Info("TLS certificate reloaded", "cert", r.certFile, "not_after", r.current.Leaf.NotAfter)
	return r.current
}

// GetCertificate is tls.Config's callback.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// SelfSigned reports whether the current certificate signed itself, in which
// case clients (agents among them) must be given the certificate as their CA.
func (r *Reloader) SelfSigned() bool {
	leaf := r.Certificate().Leaf
	return leaf != nil && leaf.CheckSignatureFrom(leaf) == nil
}

// ServerConfig is a TLS configuration serving the reloaded certificate.
// With clientCAFile set, clients must present a certificate that one of its
// CAs signed.
func ServerConfig(r *Reloader, clientCAFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCAFile != "" {
		pool, err := LoadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New(file + ": no PEM certificate in it")
	}
	return pool, nil
}
