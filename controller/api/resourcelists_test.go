package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestDescribedResourceLists walks the lists of every resource on the
// generic descriptions (chassis, port groups, allocations, deploy
// templates, runbooks, volume connectors and targets) the same way: pages
// of one by their next links, both sort directions, ?fields=uuid, the
// 400s of a bad limit and sort key and the 404 of an unknown UUID in
// Ironic's format, and a delete that leaves the others listed.
func TestDescribedResourceLists(t *testing.T) {
	srv, st := stepsServer(t)
	const version = "1.115"
	do := func(method, path, body string) (int, map[string]any) {
		return call(t, srv, method, path, version, body)
	}
	const node = "6d85703a-565d-469a-96ce-30b6de53079d"
	volumeNode(t, srv, st, do, node, "rl-node", proto.PowerOff)
	steps := `[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"LogicalProc","value":"Enabled"}]},"%s":1}]`
	for _, r := range []struct {
		name, path, key string
		body            func(i int) string
	}{
		{"chassis", "/v1/chassis", "chassis", func(i int) string { return fmt.Sprintf(`{"description":"rack %d"}`, i) }},
		{"port groups", "/v1/portgroups", "portgroups", func(i int) string {
			return fmt.Sprintf(`{"node_uuid":%q,"address":"52:54:00:00:10:0%d","name":"pg%d"}`, node, i, i)
		}},
		{"allocations", "/v1/allocations", "allocations", func(i int) string { return fmt.Sprintf(`{"resource_class":"gold","name":"alloc%d"}`, i) }},
		{"deploy templates", "/v1/deploy_templates", "deploy_templates", func(i int) string {
			return fmt.Sprintf(`{"name":"CUSTOM_LIST_%d","steps":`+steps+`}`, i, "priority")
		}},
		{"runbooks", "/v1/runbooks", "runbooks", func(i int) string {
			return fmt.Sprintf(`{"name":"CUSTOM_RUN_%d","steps":`+steps+`}`, i, "order")
		}},
		{"volume connectors", "/v1/volume/connectors", "connectors", func(i int) string {
			return fmt.Sprintf(`{"node_uuid":%q,"type":"iqn","connector_id":"iqn.2017-07.org.openstack:0%d"}`, node, i)
		}},
		{"volume targets", "/v1/volume/targets", "targets", func(i int) string {
			return fmt.Sprintf(`{"node_uuid":%q,"volume_type":"iscsi","boot_index":%d,"volume_id":"vol-%d"}`, node, i, i)
		}},
	} {
		t.Run(r.name, func(t *testing.T) {
			var made []string
			for i := range 3 {
				code, b := do("POST", r.path, r.body(i))
				if code != http.StatusCreated {
					t.Fatalf("create %d: %d %v", i, code, b)
				}
				made = append(made, b["uuid"].(string))
			}
			uuids := func(b map[string]any) []string {
				var out []string
				for _, it := range b[r.key].([]any) {
					out = append(out, it.(map[string]any)["uuid"].(string))
				}
				return out
			}
			// Pages of one, by next links.
			var walked []string
			for path := r.path + "?limit=1"; path != ""; {
				code, b := do("GET", path, "")
				if code != http.StatusOK {
					t.Fatalf("GET %s: %d %v", path, code, b)
				}
				page := uuids(b)
				walked = append(walked, page...)
				next, _ := b["next"].(string)
				if len(page) == 0 || len(walked) > 10 {
					break
				}
				if next == "" {
					t.Fatalf("page %s of %d items has no next link", path, len(page))
				}
				path = strings.TrimPrefix(next, srv.URL)
			}
			if !slices.Equal(walked, made) {
				t.Errorf("pages of one: %v, want %v", walked, made)
			}
			_, b := do("GET", r.path+"?sort_dir=desc", "")
			reversed := slices.Clone(made)
			slices.Reverse(reversed)
			if got := uuids(b); !slices.Equal(got, reversed) {
				t.Errorf("sort_dir=desc: %v, want %v", got, reversed)
			}
			_, b = do("GET", r.path+"?fields=uuid", "")
			for _, it := range b[r.key].([]any) {
				for k := range it.(map[string]any) {
					if k != "uuid" && k != "links" {
						t.Errorf("?fields=uuid shows %s: %v", k, it)
					}
				}
			}
			for _, c := range []struct {
				method, path string
				code         int
				fault        string
			}{
				{"GET", r.path + "?limit=-1", http.StatusBadRequest, "Limit must be positive"},
				{"GET", r.path + "?sort_key=colour", http.StatusBadRequest, "colour"},
				{"GET", r.path + "?fields=colour", http.StatusBadRequest, "colour"},
				{"GET", r.path + "/0b9c2b7e-8d3a-4c1f-9a55-5d2c7c1e0f99", http.StatusNotFound, "0b9c2b7e-8d3a-4c1f-9a55-5d2c7c1e0f99"},
				{"DELETE", r.path + "/0b9c2b7e-8d3a-4c1f-9a55-5d2c7c1e0f99", http.StatusNotFound, "0b9c2b7e-8d3a-4c1f-9a55-5d2c7c1e0f99"},
			} {
				code, b := do(c.method, c.path, "")
				if code != c.code {
					t.Errorf("%s %s: %d %v, want %d", c.method, c.path, code, b, c.code)
					continue
				}
				if f := ironicFault(t, b); !strings.Contains(f, c.fault) {
					t.Errorf("%s %s: faultstring %q, want it to name %q", c.method, c.path, f, c.fault)
				}
			}
			if code, b := do("DELETE", r.path+"/"+made[1], ""); code != http.StatusNoContent {
				t.Fatalf("delete: %d %v", code, b)
			}
			_, b = do("GET", r.path, "")
			if got := uuids(b); !slices.Equal(got, []string{made[0], made[2]}) {
				t.Errorf("after deleting the second: %v, want %v", got, []string{made[0], made[2]})
			}
		})
	}
}
