package boot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
)

// NetworkDataPath is where a node's network data lands inside its ramdisk;
// the agent reads it from there (agent/netconf.NetworkDataFile).
const NetworkDataPath = "etc/kiln/network.yaml"

// AgentCAPath is where the CA of the controller's API lands inside the
// agent's ramdisk; the agent trusts it when present (agent.DefaultCAFile).
const AgentCAPath = "etc/kiln/api-ca.pem"

// ErrUnknownNode is what a NetworkDataBackend returns (wrapped or not) for
// a node that does not exist: the handler answers 404.
var ErrUnknownNode = errors.New("no such node")

// NetworkDataBackend gives the network data a node's ramdisk must carry.
// The controller implements it over its store: the node's network_data, or
// driver_info.preprovisioning_network_data (an NMState document, YAML or
// JSON).
type NetworkDataBackend interface {
	// NetworkData returns the node's document, nil when it has none, or an
	// error wrapping ErrUnknownNode.
	NetworkData(ctx context.Context, node string) ([]byte, error)
}

// RamdiskConfig configures NewRamdiskHandler.
type RamdiskConfig struct {
	// Ramdisk is the deploy initramfs file (any compression the kernel
	// reads). It is reopened on every request, so replacing it takes
	// effect at once.
	Ramdisk string
	// MaxCached bounds the cached per-node archives (default 4096; each is
	// the network data plus ~400 bytes).
	MaxCached int
	// AgentCA, when set, is the PEM CA bundle of the controller's API: every
	// node's ramdisk carries it at AgentCAPath, so that its agent verifies
	// the controller over HTTPS.
	AgentCA []byte
	Log     *slog.Logger
}

// NewRamdiskHandler serves a node's deploy ramdisk at GET …/{node}: the
// configured initramfs as is for a node without network data; for a node
// with some, the same bytes followed by a small uncompressed newc cpio
// archive holding /etc/kiln/network.yaml. The kernel unpacks concatenated
// initramfs archives in order, so a static-IP host boots straight into an
// agent that configures its network from the file, without DHCP and without
// a per-host image on disk. The appended archive is built on the fly and
// cached by the data's SHA-256; responses carry an ETag naming the ramdisk
// and the data, and honour Range (http.ServeContent). Mount it with
// http.StripPrefix so the request path is "/{node}"; point the node's
// RamdiskURL (Decision) at it.
func NewRamdiskHandler(cfg RamdiskConfig, b NetworkDataBackend) http.Handler {
	if cfg.MaxCached <= 0 {
		cfg.MaxCached = 4096
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &ramdiskHandler{cfg: cfg, backend: b, cache: map[string][]byte{}}
}

type ramdiskHandler struct {
	cfg     RamdiskConfig
	backend NetworkDataBackend

	mu    sync.Mutex
	cache map[string][]byte // sha256(data) → appended archive
	order []string          // insertion order, for eviction
}

var nodeIdent = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]{0,254}$`)

func (h *ramdiskHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	node := path.Base(r.URL.Path)
	if dir := path.Dir(r.URL.Path); (dir != "/" && dir != ".") || !nodeIdent.MatchString(node) {
		http.Error(w, "want …/{node}", http.StatusBadRequest)
		return
	}
	data, err := h.backend.NetworkData(r.Context(), node)
	if errors.Is(err, ErrUnknownNode) {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		h.cfg.Log.Error("ramdisk network data", "node", node, "err", err)
		http.Error(w, "cannot read the node's network data", http.StatusServiceUnavailable)
		return
	}
	f, err := os.Open(h.cfg.Ramdisk)
	if err != nil {
		h.cfg.Log.Error("open ramdisk", "path", h.cfg.Ramdisk, "err", err)
		http.Error(w, "ramdisk unavailable", http.StatusServiceUnavailable)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.Error(w, "ramdisk unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if len(data) == 0 && len(h.cfg.AgentCA) == 0 {
		http.ServeContent(w, r, "", st.ModTime(), f)
		return
	}
	sum := sha256.Sum256(data)
	if len(h.cfg.AgentCA) > 0 {
		// The CA is part of what the archive holds, so of its cache key and ETag.
		sum = sha256.Sum256(append(append(slices.Clip(data), 0), h.cfg.AgentCA...))
	}
	key := hex.EncodeToString(sum[:])
	tail, err := h.archive(key, data)
	if err != nil {
		h.cfg.Log.Error("build ramdisk network archive", "node", node, "err", err)
		http.Error(w, "cannot build the ramdisk", http.StatusInternalServerError)
		return
	}
	pad := padTo4(st.Size())
	total := st.Size() + pad + int64(len(tail))
	id := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s", h.cfg.Ramdisk, st.Size(), st.ModTime().UnixNano(), key))
	w.Header().Set("ETag", `"`+hex.EncodeToString(id[:16])+`"`)
	h.cfg.Log.Info("serving ramdisk with network data", "node", node, "data_sha256", key, "bytes", total)
	// A zero modtime: the ETag, not the file's mtime, says what changed.
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(&concatReaderAt{
		parts: []readerAtSize{{f, st.Size()}, {zeroReaderAt{}, pad}, {bytes.NewReader(tail), int64(len(tail))}},
	}, 0, total))
}

// archive returns the cached cpio archive for data, building it once.
func (h *ramdiskHandler) archive(key string, data []byte) ([]byte, error) {
	h.mu.Lock()
	if a, ok := h.cache[key]; ok {
		h.mu.Unlock()
		return a, nil
	}
	h.mu.Unlock()
	a, err := BootFilesArchive(data, h.cfg.AgentCA)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.cache[key]; !ok {
		for len(h.order) >= h.cfg.MaxCached {
			delete(h.cache, h.order[0])
			h.order = h.order[1:]
		}
		h.cache[key] = a
		h.order = append(h.order, key)
	}
	return a, nil
}

// NetworkDataArchive is the newc cpio archive appended to a ramdisk:
// directories etc and etc/kiln, then NetworkDataPath (0600) holding data.
// Its timestamps are zero so that equal data gives equal bytes.
func NetworkDataArchive(data []byte) ([]byte, error) { return BootFilesArchive(data, nil) }

// BootFilesArchive is the archive appended to a node's ramdisk: its network
// data at NetworkDataPath (0600) and the controller's CA at AgentCAPath
// (0644), each only when not empty.
func BootFilesArchive(networkData, agentCA []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := cpio.Newc.Writer(&buf)
	recs := []cpio.Record{cpio.Directory("etc", 0o755), cpio.Directory("etc/kiln", 0o755)}
	if len(networkData) > 0 {
		recs = append(recs, cpio.StaticRecord(networkData, cpio.Info{Name: NetworkDataPath, Mode: cpio.S_IFREG | 0o600}))
	}
	if len(agentCA) > 0 {
		recs = append(recs, cpio.StaticRecord(agentCA, cpio.Info{Name: AgentCAPath, Mode: cpio.S_IFREG | 0o644}))
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			return nil, fmt.Errorf("cpio %s: %w", r.Name, err)
		}
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return nil, fmt.Errorf("cpio trailer: %w", err)
	}
	return buf.Bytes(), nil
}

// padTo4 is the zero padding that puts the appended archive on a 4-byte
// boundary, where the kernel's unpacker looks for the next header (it skips
// zero bytes between archives).
func padTo4(n int64) int64 { return (4 - n%4) % 4 }

type readerAtSize struct {
	r    io.ReaderAt
	size int64
}

// concatReaderAt reads its parts as one contiguous stream.
type concatReaderAt struct{ parts []readerAtSize }

func (c *concatReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, part := range c.parts {
		if len(p) == 0 {
			break
		}
		if off >= part.size {
			off -= part.size
			continue
		}
		want := min(int64(len(p)), part.size-off)
		m, err := part.r.ReadAt(p[:want], off)
		n += m
		if int64(m) < want {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF // the file shrank under us
			}
			return n, err
		}
		p, off = p[m:], 0
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

type zeroReaderAt struct{}

func (zeroReaderAt) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}
