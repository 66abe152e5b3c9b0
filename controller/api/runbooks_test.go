package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// stepsServer is the API on a fresh SQLite store, with the store.
func stepsServer(t *testing.T) (*httptest.Server, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", LockWait: -1}))
	t.Cleanup(srv.Close)
	return srv, st
}

// TestRunbooksMatchAPIReference creates, lists, shows and updates a
// runbook with the API reference's requests and compares the answers'
// shapes with the reference's responses.
func TestRunbooksMatchAPIReference(t *testing.T) {
	srv, _ := stepsServer(t)
	decode := func(name string) map[string]any {
		want := apiRefJSON(t, name)
		// Ironic's samples predate disable_ramdisk in the answer; its
		// schema has it (RUNBOOK_SCHEMA), so Kiln shows it.
		if _, ok := want["uuid"]; ok {
			want["disable_ramdisk"] = false
		}
		return want
	}
	code, created := call(t, srv, "POST", "/v1/runbooks", "1.92", apiRefSample(t, "runbook-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, created)
	}
	sameShape(t, "create", decode("runbook-create-response.json"), created)
	id := created["uuid"].(string)
	name := created["name"].(string)
	for _, c := range []struct{ path, sample string }{
		{"/v1/runbooks/" + id, "runbook-show-response.json"},
		{"/v1/runbooks/" + name, "runbook-show-response.json"},
		{"/v1/runbooks", "runbook-list-response.json"},
		{"/v1/runbooks/detail", "runbook-detail-response.json"},
	} {
		code, got := call(t, srv, "GET", c.path, "1.92", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", c.path, code, got)
		}
		want := decode(c.sample)
		if list, ok := want["runbooks"].([]any); ok && c.path == "/v1/runbooks/detail" {
			list[0].(map[string]any)["disable_ramdisk"] = false
		}
		sameShape(t, c.path, want, got)
	}
	code, patched := call(t, srv, "PATCH", "/v1/runbooks/"+id, "1.92", apiRefSample(t, "runbook-update-request.json"))
	if code != http.StatusOK {
		t.Fatalf("patch: %d %v", code, patched)
	}
	sameShape(t, "patch", decode("runbook-update-response.json"), patched)
}

// TestRunbookRules: validation, gating, owner and public, errors.
func TestRunbookRules(t *testing.T) {
	srv, _ := stepsServer(t)
	const id = "1be26c0b-03f2-4d2e-ae87-c02d7f33c126"
	step := `{"interface":"deploy","step":"erase_devices","order":"2"}`
	code, body := call(t, srv, "POST", "/v1/runbooks", "1.92", `{"uuid":"`+id+`","name":"CUSTOM_WIPE","steps":[`+step+`],"owner":"ops"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	s0 := body["steps"].([]any)[0].(map[string]any)
	if s0["order"] != float64(2) || s0["args"] == nil || body["public"] != false || body["disable_ramdisk"] != false || body["owner"] != "ops" {
		t.Errorf("created: %v", body)
	}
	ok := `{"interface":"deploy","step":"s","order":1}`
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
	}{
		{"list below 1.92", "GET", "/v1/runbooks", "1.91", "", 404, "The API version does not allow runbooks"},
		{"create below 1.92", "POST", "/v1/runbooks", "1.91", `{"name":"CUSTOM_B","steps":[` + ok + `]}`, 405, "does not allow runbooks"},
		{"patch below 1.92", "PATCH", "/v1/runbooks/" + id, "1.91", `[]`, 405, "does not allow runbooks"},
		{"name not a trait", "POST", "/v1/runbooks", "1.92", `{"name":"wipe","steps":[` + ok + `]}`, 400, "must be a standard trait"},
		{"no steps", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B"}`, 400, "'steps' is a required property"},
		{"step without order", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"s"}]}`, 400, "'order' is a required property"},
		{"step with priority", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B","steps":[{"interface":"deploy","step":"s","order":1,"priority":1}]}`, 400, "'priority' was unexpected"},
		{"duplicate steps", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B","steps":[` + ok + `,` + ok + `]}`, 400, "Duplicate deploy steps"},
		{"owner too long", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B","steps":[` + ok + `],"owner":"` + strings.Repeat("o", 256) + `"}`, 400, "too long"},
		{"public not a boolean", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B","steps":[` + ok + `],"public":"yes"}`, 400, "public"},
		{"duplicate name", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_WIPE","steps":[` + ok + `]}`, 409, "A runbook with name CUSTOM_WIPE already exists."},
		{"owner on a public runbook", "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_B","steps":[` + ok + `],"public":true,"owner":"x"}`, 400, "There cannot be an owner for a public runbook"},
		{"unknown runbook", "GET", "/v1/runbooks/CUSTOM_NONE", "1.92", "", 404, "Runbook CUSTOM_NONE could not be found."},
		{"patch created_at", "PATCH", "/v1/runbooks/" + id, "1.92", `[{"op":"replace","path":"/created_at","value":"x"}]`, 400, "Cannot patch /created_at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, c.method, c.path, c.version, c.body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if f := ironicFault(t, body); !strings.Contains(f, c.fault) {
				t.Errorf("faultstring %q, want it to contain %q", f, c.fault)
			}
		})
	}
	// GET /v1/ links the collection from 1.92.
	for v, want := range map[string]bool{"1.91": false, "1.92": true} {
		code, root := call(t, srv, "GET", "/v1/", v, "")
		if _, ok := root["runbooks"]; code != http.StatusOK || ok != want {
			t.Errorf("GET /v1/ at %s: runbooks linked %v, want %v", v, ok, want)
		}
	}
	// Making it public drops its owner, as Ironic's patch does.
	code, got := call(t, srv, "PATCH", "/v1/runbooks/CUSTOM_WIPE", "1.92", `[{"op":"replace","path":"/public","value":true}]`)
	if code != http.StatusOK || got["public"] != true || got["owner"] != nil {
		t.Errorf("made public: %d %v", code, got)
	}
	code, got = call(t, srv, "PATCH", "/v1/runbooks/CUSTOM_WIPE", "1.92", `[{"op":"replace","path":"/owner","value":"x"}]`)
	if code != http.StatusBadRequest || !strings.Contains(ironicFault(t, got), "There cannot be an owner for a public runbook") {
		t.Errorf("owner on a public runbook: %d %v", code, got)
	}
	code, got = call(t, srv, "PATCH", "/v1/runbooks/CUSTOM_WIPE", "1.92", `[{"op":"replace","path":"/public","value":false},{"op":"add","path":"/owner","value":"x"},{"op":"replace","path":"/disable_ramdisk","value":true}]`)
	if code != http.StatusOK || got["public"] != false || got["owner"] != "x" || got["disable_ramdisk"] != true {
		t.Errorf("owned again: %d %v", code, got)
	}
	if code, _ := call(t, srv, "DELETE", "/v1/runbooks/"+id, "1.92", ""); code != http.StatusNoContent {
		t.Errorf("delete: %d", code)
	}
}

// TestProvisionWithRunbook: Ironic's rules for "runbook" in a provision
// request; a refused request leaves the node as it was.
func TestProvisionWithRunbook(t *testing.T) {
	srv, st := stepsServer(t)
	ctx := context.Background()
	if code, b := call(t, srv, "POST", "/v1/runbooks", "1.92", `{"name":"CUSTOM_WIPE","steps":[{"interface":"deploy","step":"erase_devices","order":1}]}`); code != 201 {
		t.Fatalf("runbook: %d %v", code, b)
	}
	code, n := call(t, srv, "POST", "/v1/nodes", "1.92", `{"driver":"fake-hardware","name":"n1"}`)
	if code != 201 {
		t.Fatalf("node: %d %v", code, n)
	}
	uuid := n["uuid"].(string)
	if _, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error {
		n.ProvisionState = proto.StateManageable
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	prov := "/v1/nodes/" + uuid + "/states/provision"
	for _, c := range []struct {
		name, version, body string
		code                int
		fault               string
	}{
		{"below 1.92", "1.91", `{"target":"clean","runbook":"CUSTOM_WIPE"}`, 406, "Request not acceptable."},
		{"unknown runbook", "1.92", `{"target":"clean","runbook":"CUSTOM_NONE"}`, 404, "Runbook CUSTOM_NONE could not be found."},
		{"node without the trait", "1.92", `{"target":"clean","runbook":"CUSTOM_WIPE"}`, 400, "This runbook has not been approved for use on this node " + uuid + ". Please ask an administrator to add it to your node traits."},
		{"steps and runbook", "1.92", `{"target":"clean","runbook":"CUSTOM_WIPE","clean_steps":[{"interface":"deploy","step":"x"}]}`, 400, `Please provide either "clean_steps" or a runbook, but not both.`},
		{"runbook for a deploy", "1.92", `{"target":"active","runbook":"CUSTOM_WIPE"}`, 400, `"runbooks" is only valid when setting target provision state to any of ['clean', 'service']`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, "PUT", prov, c.version, c.body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %v", code, c.code, body)
			}
			if f := ironicFault(t, body); !strings.Contains(f, c.fault) {
				t.Errorf("faultstring %q, want it to contain %q", f, c.fault)
			}
		})
	}
	if got, err := st.GetNode(ctx, uuid); err != nil || got.ProvisionState != proto.StateManageable {
		t.Fatalf("after the refusals: %v %v", got.ProvisionState, err)
	}
	if _, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.Traits = []string{"CUSTOM_WIPE"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, b := call(t, srv, "PUT", prov, "1.92", `{"target":"clean","runbook":"CUSTOM_WIPE"}`); code != http.StatusAccepted {
		t.Fatalf("clean with the runbook: %d %v", code, b)
	}
	if got, err := st.GetNode(ctx, uuid); err != nil || got.ProvisionState != proto.StateCleaning {
		t.Errorf("after the request: %v %v", got.ProvisionState, err)
	}
	// Service on an active node takes the runbook instead of service_steps.
	if _, err := st.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.ProvisionState = proto.StateActive; return nil }); err != nil {
		t.Fatal(err)
	}
	if code, b := call(t, srv, "PUT", prov, "1.92", `{"target":"service","runbook":"CUSTOM_WIPE","service_steps":[{"interface":"deploy","step":"x"}]}`); code != http.StatusBadRequest ||
		!strings.Contains(ironicFault(t, b), `Please provide either "service_steps" or a runbook, but not both.`) {
		t.Errorf("service with steps and a runbook: %d %v", code, b)
	}
	if code, b := call(t, srv, "PUT", prov, "1.92", `{"target":"service","runbook":"CUSTOM_WIPE"}`); code != http.StatusAccepted {
		t.Fatalf("service with the runbook: %d %v", code, b)
	}
	if got, err := st.GetNode(ctx, uuid); err != nil || got.ProvisionState != proto.StateServicing {
		t.Errorf("after the service request: %v %v", got.ProvisionState, err)
	}
}
