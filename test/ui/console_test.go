// Package ui_test drives the web console in a real headless Chromium
// (Debian's chromium, through chromedp) against a real kiln serve with
// fake-hardware nodes and HTTP basic authentication.
package ui_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

const secret = "hunter2-bmc-secret"

func chromium(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not installed (Debian package chromium; .ci/run installs it)")
	return ""
}

func startKiln(t testing.TB, extra ...string) *kilnproc.Proc {
	t.Helper()
	args := append([]string{"--conductor", "ui-test", "--power-sync-interval", "0"}, extra...)
	return kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), args...)
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// enroll creates n fake-hardware nodes as admin.
func enroll(t *testing.T, p *kilnproc.Proc, n int) {
	t.Helper()
	c := &http.Client{Transport: authTransport{basic("admin", "admin-pw")}}
	for i := range n {
		body := map[string]any{"name": fmt.Sprintf("rack1-node%02d", i), "driver": "fake-hardware",
			"driver_info": map[string]any{"ipmi_password": secret, "ipmi_address": fmt.Sprintf("10.0.0.%d", i+10)}}
		code, doc, err := kilnproc.CallJSON(c, p.URL, "POST", "/v1/nodes", body)
		if err != nil || code != 201 {
			t.Fatalf("enroll: %d %v %v", code, doc, err)
		}
		kilnproc.CallJSON(c, p.URL, "POST", "/v1/ports", map[string]any{"node_uuid": doc["uuid"], "address": fmt.Sprintf("52:54:00:ee:00:%02x", i)})
	}
}

type authTransport struct{ auth string }

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.auth)
	r.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	return http.DefaultTransport.RoundTrip(r)
}

// browser opens a headless Chromium, sending the credentials auth (an
// Authorization header) when it is not empty.
func browser(t testing.TB, auth string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, chromedp.WindowSize(1280, 800), chromedp.DisableGPU)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// A generous safety net: a loaded 2-core machine is slow; nothing here
	// is timed.
	ctx, cancel3 := context.WithTimeout(ctx, 20*time.Minute)
	t.Cleanup(cancel3)
	if auth == "" {
		return ctx
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// open loads a console page and waits until its data is in.
func open(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.body.dataset.ready === "true"`)
}

// js evaluates an expression in the page (awaiting it if it is a promise).
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// poll waits until expr is true in the page. The limit is a safety net.
func poll(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(5*time.Minute))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("KILN_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// TestConsole: an admin sees the fleet, moves three nodes with a bulk
// action and watches the table follow the event stream without a reload,
// opens a node, and gets a per-entry error for an invalid enrollment; the
// BMC password never reaches the page.
func TestConsole(t *testing.T) {
	chromium(t)
	p := startKiln(t, kilnproc.AuthFlags(t)...)
	enroll(t, p, 6)
	ctx := browser(t, basic("admin", "admin-pw"))
	open(t, ctx, p.URL+"/ui/")
	if rows := js[int](t, ctx, `document.querySelectorAll("#fleet tbody tr").length`); rows != 6 {
		t.Fatalf("fleet table has %d rows, want 6", rows)
	}
	// Mark the page (a reload would lose the mark), select three nodes,
	// choose manage and confirm.
	js[bool](t, ctx, `window.notReloaded = true`)
	js[bool](t, ctx, `[1, 2, 3].forEach(i => document.querySelector("#fleet tbody tr:nth-child(" + i + ") input").click()), true`)
	js[bool](t, ctx, `(() => { const s = document.getElementById("bulk-action"); s.value = "manage"; s.dispatchEvent(new Event("change")); return true })()`)
	poll(t, ctx, `!document.getElementById("bulk-go").disabled`)
	js[bool](t, ctx, `document.getElementById("bulk-go").click(), true`)
	poll(t, ctx, `document.getElementById("confirm").open`)
	if got := js[string](t, ctx, `document.getElementById("confirm-text").textContent`); !strings.HasPrefix(got, "manage 3 nodes: rack1-node00, rack1-node01, rack1-node02") {
		t.Errorf("confirmation %q does not name the action and the nodes", got)
	}
	js[bool](t, ctx, `document.getElementById("confirm-ok").click(), true`)
	poll(t, ctx, `[...document.querySelectorAll("#fleet tbody tr td:nth-child(3)")].filter(td => td.textContent === "manageable").length === 3`)
	if !js[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}
	screenshot(t, ctx, "console-fleet.png")

	// The node view: history, ports and the actions its state allows.
	js[bool](t, ctx, `document.querySelector("#fleet tbody tr:nth-child(1) td:nth-child(2)").click(), true`)
	poll(t, ctx, `!document.getElementById("node-view").hidden && document.querySelectorAll("#node-history li").length > 0`)
	verbs := js[[]string](t, ctx, `[...document.querySelectorAll("#node-actions button")].map(b => b.dataset.verb)`)
	if !strings.Contains(" "+strings.Join(verbs, " ")+" ", " provide ") || strings.Contains(strings.Join(verbs, " "), "undeploy") {
		t.Errorf("actions offered on a manageable node: %v", verbs)
	}
	poll(t, ctx, `document.getElementById("node-fields").textContent.includes("ipmi_password")`)
	poll(t, ctx, `document.getElementById("node-ports").textContent.includes("52:54:00:ee:00:00") && document.getElementById("node-inventory").textContent !== ""`)
	page := js[string](t, ctx, `document.documentElement.outerHTML`)
	if strings.Contains(page, secret) {
		t.Error("the BMC password is in the page")
	}
	if !strings.Contains(page, "******") {
		t.Error("the node's fields are not shown (no masked password in the page)")
	}
	screenshot(t, ctx, "console-node-manageable.png")

	// A node mid-deploy: the direct deploy interface waits for an agent
	// that fake-hardware never boots, so the node stays in wait call-back.
	admin := &http.Client{Transport: authTransport{basic("admin", "admin-pw")}}
	mid := js[string](t, ctx, `document.querySelector("#fleet tbody tr:nth-child(4)").dataset.uuid`)
	for _, c := range []struct {
		method, path string
		body         any
		code         int
	}{
		{"PATCH", "/v1/nodes/" + mid, []map[string]any{{"op": "replace", "path": "/deploy_interface", "value": "direct"},
			{"op": "add", "path": "/automated_clean", "value": false},
			{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/ubuntu.qcow2"},
			{"op": "add", "path": "/instance_info/image_checksum", "value": strings.Repeat("ab", 32)}}, 200},
		{"PUT", "/v1/nodes/" + mid + "/states/provision", map[string]any{"target": "manage"}, 202},
	} {
		if code, doc, err := kilnproc.CallJSON(admin, p.URL, c.method, c.path, c.body); err != nil || code != c.code {
			t.Fatalf("%s %s: %d %v %v", c.method, c.path, code, doc, err)
		}
	}
	for _, step := range []struct{ verb, state string }{{"provide", "available"}, {"deploy", "wait call-back"}} {
		poll(t, ctx, `(async () => (await (await fetch("/v1/nodes/`+mid+`", {headers: {"X-OpenStack-Ironic-API-Version": "1.95"}})).json()).target_provision_state === null)()`)
		if code, doc, err := kilnproc.CallJSON(admin, p.URL, "PUT", "/v1/nodes/"+mid+"/states/provision", map[string]any{"target": step.verb}); err != nil || code != 202 {
			t.Fatalf("%s: %d %v %v", step.verb, code, doc, err)
		}
		poll(t, ctx, `[...document.querySelectorAll("#fleet tbody tr")].some(tr => tr.dataset.uuid === "`+mid+`" && tr.children[2].textContent.startsWith("`+step.state+`"))`)
	}
	js[bool](t, ctx, `location.hash = "#/node/`+mid+`", true`)
	poll(t, ctx, `document.getElementById("node-title").textContent.includes("wait call-back → active") && document.querySelectorAll("#node-history li").length >= 4`)
	screenshot(t, ctx, "console-node-deploying.png")

	// The health page: nodes by state, drawn from the controller's metrics.
	js[bool](t, ctx, `location.hash = "#/health", true`)
	poll(t, ctx, `document.getElementById("health-view").dataset.loaded === "true"`)
	legend := js[string](t, ctx, `document.getElementById("health-legend").textContent`)
	if !strings.Contains(legend, "manageable 3") || !strings.Contains(legend, "enroll 2") || !strings.Contains(legend, "wait call-back 1") {
		t.Errorf("health legend %q: want manageable 3, enroll 2, wait call-back 1", legend)
	}
	if n := js[int](t, ctx, `document.querySelectorAll("#health-states polyline").length`); n < 3 {
		t.Errorf("%d state lines drawn, want one per state (3)", n)
	}
	screenshot(t, ctx, "console-health.png")

	// Enrollment: one bad entry among good ones gets its own error.
	open(t, ctx, p.URL+"/ui/#/enroll")
	js[bool](t, ctx, `document.getElementById("enroll-many").value = JSON.stringify([
		{"name": "new-a", "driver": "fake-hardware", "ports": [{"address": "52:54:00:ee:01:01"}]},
		{"name": "new-b", "driver": "no-such-driver"}]), true`)
	js[bool](t, ctx, `document.getElementById("enroll-many-go").click(), true`)
	poll(t, ctx, `document.querySelectorAll("#enroll-results li").length === 2`)
	results := js[[]string](t, ctx, `[...document.querySelectorAll("#enroll-results li")].map(li => li.className + "|" + li.textContent)`)
	if len(results) != 2 || !strings.HasPrefix(results[0], "|new-a: enrolled") || !strings.HasPrefix(results[1], "error|new-b:") || !strings.Contains(results[1], "no-such-driver") {
		t.Errorf("enroll results: %q", results)
	}
}

// TestConsoleReader: a reader sees the fleet but no action controls, and
// the API refuses the actions if the page tries them anyway.
func TestConsoleReader(t *testing.T) {
	chromium(t)
	p := startKiln(t, kilnproc.AuthFlags(t)...)
	enroll(t, p, 2)
	ctx := browser(t, basic("viewer", "viewer-pw"))
	open(t, ctx, p.URL+"/ui/")
	rows := js[int](t, ctx, `document.querySelectorAll("#fleet tbody tr").length`)
	bulkShown := js[bool](t, ctx, `getComputedStyle(document.getElementById("bulk")).display !== "none"`)
	readonly := js[bool](t, ctx, `document.body.classList.contains("readonly")`)
	if rows != 2 || bulkShown || !readonly {
		t.Errorf("reader: %d rows, bulk controls shown %v, read-only %v", rows, bulkShown, readonly)
	}
	status := js[int](t, ctx, `(async () => {
		const uuid = document.querySelector("#fleet tbody tr").dataset.uuid;
		const r = await fetch("/v1/nodes/" + uuid + "/states/provision", {method: "PUT",
			headers: {"Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "1.95"}, body: '{"target": "manage"}'});
		return r.status;
	})()`)
	if status != http.StatusForbidden {
		t.Errorf("a reader's provision request from the page: %d, want 403", status)
	}
	// Without credentials the console is not served at all.
	resp, err := http.Get(p.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/ui/ without credentials: %d, want 401", resp.StatusCode)
	}
}
