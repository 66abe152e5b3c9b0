// Package ui is Kiln's web console, served by kiln serve at /ui/: a fleet
// table that follows the event stream, a node page, enrollment, bulk
// actions. It is static files embedded in the binary (no build step, no
// download at run time) and a small JavaScript program that uses the same
// /v1 API as the CLI, with the browser's credentials: readers see, admins
// act, exactly as the API allows them.
package ui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/kilnhq/kiln/controller/api/auth"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

//go:embed static
var static embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// maxMinor is the microversion whose verbs the console offers.
const maxMinor = 95

// Handler serves the console under Prefix; health feeds its health page
// (nil: the page says it has no data).
func Handler(health *HealthSampler) http.Handler {
	files, _ := fs.Sub(static, "static")
	fileServer := http.StripPrefix(Prefix+"static/", http.FileServer(http.FS(files)))
	index, _ := fs.ReadFile(files, "index.html")
	machine, _ := json.Marshal(actions())
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", func(w http.ResponseWriter, r *http.Request) {
		headers(w, "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
	mux.Handle("GET "+Prefix+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers(w, "")
		fileServer.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET "+Prefix+"api/session", func(w http.ResponseWriter, r *http.Request) {
		headers(w, "application/json")
		_ = json.NewEncoder(w).Encode(session(r))
	})
	mux.HandleFunc("GET "+Prefix+"api/health", func(w http.ResponseWriter, r *http.Request) {
		headers(w, "application/json")
		if health == nil {
			http.Error(w, `{"error":"no metrics registry"}`, http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(health.Health())
	})
	mux.HandleFunc("GET "+Prefix+"api/actions", func(w http.ResponseWriter, r *http.Request) {
		headers(w, "application/json")
		_, _ = w.Write(machine)
	})
	return mux
}

// headers are the console's security headers: its own scripts and styles
// only, no framing, no sniffing.
func headers(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
}

// Session is who the browser is, so the console shows a reader no buttons
// the API would refuse.
type Session struct {
	User string `json:"user"`
	Role string `json:"role"`
	// CanAct is false for readers; true for admins and without
	// authentication (--auth none).
	CanAct bool `json:"can_act"`
}

func session(r *http.Request) Session {
	id, ok := auth.FromContext(r.Context())
	if !ok {
		return Session{Role: "none", CanAct: true}
	}
	return Session{User: id.User, Role: string(id.Role), CanAct: id.Role != auth.Reader}
}

// Actions are, per provision state, the verbs the state machine accepts
// there, for a node out of maintenance and one in it.
type Actions struct {
	Normal      map[proto.ProvisionState][]proto.Verb `json:"normal"`
	Maintenance map[proto.ProvisionState][]proto.Verb `json:"maintenance"`
	States      []proto.ProvisionState                `json:"states"`
}

// actions asks the API's own state machine about every state and verb, so
// the console never offers what the API would refuse.
func actions() Actions {
	a := Actions{Normal: map[proto.ProvisionState][]proto.Verb{}, Maintenance: map[proto.ProvisionState][]proto.Verb{}, States: state.States()}
	for _, s := range a.States {
		for _, v := range state.Verbs() {
			// Aliases of the same action: the console offers the names
			// Ironic's documentation uses.
			if v == proto.VerbActive || v == proto.VerbDeleted {
				continue
			}
			if _, err := state.Request(state.Node{State: s}, v, maxMinor); err == nil {
				a.Normal[s] = append(a.Normal[s], v)
			}
			if _, err := state.Request(state.Node{State: s, Maintenance: true}, v, maxMinor); err == nil {
				a.Maintenance[s] = append(a.Maintenance[s], v)
			}
		}
	}
	return a
}

// Redirect sends /ui to /ui/.
func Redirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, strings.TrimSuffix(Prefix, "/")+"/", http.StatusMovedPermanently)
}
