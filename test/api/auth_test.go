package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/httpbasic"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// writeAuthFiles writes the admin and reader credentials (see
// kilnproc.AuthFlags) and returns kiln serve's flags.
func writeAuthFiles(t *testing.T) []string { return kilnproc.AuthFlags(t) }

func startAuthKiln(t *testing.T) *kiln {
	t.Helper()
	args := append([]string{"--conductor", "test-conductor", "--power-sync-interval", "0"}, writeAuthFiles(t)...)
	return &kiln{Proc: kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), args...), t: t}
}

func basic(user, pw string) []string {
	return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}
}

// status sends a request and returns its status; error bodies are returned
// whole, success bodies not read (GET /v1/events never ends).
func (k *kiln) status(method, path, body string, headers []string) (int, http.Header, []byte) {
	k.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, k.URL+path, r)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b []byte
	if resp.StatusCode >= 300 {
		b, _ = io.ReadAll(resp.Body)
	}
	return resp.StatusCode, resp.Header, b
}

// TestAuthMatrix: every route group × no credentials, wrong password,
// reader, admin. Protected routes answer 401 (with the Basic challenge and
// Ironic's error body) to the first two, 403 to a reader's writes; the
// agent routes, the version documents and /boot/ answer everyone alike.
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	k := startAuthKiln(t)
	admin := basic("admin", "admin-pw")
	code, _, b := k.call("POST", "/v1/nodes", `{"driver":"fake-hardware","name":"m1","driver_info":{"redfish_password":"s3cr3t-pw"}}`, admin...)
	if code != 201 {
		t.Fatalf("create m1: %d %s", code, b)
	}
	uuid := mustJSON(t, b)["uuid"].(string)
	if code, _, b := k.call("POST", "/v1/nodes", `{"driver":"fake-hardware","name":"m-del"}`, admin...); code != 201 {
		t.Fatalf("create m-del: %d %s", code, b)
	}

	creds := []struct {
		name string
		hdr  []string
	}{
		{"none", nil},
		{"wrong", basic("admin", "viewer-pw")},
		{"reader", basic("viewer", "viewer-pw")},
		{"admin", admin},
	}
	routes := []struct {
		group, method, path, body string
		open                      bool
		want                      int // the admin's answer (everyone's for open routes)
	}{
		{"nodes", "GET", "/v1/nodes", "", false, 200},
		{"nodes", "GET", "/v1/nodes/detail", "", false, 200},
		{"nodes", "GET", "/v1/nodes/m1", "", false, 200},
		{"nodes", "HEAD", "/v1/nodes/m1", "", false, 405},
		{"nodes", "POST", "/v1/nodes", `{"driver":"fake-hardware","name":"m-new"}`, false, 201},
		{"nodes", "PATCH", "/v1/nodes/m1", `[{"op":"add","path":"/extra/x","value":"y"}]`, false, 200},
		{"nodes", "DELETE", "/v1/nodes/m-del", "", false, 204},
		{"nodes", "GET", "/v1/nodes/m1/history", "", false, 200},
		{"ports", "GET", "/v1/ports", "", false, 200},
		{"ports", "POST", "/v1/ports", `{"node_uuid":"` + uuid + `","address":"52:54:00:00:00:01"}`, false, 201},
		{"drivers", "GET", "/v1/drivers", "", false, 200},
		{"drivers", "GET", "/v1/drivers/fake-hardware", "", false, 200},
		{"conductors", "GET", "/v1/conductors", "", false, 200},
		{"states", "GET", "/v1/nodes/m1/states", "", false, 200},
		{"states", "PUT", "/v1/nodes/m1/states/provision", `{"target":"manage"}`, false, 202},
		{"states", "PUT", "/v1/nodes/m1/maintenance", `{"reason":"x"}`, false, 202},
		{"events", "GET", "/v1/events", "", false, 200},
		{"metrics", "GET", "/metrics", "", false, 200},
		{"agent", "GET", "/v1/lookup?addresses=52:54:00:99:99:99", "", true, 404},
		{"agent", "POST", "/v1/heartbeat/" + uuid, `{"callback_url":"http://127.0.0.1:9999","agent_version":"10.0.0"}`, true, 400}, // the agent token guards it,
		{"agent", "POST", "/v1/continue_inspection", `{"inventory":{"interfaces":[{"mac_address":"52:54:00:99:99:98"}]}}`, true, 404},
		{"root", "GET", "/", "", true, 200},
		{"v1", "GET", "/v1/", "", true, 200},
		{"boot", "GET", "/boot/boot.ipxe?mac=52:54:00:99:99:99", "", true, 200},
		{"boot", "GET", "/boot/files/kiln-agent.kernel", "", true, 404},
	}
	for _, rt := range routes {
		for _, c := range creds {
			want := rt.want
			switch {
			case rt.open:
			case c.name == "none" || c.name == "wrong":
				want = 401
			case c.name == "reader" && rt.method != "GET" && rt.method != "HEAD":
				want = 403
			}
			got, h, body := k.status(rt.method, rt.path, rt.body, c.hdr)
			if got != want {
				t.Errorf("%-10s %s %s as %s: %d, want %d: %s", rt.group, rt.method, rt.path, c.name, got, want, body)
				continue
			}
			if want == 401 && h.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
				t.Errorf("%s %s as %s: 401 without the Basic challenge", rt.method, rt.path, c.name)
			}
			if (want == 401 || want == 403) && rt.method != "HEAD" {
				if fs := faultstring(t, body); fs == "" {
					t.Errorf("%s %s as %s: empty faultstring", rt.method, rt.path, c.name)
				}
			}
		}
	}

	// Refused writes changed nothing: the admin's one create and one delete
	// leave two nodes (m1, m-new), and m1 got one port.
	_, _, b = k.call("GET", "/v1/nodes", "", admin...)
	var list struct{ Nodes []map[string]any }
	if err := json.Unmarshal(b, &list); err != nil || len(list.Nodes) != 2 {
		t.Errorf("nodes after the matrix: %s", b)
	}
	code, _, b = k.call("GET", "/v1/ports", "", admin...)
	var ports struct{ Ports []map[string]any }
	if err := json.Unmarshal(b, &ports); err != nil || code != 200 || len(ports.Ports) != 1 {
		t.Errorf("ports after the matrix: %d %s", code, b)
	}

	// A reader sees secrets masked, in every view.
	for _, p := range []string{"/v1/nodes/m1", "/v1/nodes/detail", "/v1/nodes/m1?fields=driver_info"} {
		code, _, b := k.call("GET", p, "", basic("viewer", "viewer-pw")...)
		if code != 200 || strings.Contains(string(b), "s3cr3t-pw") || !strings.Contains(string(b), `"******"`) {
			t.Errorf("reader GET %s: %d, secret not masked: %s", p, code, b)
		}
	}
}

// TestGophercloudHTTPBasic: gophercloud's http_basic client (what Metal3's
// baremetal-operator uses) works against kiln serve --htpasswd; its noauth
// client is refused.
func TestGophercloudHTTPBasic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := startAuthKiln(t)
	c, err := httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{IronicEndpoint: k.URL + "/v1/", IronicUser: "admin", IronicUserPassword: "admin-pw"})
	if err != nil {
		t.Fatal(err)
	}
	c.Microversion = "1.95"
	created, err := nodes.Create(ctx, c, nodes.CreateOpts{Name: "metal3~worker-0", Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	got, err := nodes.Get(ctx, c, "metal3~worker-0").Extract()
	if err != nil || got.UUID != created.UUID {
		t.Fatalf("get = %+v, %v", got, err)
	}

	anon, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: k.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = nodes.Get(ctx, anon, created.UUID).Extract()
	wantStatus(t, err, http.StatusUnauthorized)

	reader, err := httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{IronicEndpoint: k.URL + "/v1/", IronicUser: "viewer", IronicUserPassword: "viewer-pw"})
	if err != nil {
		t.Fatal(err)
	}
	reader.Microversion = "1.95"
	if _, err := nodes.Get(ctx, reader, created.UUID).Extract(); err != nil {
		t.Fatalf("reader get: %v", err)
	}
	_, err = nodes.Update(ctx, reader, created.UUID, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/extra/x", Value: "y"}}).Extract()
	wantStatus(t, err, http.StatusForbidden)
}

// TestServeAuthFlags: kiln serve refuses a weak htpasswd file naming the
// line, and warns loudly when it listens beyond loopback without auth.
func TestServeAuthFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ht := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(ht, []byte("# ops\nalice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kilnBin, "serve", "--listen", kilnproc.FreeAddr(t), "--db", filepath.Join(dir, "k.db"), "--htpasswd", ht).CombinedOutput()
	if err == nil || !strings.Contains(string(out), ht+" line 2") || !strings.Contains(string(out), "MD5 (apr1)") {
		t.Fatalf("weak htpasswd: err %v, output:\n%s", err, out)
	}
	out, err = exec.Command(kilnBin, "serve", "--listen", kilnproc.FreeAddr(t), "--db", filepath.Join(dir, "k.db"), "--auth", "http_basic").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs --htpasswd") {
		t.Fatalf("http_basic without a file: err %v, output:\n%s", err, out)
	}

	open := kilnproc.StartAddr(t, kilnBin, filepath.Join(dir, "open.db"), "0.0.0.0:"+strings.Split(kilnproc.FreeAddr(t), ":")[1], "--conductor", "c1")
	// The output is copied from the process's pipe by a goroutine: read it
	// once the process has exited and everything it wrote is in.
	open.Stop()
	if !strings.Contains(open.Logs(), "API AUTHENTICATION IS OFF") {
		t.Errorf("no warning for an open API on 0.0.0.0:\n%s", open.Logs())
	}
	local := kilnproc.Start(t, kilnBin, filepath.Join(dir, "local.db"), "--conductor", "c2")
	local.Stop()
	if strings.Contains(local.Logs(), "AUTHENTICATION IS OFF") {
		t.Errorf("warning on loopback:\n%s", local.Logs())
	}
}
