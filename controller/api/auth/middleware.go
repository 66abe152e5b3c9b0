package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"path"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// Realm is the realm of the WWW-Authenticate challenge: Ironic's.
const Realm = "Baremetal API"

// Open reports whether a request needs no credentials, as in Ironic: the
// agent's routes (the agent has no credentials, only the per-node token it
// receives at lookup), the version documents, and network-boot files under
// /boot/ (firmware and iPXE fetch scripts and kernels without credentials).
// Only clean paths qualify, so that /boot/../v1/nodes and encoded slashes
// never pass as open.
func Open(method, p, rawPath string) bool {
	if rawPath != "" || path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" {
		return false
	}
	switch p {
	case "/", "/v1", "/v1/":
		return method == http.MethodGet || method == http.MethodHead
	case "/v1/lookup", "/v1/continue_inspection":
		return true
	}
	if node, ok := strings.CutPrefix(p, "/v1/heartbeat/"); ok {
		return node != "" && !strings.Contains(node, "/")
	}
	return strings.HasPrefix(p, "/boot/")
}

type ctxKey struct{}

// Identity is the authenticated caller.
type Identity struct {
	User string
	Role Role
}

// FromContext returns the caller a request was authenticated as; ok is false
// for open routes and when authentication is off.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}

// IsReader reports whether the request comes from a read-only user: views
// that could ever show a secret must mask it for them.
func IsReader(ctx context.Context) bool {
	id, ok := FromContext(ctx)
	return ok && id.Role == Reader
}

// Middleware requires valid credentials on every route but the open ones,
// and refuses a reader anything but GET and HEAD. Failures answer in
// Ironic's error format: 401 with a Basic challenge, or 403.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Open(r.Method, r.URL.Path, r.URL.RawPath) {
			next.ServeHTTP(w, r)
			return
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
			writeError(w, r, http.StatusUnauthorized, "Missing or malformed HTTP basic credentials.")
			return
		}
		role, ok := a.Authenticate(user, pass)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
			writeError(w, r, http.StatusUnauthorized, "Incorrect username or password.")
			return
		}
		if role == Reader && r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, r, http.StatusForbidden, "Access was denied to this resource: user "+user+" has the reader role.")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, Identity{User: user, Role: role})))
	})
}

// writeError answers in Ironic's error body: the inner document is JSON
// carried as a string in error_message.
func writeError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	inner, _ := json.Marshal(proto.Error{FaultString: msg, FaultCode: "Client"})
	body, _ := json.Marshal(proto.ErrorBody{ErrorMessage: string(inner)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
