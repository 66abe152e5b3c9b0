package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// traitsOf reads a node's traits through GET …/traits.
func traitsOf(t *testing.T, call func(method, path, version, body string) (int, map[string]any), node string) []string {
	t.Helper()
	code, body := call("GET", "/v1/nodes/"+node+"/traits", "1.37", "")
	if code != http.StatusOK {
		t.Fatalf("GET traits: %d %v", code, body)
	}
	var out []string
	for _, v := range body["traits"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

// TestNodeTraits walks Ironic's traits API: replace, add, remove, clear,
// the node's traits field, and every refusal with Ironic's status and body.
func TestNodeTraits(t *testing.T) {
	srv := chassisServer(t)
	do := func(method, path, version, body string) (int, map[string]any) {
		return call(t, srv, method, path, version, body)
	}
	code, n := do("POST", "/v1/nodes", "1.37", `{"driver":"fake-hardware","name":"n1"}`)
	if code != http.StatusCreated {
		t.Fatalf("create node: %d %v", code, n)
	}
	id := n["uuid"].(string)
	if got := traitsOf(t, do, "n1"); len(got) != 0 {
		t.Fatalf("a new node has traits %v", got)
	}

	// Replace all with the API reference's request: stored sorted, once.
	code, body := do("PUT", "/v1/nodes/n1/traits", "1.37", apiRefSample(t, "node-set-traits-request.json"))
	if code != http.StatusNoContent {
		t.Fatalf("PUT traits: %d %v", code, body)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, "node-traits-list-response.json")), &want); err != nil {
		t.Fatal(err)
	}
	_, got := do("GET", "/v1/nodes/n1/traits", "1.37", "")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GET traits = %v, the API reference's response is %v", got, want)
	}
	code, _ = do("PUT", "/v1/nodes/"+id+"/traits", "1.37", `{"traits":["CUSTOM_B","CUSTOM_A","CUSTOM_B"]}`)
	if code != http.StatusNoContent {
		t.Fatalf("PUT traits: %d", code)
	}
	if got := traitsOf(t, do, id); !slices.Equal(got, []string{"CUSTOM_A", "CUSTOM_B"}) {
		t.Errorf("after replace: %v", got)
	}

	// Add one (idempotent), remove one.
	for range 2 {
		req, _ := http.NewRequest("PUT", srv.URL+"/v1/nodes/n1/traits/HW_CPU_X86_AVX2", nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.37")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT one trait: %d", resp.StatusCode)
		}
		if loc := resp.Header.Get("Location"); !strings.HasSuffix(loc, "/v1/nodes/n1/traits/HW_CPU_X86_AVX2") {
			t.Errorf("Location %q", loc)
		}
	}
	if got := traitsOf(t, do, "n1"); !slices.Equal(got, []string{"CUSTOM_A", "CUSTOM_B", "HW_CPU_X86_AVX2"}) {
		t.Errorf("after add: %v", got)
	}
	if code, _ := do("DELETE", "/v1/nodes/n1/traits/CUSTOM_A", "1.37", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE one trait: %d", code)
	}
	// The node shows its traits from 1.37, not before.
	_, node := do("GET", "/v1/nodes/n1", "1.37", "")
	if fmt.Sprint(node["traits"]) != "[CUSTOM_B HW_CPU_X86_AVX2]" {
		t.Errorf("node traits = %v", node["traits"])
	}
	_, node = do("GET", "/v1/nodes/n1", "1.36", "")
	if _, ok := node["traits"]; ok {
		t.Error("traits shown at 1.36")
	}

	// Refusals: Ironic's status and message, nothing changed.
	for _, tc := range []struct {
		method, path, version, body string
		code                        int
		msg                         string
	}{
		{"GET", "/v1/nodes/n1/traits", "1.36", "", 404, ""},
		{"PUT", "/v1/nodes/n1/traits/CUSTOM_X", "1.36", "", 404, ""},
		{"GET", "/v1/nodes/nope/traits", "1.37", "", 404, "Node nope could not be found."},
		{"PUT", "/v1/nodes/n1/traits/CUSTOM_x", "1.37", "", 400, "Schema error for trait: 'CUSTOM_x' is not valid under any of the given schemas"},
		{"PUT", "/v1/nodes/n1/traits/HW_NOT_A_TRAIT", "1.37", "", 400, "Schema error for trait: 'HW_NOT_A_TRAIT' is not valid under any of the given schemas"},
		{"PUT", "/v1/nodes/n1/traits/CUSTOM_X", "1.37", `{"traits":["CUSTOM_Y"]}`, 400, "No body should be provided when adding a trait"},
		{"PUT", "/v1/nodes/n1/traits", "1.37", "", 400, "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body."},
		{"PUT", "/v1/nodes/n1/traits", "1.37", `{}`, 400, "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body."},
		{"PUT", "/v1/nodes/n1/traits", "1.37", `{"traits":["CUSTOM_A"],"x":1}`, 400, "Schema error for body: Additional properties are not allowed ('x' was unexpected)"},
		{"PUT", "/v1/nodes/n1/traits", "1.37", `{"traits":["CUSTOM_A","bad"]}`, 400, "Schema error for body: 'bad' is not valid under any of the given schemas"},
		{"PUT", "/v1/nodes/n1/traits", "1.37", `{"traits":"CUSTOM_A"}`, 400, ""},
		{"PUT", "/v1/nodes/n1/traits", "1.37", fmt.Sprintf(`{"traits":["CUSTOM_%s"]}`, strings.Repeat("A", 249)), 400, ""},
		{"PUT", "/v1/nodes/n1/traits", "1.37", manyTraits(51), 400, "Could not modify traits for node " + id + " as it would exceed the maximum number of traits per node (51 vs. 50)"},
		{"DELETE", "/v1/nodes/n1/traits/CUSTOM_A", "1.37", "", 404, "Node " + id + " doesn't have a trait 'CUSTOM_A'"},
		{"PATCH", "/v1/nodes/n1", "1.37", `[{"op":"add","path":"/traits","value":["CUSTOM_Z"]}]`, 400, ""},
	} {
		code, body := do(tc.method, tc.path, tc.version, tc.body)
		if code != tc.code {
			t.Errorf("%s %s %q at %s: %d %v, want %d", tc.method, tc.path, tc.body, tc.version, code, body, tc.code)
			continue
		}
		if tc.msg != "" {
			if got := ironicFault(t, body); got != tc.msg {
				t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.msg)
			}
		}
	}
	if got := traitsOf(t, do, "n1"); !slices.Equal(got, []string{"CUSTOM_B", "HW_CPU_X86_AVX2"}) {
		t.Errorf("refused requests changed the traits: %v", got)
	}

	// Fifty is allowed; clearing leaves an empty list.
	if code, body := do("PUT", "/v1/nodes/n1/traits", "1.37", manyTraits(50)); code != http.StatusNoContent {
		t.Fatalf("50 traits: %d %v", code, body)
	}
	if got := traitsOf(t, do, "n1"); len(got) != 50 {
		t.Errorf("%d traits stored, want 50", len(got))
	}
	if code, _ := do("DELETE", "/v1/nodes/n1/traits", "1.37", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE traits: %d", code)
	}
	_, got = do("GET", "/v1/nodes/n1/traits", "1.37", "")
	if b, _ := json.Marshal(got); string(b) != `{"traits":[]}` {
		t.Errorf("after clear: %s", b)
	}
}

func manyTraits(n int) string {
	ts := make([]string, n)
	for i := range ts {
		ts[i] = fmt.Sprintf("CUSTOM_T%03d", i)
	}
	b, _ := json.Marshal(map[string]any{"traits": ts})
	return string(b)
}

// TestNodeTraitsHonourTheNodeLock: while a conductor holds the node, trait
// changes are refused with Ironic's NodeLocked and change nothing.
func TestNodeTraitsHonourTheNodeLock(t *testing.T) {
	srv, st, _ := allocServer(t)
	n := putNode(t, st, "locked", "available", "gold", "CUSTOM_A")
	if _, err := st.Reserve(t.Context(), n.UUID, "conductor-x"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "/v1/nodes/locked/traits", `{"traits":["CUSTOM_B"]}`},
		{"PUT", "/v1/nodes/locked/traits/CUSTOM_B", ""},
		{"DELETE", "/v1/nodes/locked/traits/CUSTOM_A", ""},
		{"DELETE", "/v1/nodes/locked/traits", ""},
	} {
		code, body := call(t, srv, tc.method, tc.path, "1.37", tc.body)
		want := "Node " + n.UUID + " is locked by host conductor-x, please retry after the current operation is completed."
		if code != http.StatusConflict || ironicFault(t, body) != want {
			t.Errorf("%s %s on a locked node: %d %v", tc.method, tc.path, code, body)
		}
	}
	got, err := st.GetNode(t.Context(), n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Traits, []string{"CUSTOM_A"}) {
		t.Errorf("traits changed on a locked node: %v", got.Traits)
	}
}
