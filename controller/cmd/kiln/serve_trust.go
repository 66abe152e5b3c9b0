package main

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/spf13/pflag"

	"github.com/kilnhq/kiln/controller/api/auth"
	"github.com/kilnhq/kiln/controller/certreload"
)

// trustOptions are kiln serve's authentication and TLS flags.
type trustOptions struct {
	auth        string
	htpasswd    string
	authRoles   string
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	agentCA     string

	// agentCAPEM is what the agents' boot media carry: --agent-ca's
	// contents, or the serving certificate when it is self-signed.
	agentCAPEM []byte
}

func addTrustFlags(f *pflag.FlagSet, o *trustOptions) {
	f.StringVar(&o.auth, "auth", "", "API authentication: none or http_basic (default: http_basic when --htpasswd is given, else none)")
	f.StringVar(&o.htpasswd, "htpasswd", "", "Apache htpasswd file of API users, bcrypt hashes only (htpasswd -B); re-read when it changes")
	f.StringVar(&o.authRoles, "auth-roles", "", "file of user:role lines (admin or reader) for --htpasswd users; users it does not name are admins; re-read when it changes")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); re-read when it changes")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&o.agentCA, "agent-ca", "", "PEM CA bundle the agents trust for the API, carried in per-node ramdisks and virtual-media ISOs (default: the --tls-cert certificate when it is self-signed)")
	f.StringVar(&o.tlsClientCA, "tls-client-ca", "", "PEM CA bundle: require every client to present a certificate it signed")
}

// guard wraps the API handler in authentication as the flags ask, and warns
// loudly when an unauthenticated API listens beyond loopback.
func (o trustOptions) guard(h http.Handler, listen net.Addr, log *slog.Logger) (http.Handler, error) {
	mode := o.auth
	if mode == "" {
		mode = "none"
		if o.htpasswd != "" {
			mode = "http_basic"
		}
	}
	switch mode {
	case "none":
		if o.htpasswd != "" || o.authRoles != "" {
			return nil, fmt.Errorf("--auth none with --htpasswd or --auth-roles: drop them or use --auth http_basic")
		}
		if ip, ok := listen.(*net.TCPAddr); !ok || !ip.IP.IsLoopback() {
			log.Warn("API AUTHENTICATION IS OFF on a non-loopback address: anyone who reaches it can read and change every node and have the conductor send BMC credentials where they say; use --htpasswd",
				"addr", listen.String())
		}
		return h, nil
	case "http_basic":
		if o.htpasswd == "" {
			return nil, fmt.Errorf("--auth http_basic needs --htpasswd FILE")
		}
		a, err := auth.New(auth.Options{Htpasswd: o.htpasswd, Roles: o.authRoles, Log: log})
		if err != nil {
			return nil, fmt.Errorf("--htpasswd: %w", err)
		}
		log.Info("API authentication: http_basic", "htpasswd", o.htpasswd, "roles", o.authRoles)
		return a.Middleware(h), nil
	default:
		return nil, fmt.Errorf("--auth must be none or http_basic, not %q", mode)
	}
}

// tlsConfig returns the server's TLS configuration, or nil to serve plain
// HTTP, and sets o.agentCAPEM.
func (o *trustOptions) tlsConfig(log *slog.Logger) (*tls.Config, error) {
	if o.agentCA != "" {
		if _, err := certreload.LoadPool(o.agentCA); err != nil {
			return nil, fmt.Errorf("--agent-ca: %w", err)
		}
		o.agentCAPEM, _ = os.ReadFile(o.agentCA)
	}
	if o.tlsCert == "" && o.tlsKey == "" {
		if o.tlsClientCA != "" {
			return nil, fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if o.tlsCert == "" || o.tlsKey == "" {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	r, err := certreload.New(o.tlsCert, o.tlsKey, certreload.Options{Log: log})
	if err != nil {
		return nil, err
	}
	switch {
	case o.agentCA != "":
	case r.SelfSigned():
		// A renewed self-signed certificate reaches the agents' media at
		// the next restart; a stable CA with --agent-ca avoids that.
		o.agentCAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Leaf.Raw})
	default:
		log.Info("agents verify the API's certificate against their system CAs: give --agent-ca if a private CA signed it")
	}
	return certreload.ServerConfig(r, o.tlsClientCA)
}
