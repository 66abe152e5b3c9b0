package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
)

// chassisServer is the API on a fresh SQLite store.
func chassisServer(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1"}))
	t.Cleanup(srv.Close)
	return srv
}

// call sends one request at microversion version ("" for the default) and
// returns the status and the decoded body (nil when empty).
func call(t *testing.T, srv *httptest.Server, method, path, version, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if version != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		return resp.StatusCode, nil
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, path, err, raw)
	}
	return resp.StatusCode, out
}

// apiRefSample reads one of Ironic's API-reference samples.
func apiRefSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/ironic-apiref", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameShape checks that got has exactly want's keys with the same JSON
// kinds, recursing into link lists and the first element of lists; a null
// matches a value (updated_at before and after an update).
func sameShape(t *testing.T, where string, want, got any) {
	t.Helper()
	if want == nil || got == nil {
		return
	}
	if jsonType(want) != jsonType(got) {
		t.Errorf("%s: Ironic's sample has %s, Kiln has %s", where, jsonType(want), jsonType(got))
		return
	}
	switch w := want.(type) {
	case map[string]any:
		if strings.HasSuffix(where, ".extra") {
			return // free-form: keys are data
		}
		g := got.(map[string]any)
		wk, gk := slices.Sorted(mapKeys(w)), slices.Sorted(mapKeys(g))
		if !slices.Equal(wk, gk) {
			t.Errorf("%s: keys %v, Ironic's sample has %v", where, gk, wk)
		}
		for k, v := range w {
			sameShape(t, where+"."+k, v, g[k])
		}
	case []any:
		g := got.([]any)
		if len(w) > 0 && len(g) > 0 {
			sameShape(t, where+"[0]", w[0], g[0])
		}
		if len(w) > 0 && len(g) == 0 {
			t.Errorf("%s: empty, Ironic's sample has %d items", where, len(w))
		}
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestChassisMatchesAPIReference creates, lists, shows and updates a
// chassis with the API reference's requests and compares each answer's
// shape with the reference's response.
func TestChassisMatchesAPIReference(t *testing.T) {
	srv := chassisServer(t)
	code, created := call(t, srv, "POST", "/v1/chassis", "1.95", apiRefSample(t, "chassis-create-request.json"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, created)
	}
	if created["description"] != "Sample chassis" {
		t.Errorf("created description = %v", created["description"])
	}
	sameShape(t, "create", apiRefJSON(t, "chassis-show-response.json"), created)
	id := created["uuid"].(string)
	wantLinks := []any{
		map[string]any{"href": srv.URL + "/v1/chassis/" + id + "/nodes", "rel": "self"},
		map[string]any{"href": srv.URL + "/chassis/" + id + "/nodes", "rel": "bookmark"},
	}
	if fmt.Sprint(created["nodes"]) != fmt.Sprint(wantLinks) {
		t.Errorf("nodes links = %v, want %v", created["nodes"], wantLinks)
	}

	getShapes(t, srv, "1.95", []shapeCase{
		{"/v1/chassis/" + id, "chassis-show-response.json"},
		{"/v1/chassis", "chassis-list-response.json"},
		{"/v1/chassis/detail", "chassis-list-details-response.json"},
		{"/v1/chassis?detail=true", "chassis-list-details-response.json"},
	})
	code, patched := call(t, srv, "PATCH", "/v1/chassis/"+id, "1.95", apiRefSample(t, "chassis-update-request.json"))
	if code != http.StatusOK {
		t.Fatalf("patch: %d %v", code, patched)
	}
	sameShape(t, "patch", apiRefJSON(t, "chassis-update-response.json"), patched)
	if patched["description"] != "Updated Chassis" || patched["updated_at"] == nil || patched["created_at"] != created["created_at"] {
		t.Errorf("patched chassis = %v", patched)
	}
	code, got := call(t, srv, "GET", "/v1/chassis/"+id, "1.95", "")
	if code != http.StatusOK || got["description"] != "Updated Chassis" {
		t.Errorf("after patch, GET: %d %v", code, got)
	}
}

// ironicFault returns the faultstring of an Ironic error body.
func ironicFault(t *testing.T, body map[string]any) string {
	t.Helper()
	em, ok := body["error_message"].(string)
	if !ok {
		t.Fatalf("not an Ironic error body: %v", body)
	}
	var inner struct {
		FaultString string `json:"faultstring"`
		FaultCode   string `json:"faultcode"`
	}
	if err := json.Unmarshal([]byte(em), &inner); err != nil {
		t.Fatalf("error_message is not JSON: %q", em)
	}
	if inner.FaultCode != "Client" {
		t.Errorf("faultcode %q, want Client", inner.FaultCode)
	}
	return inner.FaultString
}

// TestChassisErrors: every refusal is Ironic's status and error body, and
// changes nothing.
func TestChassisErrors(t *testing.T) {
	srv := chassisServer(t)
	const id = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	if code, body := call(t, srv, "POST", "/v1/chassis", "", `{"uuid":"`+id+`","description":"r1","extra":{"k":"v"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	if code, body := call(t, srv, "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","name":"n1","chassis_uuid":"`+id+`"}`); code != http.StatusCreated || body["chassis_uuid"] != id {
		t.Fatalf("node create in the chassis: %d %v", code, body)
	}
	long := strings.Repeat("x", 256)
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string // a part of the message
	}{
		{"unknown chassis", "GET", "/v1/chassis/2be26c0b-03f2-4d2e-ae87-c02d7f33c123", "", "", 404, "Chassis 2be26c0b-03f2-4d2e-ae87-c02d7f33c123 could not be found."},
		{"not a UUID", "GET", "/v1/chassis/rack1", "", "", 400, "Expected a UUID but received rack1."},
		{"delete unknown", "DELETE", "/v1/chassis/2be26c0b-03f2-4d2e-ae87-c02d7f33c123", "", "", 404, "could not be found"},
		{"duplicate UUID", "POST", "/v1/chassis", "", `{"uuid":"` + id + `"}`, 409, "A chassis with UUID " + id + " already exists."},
		{"bad UUID", "POST", "/v1/chassis", "", `{"uuid":"nope"}`, 400, "Expected a UUID but received nope."},
		{"unknown field", "POST", "/v1/chassis", "", `{"name":"x"}`, 400, "'name' was unexpected"},
		{"description too long", "POST", "/v1/chassis", "", `{"description":"` + long + `"}`, 400, "'description' is too long"},
		{"extra not an object", "POST", "/v1/chassis", "", `{"extra":"x"}`, 400, "extra"},
		{"not JSON", "POST", "/v1/chassis", "", `{`, 400, "Invalid JSON"},
		{"patch uuid", "PATCH", "/v1/chassis/" + id, "", `[{"op":"replace","path":"/uuid","value":"2be26c0b-03f2-4d2e-ae87-c02d7f33c123"}]`, 400, "Cannot patch /uuid"},
		{"patch too long", "PATCH", "/v1/chassis/" + id, "", `[{"op":"replace","path":"/description","value":"` + long + `"}]`, 400, "too long"},
		{"patch bad op", "PATCH", "/v1/chassis/" + id, "", `[{"op":"frobnicate","path":"/description"}]`, 400, "Invalid patch"},
		{"delete with nodes", "DELETE", "/v1/chassis/" + id, "", "", 400, "Cannot complete the requested action because chassis " + id + " contains nodes."},
		{"bad sort key", "GET", "/v1/chassis?sort_key=extra", "", "", 400, "The sort_key value \"extra\" is an invalid field for sorting"},
		{"bad sort dir", "GET", "/v1/chassis?sort_dir=up", "", "", 400, "Invalid sort direction"},
		{"bad marker", "GET", "/v1/chassis?marker=2be26c0b-03f2-4d2e-ae87-c02d7f33c123", "", "", 400, "Marker 2be26c0b-03f2-4d2e-ae87-c02d7f33c123 could not be found."},
		{"unknown field in fields", "GET", "/v1/chassis?fields=uuid,name", "1.95", "", 400, "Field(s) \"name\" are not valid"},
		{"fields before 1.8", "GET", "/v1/chassis?fields=uuid", "1.7", "", 406, "Request not acceptable."},
		{"detail before 1.43", "GET", "/v1/chassis?detail=true", "1.42", "", 406, "Request not acceptable."},
		{"detail and fields", "GET", "/v1/chassis?detail=true&fields=uuid", "1.95", "", 400, "Can not specify ?detail=True and fields"},
		{"detail on detail", "GET", "/v1/chassis/detail?detail=true", "1.95", "", 400, "not allowed"},
		{"node in an unknown chassis", "POST", "/v1/nodes", "1.95", `{"driver":"fake-hardware","chassis_uuid":"2be26c0b-03f2-4d2e-ae87-c02d7f33c123"}`, 400, "Chassis 2be26c0b-03f2-4d2e-ae87-c02d7f33c123 could not be found."},
		{"node moved to an unknown chassis", "PATCH", "/v1/nodes/n1", "1.95", `[{"op":"replace","path":"/chassis_uuid","value":"2be26c0b-03f2-4d2e-ae87-c02d7f33c123"}]`, 400, "could not be found"},
		{"nodes of an unknown chassis", "GET", "/v1/chassis/2be26c0b-03f2-4d2e-ae87-c02d7f33c123/nodes", "", "", 404, "could not be found"},
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
	// Nothing changed: one chassis, as created, still holding its node.
	code, list := call(t, srv, "GET", "/v1/chassis/detail", "1.95", "")
	items, _ := list["chassis"].([]any)
	if code != http.StatusOK || len(items) != 1 {
		t.Fatalf("after the refusals: %d %v", code, list)
	}
	if ch := items[0].(map[string]any); ch["uuid"] != id || ch["description"] != "r1" || ch["updated_at"] != nil {
		t.Errorf("after the refusals the chassis is %v", ch)
	}
	if code, n := call(t, srv, "GET", "/v1/nodes/n1", "1.95", ""); code != http.StatusOK || n["chassis_uuid"] != id {
		t.Errorf("after the refusals the node is %d %v", code, n)
	}
}

// TestChassisNodesAndDelete: a chassis lists its nodes; it can be deleted
// once they have left it.
func TestChassisNodesAndDelete(t *testing.T) {
	srv := chassisServer(t)
	_, a := call(t, srv, "POST", "/v1/chassis", "", `{"description":"a"}`)
	_, b := call(t, srv, "POST", "/v1/chassis", "", `{"description":"b"}`)
	ida, idb := a["uuid"].(string), b["uuid"].(string)
	for i, ch := range []string{ida, ida, idb, ""} {
		body := fmt.Sprintf(`{"driver":"fake-hardware","name":"n%d"`, i)
		if ch != "" {
			body += `,"chassis_uuid":"` + ch + `"`
		}
		if code, n := call(t, srv, "POST", "/v1/nodes", "1.95", body+"}"); code != http.StatusCreated {
			t.Fatalf("node %d: %d %v", i, code, n)
		}
	}
	names := func(path string) []string {
		t.Helper()
		code, body := call(t, srv, "GET", path, "1.95", "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, code, body)
		}
		var out []string
		for _, n := range body["nodes"].([]any) {
			out = append(out, n.(map[string]any)["name"].(string))
		}
		return out
	}
	for path, want := range map[string][]string{
		"/v1/chassis/" + ida + "/nodes":        {"n0", "n1"},
		"/v1/chassis/" + ida + "/nodes/detail": {"n0", "n1"},
		"/v1/chassis/" + idb + "/nodes":        {"n2"},
		"/v1/nodes?chassis_uuid=" + idb:        {"n2"},
		"/v1/nodes?sort_key=name":              {"n0", "n1", "n2", "n3"},
	} {
		if got := names(path); !slices.Equal(got, want) {
			t.Errorf("GET %s: %v, want %v", path, got, want)
		}
	}
	// A node leaves its chassis by removing chassis_uuid, or moves.
	if code, n := call(t, srv, "PATCH", "/v1/nodes/n2", "1.95", `[{"op":"remove","path":"/chassis_uuid"}]`); code != http.StatusOK || n["chassis_uuid"] != nil {
		t.Fatalf("remove chassis_uuid: %d %v", code, n)
	}
	if code, _ := call(t, srv, "DELETE", "/v1/chassis/"+idb, "", ""); code != http.StatusNoContent {
		t.Fatalf("delete of the emptied chassis: %d", code)
	}
	if code, _ := call(t, srv, "GET", "/v1/chassis/"+idb, "", ""); code != http.StatusNotFound {
		t.Errorf("deleted chassis still answers %d", code)
	}
	if code, n := call(t, srv, "PATCH", "/v1/nodes/n0", "1.95", `[{"op":"replace","path":"/chassis_uuid","value":""}]`); code != http.StatusOK || n["chassis_uuid"] != nil {
		t.Fatalf("empty chassis_uuid: %d %v", code, n)
	}
	if got := names("/v1/chassis/" + ida + "/nodes"); !slices.Equal(got, []string{"n1"}) {
		t.Errorf("after n0 left: %v", got)
	}
}

// TestChassisPaging pages to the end through next links in every sort
// order and finds each chassis once, in order.
func TestChassisPaging(t *testing.T) {
	srv := chassisServer(t)
	var ids []string
	for i := range 7 {
		code, ch := call(t, srv, "POST", "/v1/chassis", "", fmt.Sprintf(`{"description":"d%d"}`, (i*3)%7))
		if code != http.StatusCreated {
			t.Fatal(code, ch)
		}
		ids = append(ids, ch["uuid"].(string))
	}
	descOrder := make([]string, 7) // description d0..d6 -> id
	for i, id := range ids {
		descOrder[(i*3)%7] = id
	}
	sortedIDs := slices.Sorted(slices.Values(ids))
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"limit=3", ids},
		{"limit=2&sort_key=description", descOrder},
		{"limit=3&sort_key=description&sort_dir=desc", reversed(descOrder)},
		{"limit=4&sort_key=uuid", sortedIDs},
		{"limit=1&sort_key=created_at&sort_dir=asc", ids},
	} {
		var got []string
		next := srv.URL + "/v1/chassis?" + c.query
		for pages := 0; next != ""; pages++ {
			if pages > 10 {
				t.Fatalf("%s: no end to the pages", c.query)
			}
			code, body := call(t, srv, "GET", strings.TrimPrefix(next, srv.URL), "1.95", "")
			if code != http.StatusOK {
				t.Fatalf("%s: %d %v", next, code, body)
			}
			for _, ch := range body["chassis"].([]any) {
				got = append(got, ch.(map[string]any)["uuid"].(string))
			}
			next, _ = body["next"].(string)
		}
		if c.query == "limit=1&sort_key=created_at&sort_dir=asc" {
			// Creation times can tie within a microsecond; ties go by id.
			slices.Sort(got)
			c.want = sortedIDs
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.query, got, c.want)
		}
	}
	// fields picks what is shown; links always come along.
	code, body := call(t, srv, "GET", "/v1/chassis?fields=description&limit=1", "1.95", "")
	first := body["chassis"].([]any)[0].(map[string]any)
	if code != http.StatusOK || len(first) != 2 || first["description"] == nil || first["links"] == nil {
		t.Errorf("fields=description: %d %v", code, first)
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
