package bmcsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// BMC is a Service listening on its own address, like one physical BMC.
type BMC struct {
	*Service
	// URL is the endpoint a Redfish client connects to: http://127.0.0.1:<port>.
	URL string
	srv *http.Server
	ln  net.Listener
}

// Listen starts serving svc over plain HTTP on addr ("127.0.0.1:0" picks a
// free port).
func Listen(addr string, svc *Service) (*BMC, error) { return ListenTLS(addr, svc, nil) }

// ListenTLS starts serving svc on addr, over HTTPS when cert is not nil (see
// SelfSignedCert), as real BMCs do.
func ListenTLS(addr string, svc *Service, cert *tls.Certificate) (*BMC, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for BMC on %s: %w", addr, err)
	}
	scheme := "http://"
	if cert != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
		scheme = "https://"
	}
	b := &BMC{Service: svc, URL: scheme + ln.Addr().String(), ln: ln,
		srv: &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// Close stops the listener and closes open connections.
func (b *BMC) Close() error { return b.srv.Close() }

// Shutdown stops the listener and waits for requests in flight.
func (b *BMC) Shutdown(ctx context.Context) error { return b.srv.Shutdown(ctx) }

// LabConfig describes N simulated BMCs.
type LabConfig struct {
	// N is the number of BMCs, each with one system on its own 127.0.0.1 port.
	N int
	// Personality of every BMC (default generic).
	Personality string
	// Username and Password for every BMC (default admin/password).
	Username, Password string
	// NewBackend makes the backend of BMC i; nil = a Memory backend whose
	// inventory has unique MAC/serial/UUID and the personality's vendor.
	NewBackend func(i int) (Backend, error)
	// Host to listen on (default 127.0.0.1).
	Host string
	// TLS serves HTTPS with one self-signed certificate for Host (Lab.CertPool
	// trusts it; gofish clients can also set Insecure).
	TLS bool
	// BasePort, if not 0, makes BMC i listen on BasePort+i instead of a
	// random free port.
	BasePort int
	Logger   *slog.Logger
	// Disks is how many disks each default Memory backend has (0 = one);
	// RAID-1 volumes need two.
	Disks int
	// Clock and TaskDuration are passed to every Service (see Config).
	Clock        Clock
	TaskDuration time.Duration
}

// Lab is a rack of simulated BMCs, one listener each.
type Lab struct {
	BMCs []*BMC
	// CertPool trusts the BMCs' certificate when LabConfig.TLS is set.
	CertPool *x509.CertPool
}

// StartLab starts cfg.N BMCs. Close the lab when done.
func StartLab(cfg LabConfig) (*Lab, error) {
	p, err := LookupPersonality(cfg.Personality)
	if err != nil {
		return nil, err
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	l := &Lab{}
	var cert *tls.Certificate
	if cfg.TLS {
		c, pool, err := SelfSignedCert(host, "localhost")
		if err != nil {
			return nil, err
		}
		cert, l.CertPool = &c, pool
	}
	for i := 0; i < cfg.N; i++ {
		var be Backend
		if cfg.NewBackend != nil {
			if be, err = cfg.NewBackend(i); err != nil {
				_ = l.Close()
				return nil, fmt.Errorf("make backend %d: %w", i, err)
			}
		} else {
			inv := Inventory{Manufacturer: p.Manufacturer, Model: p.Model}
			for d := range cfg.Disks {
				inv.Disks = append(inv.Disks, Disk{Name: "disk" + strconv.Itoa(d), SizeBytes: 10 << 30})
			}
			be = NewMemory(i, inv)
		}
		svc, err := NewService(Config{Personality: p.Name, Username: cfg.Username, Password: cfg.Password,
			Systems: []SystemConfig{{Backend: be}}, Logger: cfg.Logger, Clock: cfg.Clock, TaskDuration: cfg.TaskDuration})
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		port := 0
		if cfg.BasePort != 0 {
			port = cfg.BasePort + i
		}
		b, err := ListenTLS(net.JoinHostPort(host, strconv.Itoa(port)), svc, cert)
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		l.BMCs = append(l.BMCs, b)
	}
	return l, nil
}

// Close stops every BMC's listener, then powers off and releases every
// backend that has a Close(context.Context) error method (QEMU VMs).
func (l *Lab) Close() error {
	var errs []error
	for _, b := range l.BMCs {
		errs = append(errs, b.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range l.BMCs {
		for _, id := range b.SystemIDs() {
			if c, ok := b.Backend(id).(interface{ Close(context.Context) error }); ok {
				errs = append(errs, c.Close(ctx))
			}
		}
	}
	return errors.Join(errs...)
}

// Requests returns the request count of every BMC, by index.
func (l *Lab) Requests() []uint64 {
	n := make([]uint64, len(l.BMCs))
	for i, b := range l.BMCs {
		n[i] = b.Requests()
	}
	return n
}

// Memory returns the Memory backend of BMC i's first system, nil if that
// system has another backend.
func (l *Lab) Memory(i int) *Memory {
	b := l.BMCs[i]
	m, _ := b.Backend(b.SystemIDs()[0]).(*Memory)
	return m
}

// SetFaults sets the same faults on every BMC.
func (l *Lab) SetFaults(f Faults) error {
	for _, b := range l.BMCs {
		if err := b.SetFaults(f); err != nil {
			return err
		}
	}
	return nil
}
