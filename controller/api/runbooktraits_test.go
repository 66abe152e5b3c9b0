package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestRunbook112Fields: from 1.112 a runbook has a description and traits
// (shown, [] when none), its name need only be URL-safe, and traits are
// not set by create or patch; below it all is as in 1.92.
func TestRunbook112Fields(t *testing.T) {
	srv, _ := stepsServer(t)
	steps := `"steps":[{"interface":"deploy","step":"erase_devices","order":1}]`
	r := mustCall(t, srv, 201, "POST", "/v1/runbooks", "1.112", `{"name":"wipe-disks.v2","description":"erase all",`+steps+`}`)
	if r["description"] != "erase all" || fmt.Sprint(r["traits"]) != "[]" {
		t.Errorf("created at 1.112: %v", r)
	}
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
	}{
		{"a name that is no trait below 1.112", "POST", "/v1/runbooks", "1.111", `{"name":"wipe-disks",` + steps + `}`, 400},
		{"description below 1.112", "POST", "/v1/runbooks", "1.111", `{"name":"CUSTOM_X","description":"d",` + steps + `}`, 406},
		{"traits on create", "POST", "/v1/runbooks", "1.112", `{"name":"x","traits":["CUSTOM_A"],` + steps + `}`, 400},
		{"a name with a slash", "POST", "/v1/runbooks", "1.112", `{"name":"a/b",` + steps + `}`, 400},
		{"a name too long", "POST", "/v1/runbooks", "1.112", `{"name":"` + strings.Repeat("n", 256) + `",` + steps + `}`, 400},
		{"a description too long", "POST", "/v1/runbooks", "1.112", `{"name":"long","description":"` + strings.Repeat("d", 256) + `",` + steps + `}`, 400},
		{"patch traits", "PATCH", "/v1/runbooks/wipe-disks.v2", "1.112", `[{"op":"add","path":"/traits","value":["CUSTOM_A"]}]`, 400},
		{"patch description below 1.112", "PATCH", "/v1/runbooks/wipe-disks.v2", "1.111", `[{"op":"add","path":"/description","value":"x"}]`, 406},
		{"?fields=traits below 1.112", "GET", "/v1/runbooks/wipe-disks.v2?fields=traits", "1.111", "", 406},
	} {
		if code, body := call(t, srv, c.method, c.path, c.version, c.body); code != c.code {
			t.Errorf("%s: %d %v, want %d", c.name, code, body, c.code)
		}
	}
	old := mustCall(t, srv, 200, "GET", "/v1/runbooks/wipe-disks.v2", "1.111", "")
	if _, ok := old["description"]; ok {
		t.Errorf("description shown at 1.111: %v", old)
	}
	if _, ok := old["traits"]; ok {
		t.Errorf("traits shown at 1.111: %v", old)
	}
	p := mustCall(t, srv, 200, "PATCH", "/v1/runbooks/wipe-disks.v2", "1.112", `[{"op":"replace","path":"/description","value":"erase, then check"}]`)
	if p["description"] != "erase, then check" {
		t.Errorf("patched: %v", p)
	}
	got := mustCall(t, srv, 200, "GET", "/v1/runbooks?detail=true", "1.112", "")["runbooks"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["description"] != "erase, then check" {
		t.Errorf("list detail: %v", got)
	}
}

// TestRunbookTraits drives /v1/runbooks/{id}/traits (1.112) with Ironic's
// rules, and the approval it gives: from 1.112 a node may run a runbook
// that has one of its traits (none configured is refused); below, the
// runbook's name must be one of the node's traits.
func TestRunbookTraits(t *testing.T) {
	srv, st := stepsServer(t)
	steps := `"steps":[{"interface":"deploy","step":"erase_devices","order":1}]`
	id := mustCall(t, srv, 201, "POST", "/v1/runbooks", "1.112", `{"name":"CUSTOM_WIPE",`+steps+`}`)["uuid"].(string)
	list := func() string {
		t.Helper()
		return fmt.Sprint(mustCall(t, srv, 200, "GET", "/v1/runbooks/CUSTOM_WIPE/traits", "1.112", "")["traits"])
	}
	tr := "/v1/runbooks/CUSTOM_WIPE/traits"
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
		after                             string
	}{
		{"below 1.112", "GET", tr, "1.111", "", 404, "The API version does not allow runbook traits", "[]"},
		{"unknown runbook", "GET", "/v1/runbooks/CUSTOM_NONE/traits", "1.112", "", 404, "Runbook CUSTOM_NONE could not be found.", "[]"},
		{"add one", "PUT", tr + "/CUSTOM_GPU", "1.112", "", 204, "", "[CUSTOM_GPU]"},
		{"add it again", "PUT", tr + "/CUSTOM_GPU", "1.112", "", 204, "", "[CUSTOM_GPU]"},
		{"add a bad one", "PUT", tr + "/custom_lower", "1.112", "", 400, "custom_lower", "[CUSTOM_GPU]"},
		{"add with a body", "PUT", tr + "/CUSTOM_B", "1.112", `{"traits":["CUSTOM_C"]}`, 400, "No body should be provided when adding a trait", "[CUSTOM_GPU]"},
		{"replace", "PUT", tr, "1.112", `{"traits":["HW_CPU_X86_AVX2","CUSTOM_A"]}`, 204, "", "[CUSTOM_A HW_CPU_X86_AVX2]"},
		{"replace with no body", "PUT", tr, "1.112", "", 400, "A single runbook trait may be added", "[CUSTOM_A HW_CPU_X86_AVX2]"},
		{"replace with another key", "PUT", tr, "1.112", `{"trait":["CUSTOM_A"]}`, 400, "Additional properties are not allowed", "[CUSTOM_A HW_CPU_X86_AVX2]"},
		{"replace with a bad trait", "PUT", tr, "1.112", `{"traits":["NOPE"]}`, 400, "NOPE", "[CUSTOM_A HW_CPU_X86_AVX2]"},
		{"remove one it lacks", "DELETE", tr + "/CUSTOM_ZZZ", "1.112", "", 204, "", "[CUSTOM_A HW_CPU_X86_AVX2]"},
		{"remove one", "DELETE", tr + "/HW_CPU_X86_AVX2", "1.112", "", 204, "", "[CUSTOM_A]"},
		{"by UUID", "PUT", "/v1/runbooks/" + id + "/traits/CUSTOM_B", "1.112", "", 204, "", "[CUSTOM_A CUSTOM_B]"},
	} {
		code, body := call(t, srv, c.method, c.path, c.version, c.body)
		if code != c.code {
			t.Errorf("%s: %d %v, want %d", c.name, code, body, c.code)
		} else if c.fault != "" && !strings.Contains(ironicFault(t, body), c.fault) {
			t.Errorf("%s: fault %q, want %q", c.name, ironicFault(t, body), c.fault)
		}
		if got := list(); got != c.after {
			t.Errorf("%s: traits %s, want %s", c.name, got, c.after)
		}
	}
	var many []string
	for i := range 51 {
		many = append(many, fmt.Sprintf(`"CUSTOM_T%d"`, i))
	}
	if code, _ := call(t, srv, "PUT", tr, "1.112", `{"traits":[`+strings.Join(many, ",")+`]}`); code != http.StatusBadRequest {
		t.Errorf("51 traits: %d, want 400", code)
	}
	// Traits survive a patch of the runbook.
	mustCall(t, srv, 200, "PATCH", "/v1/runbooks/CUSTOM_WIPE", "1.112", `[{"op":"add","path":"/extra/k","value":"v"}]`)
	if got := list(); got != "[CUSTOM_A CUSTOM_B]" {
		t.Errorf("after a patch: %s", got)
	}

	// Approval.
	ctx := context.Background()
	uuid := mustCall(t, srv, 201, "POST", "/v1/nodes", "1.92", `{"driver":"fake-hardware"}`)["uuid"].(string)
	manageable := func(ts ...string) {
		t.Helper()
		if _, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error {
			n.ProvisionState, n.Traits = proto.StateManageable, ts
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	prov := "/v1/nodes/" + uuid + "/states/provision"
	clean := `{"target":"clean","runbook":"CUSTOM_WIPE"}`
	manageable("CUSTOM_WIPE") // the name, not one of the runbook's traits
	if code, b := call(t, srv, "PUT", prov, "1.112", clean); code != 400 || !strings.Contains(ironicFault(t, b), "does not have any of the runbook's traits ['CUSTOM_A', 'CUSTOM_B']") {
		t.Errorf("1.112, node with the name only: %d %v", code, b)
	}
	mustCall(t, srv, 202, "PUT", prov, "1.111", clean) // below 1.112 the name approves
	manageable("CUSTOM_B")
	if code, b := call(t, srv, "PUT", prov, "1.111", clean); code != 400 || !strings.Contains(ironicFault(t, b), "Please ask an administrator to add it to your node traits.") {
		t.Errorf("1.111, node with a runbook trait only: %d %v", code, b)
	}
	mustCall(t, srv, 202, "PUT", prov, "1.112", clean)
	// A runbook without traits approves nothing from 1.112.
	mustCall(t, srv, 204, "DELETE", tr, "1.112", "")
	manageable("CUSTOM_WIPE", "CUSTOM_B")
	if code, b := call(t, srv, "PUT", prov, "1.112", clean); code != 400 || !strings.Contains(ironicFault(t, b), "Runbook "+id+" has no traits configured.") {
		t.Errorf("runbook without traits: %d %v", code, b)
	}
}
