package boot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Action is what a node should boot when it network-boots.
type Action string

const (
	// BootAgent boots the deploy ramdisk for a known node (deploy,
	// clean, inspect, rescue).
	BootAgent Action = "agent"
	// BootLocal leaves iPXE for the local disk (an active instance, or a
	// node that has nothing to do).
	BootLocal Action = "local"
	// Discovery boots the agent for a MAC no node has, with
	// ipa-inspection-callback-url, so it inspects the machine and reports
	// it (which may enroll it).
	Discovery Action = "discovery"
)

// Decision is the backend's answer for one MAC. Empty URLs mean the
// handler's defaults (the controller's own deploy kernel and ramdisk).
type Decision struct {
	Action          Action
	NodeUUID        string
	KernelURL       string // driver_info deploy_kernel, resolved to a URL
	RamdiskURL      string // driver_info deploy_ramdisk, resolved to a URL
	ExtraKernelArgs []string
	// Inspect asks the agent to inspect and post its inventory to
	// /v1/continue_inspection (the node waits for inspection).
	Inspect bool
}

// ErrUnknownMAC is what a Backend returns (wrapped or not) when no node has
// the MAC; the handler then serves Config.Unknown.
var ErrUnknownMAC = errors.New("no node has this MAC")

// Backend decides what a MAC boots. The controller implements it over its
// store (ports → node → provision state); tests use a map.
type Backend interface {
	// BootFor returns the decision for mac (canonical aa:bb:cc:dd:ee:ff),
	// or an error wrapping ErrUnknownMAC.
	BootFor(ctx context.Context, mac string) (Decision, error)
}

// Config holds the handler's defaults.
type Config struct {
	// APIURL is the controller's API as the agent reaches it (ipa-api-url).
	APIURL string
	// KernelURL and RamdiskURL are the deploy kernel and ramdisk when the
	// decision names none, e.g. …/boot/files/kiln-agent.kernel.
	KernelURL, RamdiskURL string
	// Console is the kernel console argument, e.g. "ttyS0,115200n8".
	Console string
	// ExtraKernelArgs go on every agent command line, before the node's.
	ExtraKernelArgs []string
	// Unknown is what an unknown MAC boots: Discovery (the agent, to be
	// inspected) or BootLocal (the default: leave unknown machines alone).
	Unknown Action
	Log     *slog.Logger
}

// NewScriptHandler serves per-node iPXE scripts at GET …/boot.ipxe?mac=MAC.
// Without a mac parameter it serves ChainScript, which asks again with the
// MAC iPXE booted from, so the DHCP server can hand every iPXE client the
// same URL. A malformed MAC is a 400; a backend failure a 503, which makes
// iPXE fall through to the next boot device.
func NewScriptHandler(cfg Config, b Backend) http.Handler {
	if cfg.Unknown == "" {
		cfg.Unknown = BootLocal
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &scriptHandler{cfg: cfg, backend: b}
}

type scriptHandler struct {
	cfg     Config
	backend Backend
}

func (h *scriptHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	raw, ok := r.URL.Query()["mac"]
	if !ok {
		writeScript(w, ChainScript)
		return
	}
	if len(raw) != 1 {
		http.Error(w, "want exactly one mac parameter", http.StatusBadRequest)
		return
	}
	mac, err := ParseMAC(raw[0])
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	script, err := h.script(r.Context(), mac)
	if err != nil {
		h.cfg.Log.Error("iPXE script", "mac", mac, "err", err)
		http.Error(w, "cannot decide what to boot", http.StatusServiceUnavailable)
		return
	}
	writeScript(w, script)
}

func (h *scriptHandler) script(ctx context.Context, mac string) (string, error) {
	d, err := h.backend.BootFor(ctx, mac)
	switch {
	case errors.Is(err, ErrUnknownMAC):
		d = Decision{Action: h.cfg.Unknown}
	case err != nil:
		return "", fmt.Errorf("look up boot for %s: %w", mac, err)
	}
	p := ScriptParams{Mode: ModeLocal, MAC: mac}
	switch d.Action {
	case BootAgent, Discovery:
		p = ScriptParams{
			Mode:       ModeAgent,
			KernelURL:  or(d.KernelURL, h.cfg.KernelURL),
			RamdiskURL: or(d.RamdiskURL, h.cfg.RamdiskURL),
			APIURL:     h.cfg.APIURL,
			MAC:        mac,
			Console:    h.cfg.Console,
			ExtraArgs:  append(append([]string(nil), h.cfg.ExtraKernelArgs...), d.ExtraKernelArgs...),
		}
		if (d.Action == Discovery || d.Inspect) && h.cfg.APIURL != "" {
			// An unknown machine has no node to heartbeat for: the agent
			// inspects it and posts the inventory, which may enroll it.
			p.ExtraArgs = append(p.ExtraArgs, "ipa-inspection-callback-url="+strings.TrimSuffix(h.cfg.APIURL, "/")+"/v1/continue_inspection")
		}
		if p.KernelURL == "" || p.RamdiskURL == "" {
			return "", fmt.Errorf("boot agent for %s (node %q): no deploy kernel or ramdisk", mac, d.NodeUUID)
		}
		for _, a := range append([]string{p.KernelURL, p.RamdiskURL, p.APIURL, p.Console}, p.ExtraArgs...) {
			if err := CheckArg(a); err != nil {
				return "", fmt.Errorf("boot agent for %s (node %q): %w", mac, d.NodeUUID, err)
			}
		}
	case BootLocal:
	default:
		return "", fmt.Errorf("boot for %s (node %q): unknown action %q", mac, d.NodeUUID, d.Action)
	}
	h.cfg.Log.Info("iPXE script", "mac", mac, "node", d.NodeUUID, "action", d.Action)
	return RenderScript(p), nil
}

func writeScript(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(s))
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
