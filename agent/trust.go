package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// DefaultCAFile is where boot media built by kiln serve put the CA of the
// controller's API (its certificate when self-signed). The agent trusts it
// when present and ipa-cafile names no other file.
const DefaultCAFile = "/etc/kiln/api-ca.pem"

// controllerHTTPClient is the client of the controller's API: it verifies the
// controller's certificate against cfg.CAFile (IPA's cafile, ipa-cafile on
// the kernel command line) or, without one, DefaultCAFile when the boot
// media carry it, else the system's CAs; ipa-insecure turns verification off.
func controllerHTTPClient(cfg Config) (*http.Client, error) {
	hc := newHTTPClient(cfg.Insecure)
	if cfg.Insecure {
		return hc, nil
	}
	caFile := cfg.CAFile
	if caFile == "" {
		if _, err := os.Stat(DefaultCAFile); err != nil {
			return &http.Client{Transport: explainTLS{hc.Transport}, Timeout: hc.Timeout}, nil
		}
		caFile = DefaultCAFile
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ipa-cafile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ipa-cafile %s: no PEM certificate in it", caFile)
	}
	tr := hc.Transport.(*http.Transport)
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	tr.TLSClientConfig.RootCAs = pool
	return &http.Client{Transport: explainTLS{tr}, Timeout: hc.Timeout}, nil
}

// explainTLS says, when the controller's certificate does not verify, what
// the operator can do about it.
type explainTLS struct{ rt http.RoundTripper }

func (e explainTLS) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(r)
	var verr *tls.CertificateVerificationError
	if err != nil && errors.As(err, &verr) {
		return nil, fmt.Errorf("controller %s is not trusted (give its CA with ipa-cafile, or set ipa-insecure=1): %w", r.URL.Host, err)
	}
	return resp, err
}
