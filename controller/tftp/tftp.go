// Package tftp serves the iPXE binaries that PXE firmware loads before
// anything else: read-only TFTP (with the blksize and tsize options, through
// pin/tftp) on the DHCP interface, and the same files over HTTP for UEFI
// HTTP boot. Both read from one directory, by default Debian's ipxe package
// (/usr/lib/ipxe), through os.Root so that no name reaches outside it.
package tftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/pin/tftp/v3"
	"golang.org/x/sys/unix"
)

// DefaultDir is where Debian's ipxe package installs its binaries.
const DefaultDir = "/usr/lib/ipxe"

// Missing returns the names that are not regular files in dir, for kiln
// serve to say at start what firmware will fail to load.
func Missing(dir string, names []string) []string {
	var out []string
	for _, n := range names {
		fi, err := os.Stat(dir + "/" + n)
		if err != nil || !fi.Mode().IsRegular() {
			out = append(out, n)
		}
	}
	return out
}

// Config configures a Server.
type Config struct {
	Dir string
	// Interface is the only interface served (SO_BINDTODEVICE); Listen
	// the address on it, normally port 69.
	Interface string
	Listen    netip.AddrPort
	Log       *slog.Logger
}

// Server is a read-only TFTP server.
type Server struct {
	cfg  Config
	root *os.Root
	log  *slog.Logger
	conn net.PacketConn
	srv  *tftp.Server
}

// New opens the directory; it must exist.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	root, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("tftp: open %s: %w", cfg.Dir, err)
	}
	s := &Server{cfg: cfg, root: root, log: cfg.Log.With("tftp", cfg.Interface)}
	s.srv = tftp.NewServer(s.read, nil) // no write handler: read-only
	return s, nil
}

// Listen opens the socket, bound to the interface.
func (s *Server) Listen() error {
	if s.conn != nil {
		return nil
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if s.cfg.Interface != "" {
				serr = unix.BindToDevice(int(fd), s.cfg.Interface)
			}
		})
		return errors.Join(err, serr)
	}}
	addr := s.cfg.Listen.String()
	conn, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return fmt.Errorf("tftp: listen on %s (%s): %w", addr, s.cfg.Interface, err)
	}
	s.conn = conn
	return nil
}

// Addr is the address listened on (after Listen).
func (s *Server) Addr() net.Addr { return s.conn.LocalAddr() }

// Serve serves until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.log.Info("TFTP server answering", "addr", s.conn.LocalAddr().String(), "dir", s.cfg.Dir)
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(s.conn) }()
	select {
	case <-ctx.Done():
		s.srv.Shutdown()
		<-done
		s.root.Close()
		return nil
	case err := <-done:
		s.root.Close()
		return fmt.Errorf("tftp: serve: %w", err)
	}
}

// read sends one file, announcing its size first (tsize) when asked.
func (s *Server) read(name string, rf io.ReaderFrom) error {
	peer := ""
	if t, ok := rf.(tftp.OutgoingTransfer); ok {
		a := t.RemoteAddr()
		peer = a.String()
	}
	f, size, err := open(s.root, name)
	if err != nil {
		s.log.Warn("TFTP read refused", "file", name, "peer", peer, "err", err)
		return err
	}
	defer f.Close()
	if t, ok := rf.(tftp.OutgoingTransfer); ok {
		t.SetSize(size)
	}
	n, err := rf.ReadFrom(f)
	if err != nil {
		s.log.Warn("TFTP transfer failed", "file", name, "peer", peer, "sent_bytes", n, "err", err)
		return err
	}
	s.log.Info("TFTP transfer", "file", name, "peer", peer, "bytes", n)
	return nil
}

// open opens a regular file under root. Firmware sends names with or
// without a leading slash; os.Root refuses anything that leaves the
// directory, symlinks included.
func open(root *os.Root, name string) (*os.File, int64, error) {
	name = strings.TrimLeft(name, "/")
	if name == "" || !fs.ValidPath(name) {
		return nil, 0, fmt.Errorf("invalid file name %q", name)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", name)
	}
	return f, fi.Size(), nil
}

// HTTPHandler serves the directory's files (no listings) for UEFI HTTP
// boot, mounted at /boot/ipxe/ with the prefix stripped.
func HTTPHandler(dir string) (http.Handler, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("serve %s over HTTP: %w", dir, err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _, err := open(root, r.URL.Path)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
	}), nil
}
