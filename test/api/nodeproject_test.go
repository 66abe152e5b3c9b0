package api_test

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNodeProjectFilterOverHTTP lists the nodes of a real kiln serve by
// ?project=: those the project owns or leases, each once, on /v1/nodes and
// /v1/nodes/detail, by pages, combined with other filters, at every
// microversion (Ironic gates it at none), and following owner and lessee
// changes.
func TestNodeProjectFilterOverHTTP(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	latest := []string{"X-OpenStack-Ironic-API-Version", "latest"}
	for _, n := range []string{
		`{"driver":"fake-hardware","name":"p0","owner":"proj-a"}`,
		`{"driver":"fake-hardware","name":"p1","owner":"proj-b","lessee":"proj-a"}`,
		`{"driver":"fake-hardware","name":"p2","owner":"proj-a","lessee":"proj-a","resource_class":"gpu"}`,
		`{"driver":"fake-hardware","name":"p3"}`,
		`{"driver":"fake-hardware","name":"p4","lessee":"proj-b"}`,
	} {
		if code, _, b := k.call("POST", "/v1/nodes", n, latest...); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", n, code, b)
		}
	}
	names := func(path string, headers ...string) []string {
		t.Helper()
		code, _, b := k.call("GET", path, "", headers...)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		var out []string
		for _, n := range mustJSON(t, b)["nodes"].([]any) {
			out = append(out, n.(map[string]any)["name"].(string))
		}
		return out
	}
	for _, c := range []struct {
		path    string
		version string
		want    []string
	}{
		{"/v1/nodes?project=proj-a", "latest", []string{"p0", "p1", "p2"}},
		{"/v1/nodes?project=proj-b", "latest", []string{"p1", "p4"}},
		{"/v1/nodes/detail?project=proj-a", "latest", []string{"p0", "p1", "p2"}},
		{"/v1/nodes?project=proj-a&resource_class=gpu", "latest", []string{"p2"}},
		{"/v1/nodes?project=proj-a&owner=proj-b", "latest", []string{"p1"}},
		{"/v1/nodes?project=proj-a&sort_dir=desc", "latest", []string{"p2", "p1", "p0"}},
		{"/v1/nodes?project=nobody", "latest", nil},
		{"/v1/nodes?project=proj-b", "1.5", []string{"p1", "p4"}},
	} {
		if got := names(c.path, "X-OpenStack-Ironic-API-Version", c.version); !slices.Equal(got, c.want) {
			t.Errorf("%s at %s: %v, want %v", c.path, c.version, got, c.want)
		}
	}

	// Paging keeps the filter.
	code, _, b := k.call("GET", "/v1/nodes?project=proj-a&limit=2", "", latest...)
	body := mustJSON(t, b)
	next, _ := body["next"].(string)
	if code != http.StatusOK || len(body["nodes"].([]any)) != 2 || !strings.Contains(next, "project=proj-a") {
		t.Fatalf("first page: %d %s", code, b)
	}
	if got := names(strings.TrimPrefix(next, k.URL), latest...); !slices.Equal(got, []string{"p2"}) {
		t.Errorf("second page: %v, want [p2]", got)
	}

	// The filter follows owner and lessee changes.
	for node, patch := range map[string]string{
		"p0": `[{"op":"replace","path":"/owner","value":"proj-c"}]`,
		"p1": `[{"op":"remove","path":"/lessee"}]`,
		"p3": `[{"op":"add","path":"/lessee","value":"proj-a"}]`,
	} {
		if code, _, b := k.call("PATCH", "/v1/nodes/"+node, patch, latest...); code != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", node, code, b)
		}
	}
	if got := names("/v1/nodes?project=proj-a", latest...); !slices.Equal(got, []string{"p2", "p3"}) {
		t.Errorf("proj-a after the changes: %v, want [p2 p3]", got)
	}
	if got := names("/v1/nodes?project=proj-c", latest...); !slices.Equal(got, []string{"p0"}) {
		t.Errorf("proj-c after the changes: %v, want [p0]", got)
	}
	if code, _, _ := k.call("GET", "/v1/nodes?project="+strings.Repeat("x", 4097), "", latest...); code != http.StatusBadRequest {
		t.Errorf("a 4097-character project: %d, want 400", code)
	}
}
