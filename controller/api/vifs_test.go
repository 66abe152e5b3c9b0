package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
)

// vifServer is the API on a fresh SQLite store whose conductor, c1, is
// registered and alive, so that the node reservations the API takes
// exclude each other as a running kiln serve's do.
func vifServer(t *testing.T, lockWait time.Duration) (*httptest.Server, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{DeadAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, c := range []string{"c1", "c2"} {
		if err := st.RegisterConductor(ctx, store.Conductor{Hostname: c, Drivers: []string{"fake-hardware"}}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", LockWait: lockWait}))
	t.Cleanup(srv.Close)
	return srv, st
}

func vifIDs(t *testing.T, srv *httptest.Server, node string) []string {
	t.Helper()
	var out []string
	for _, v := range mustCall(t, srv, 200, "GET", "/v1/nodes/"+node+"/vifs", "1.95", "")["vifs"].([]any) {
		out = append(out, v.(map[string]any)["id"].(string))
	}
	return out
}

// TestVIFs attaches, lists and detaches VIFs as Ironic's network interfaces
// record them, with Ironic's refusals.
func TestVIFs(t *testing.T) {
	srv, st := vifServer(t, -1)
	n := pgNode(t, srv, "n1")
	pg := mustCall(t, srv, 201, "POST", "/v1/portgroups", "1.95", `{"node_uuid":"`+n+`","name":"bond0"}`)["uuid"].(string)
	mustCall(t, srv, 201, "POST", "/v1/ports", "1.95", `{"node_uuid":"`+n+`","address":"52:54:00:00:00:01","pxe_enabled":false}`)
	pxe := mustCall(t, srv, 201, "POST", "/v1/ports", "1.95", `{"node_uuid":"`+n+`","address":"52:54:00:00:00:02"}`)["uuid"].(string)
	mustCall(t, srv, 201, "POST", "/v1/ports", "1.95", `{"node_uuid":"`+n+`","address":"52:54:00:00:00:03","portgroup_uuid":"`+pg+`","pxe_enabled":false}`)
	if got := vifIDs(t, srv, "n1"); len(got) != 0 {
		t.Fatalf("VIFs of a new node: %v", got)
	}
	const v1, v2, v3 = "1974dcfa-836f-41b2-b541-686c100900e5", "vif-two", "2974dcfa-836f-41b2-b541-686c100900e5"
	// The group first, then the PXE port, then the other.
	mustCall(t, srv, 204, "POST", "/v1/nodes/n1/vifs", "1.28", apiRefSample(t, "node-vif-attach-request.json"))
	if g := mustCall(t, srv, 200, "GET", "/v1/portgroups/bond0", "1.95", ""); fmt.Sprint(g["internal_info"]) != "map[tenant_vif_port_id:"+v1+"]" {
		t.Errorf("group after the first attach: %v", g["internal_info"])
	}
	mustCall(t, srv, 204, "POST", "/v1/nodes/"+n+"/vifs", "1.95", `{"id":"`+v2+`"}`)
	if p := mustCall(t, srv, 200, "GET", "/v1/ports/"+pxe, "1.95", ""); fmt.Sprint(p["internal_info"]) != "map[tenant_vif_port_id:"+v2+"]" {
		t.Errorf("PXE port after the second attach: %v", p["internal_info"])
	}
	mustCall(t, srv, 204, "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":"`+v3+`"}`)
	got := vifIDs(t, srv, "n1")
	if want := []string{v3, v2, v1}; !slices.Equal(got, want) { // ports, then groups
		t.Errorf("VIFs: %v, want %v", got, want)
	}
	sameShape(t, "vifs", decodeSample(t, "node-vif-list-response.json"), mustCall(t, srv, 200, "GET", "/v1/nodes/n1/vifs", "1.95", ""))
	for _, c := range []struct {
		name, method, path, version, body string
		code                              int
		fault                             string
	}{
		{"before 1.28", "GET", "/v1/nodes/n1/vifs", "1.27", "", 404, "could not be found"},
		{"attach before 1.28", "POST", "/v1/nodes/n1/vifs", "1.27", `{"id":"x"}`, 404, "could not be found"},
		{"unknown node", "GET", "/v1/nodes/n9/vifs", "1.95", "", 404, "Node n9 could not be found."},
		{"attached again", "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":"` + v2 + `"}`, 409, "Unable to attach VIF because VIF " + v2 + " is already attached to Ironic Port " + pxe},
		{"no free port", "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":"vif-four"}`, 400, "Unable to attach VIF vif-four, not enough free physical ports."},
		{"no id", "POST", "/v1/nodes/n1/vifs", "1.95", `{"port_uuid":"` + pxe + `"}`, 400, "'id' is a required property"},
		{"id not a string", "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":5}`, 400, "is not of type 'string'"},
		{"bad id", "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":"a b"}`, 400, "Expected UUID or name for id: a b"},
		{"port and group", "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":"x","port_uuid":"` + pxe + `","portgroup_uuid":"` + pg + `"}`, 400, "Cannot specify both port_uuid and portgroup_uuid"},
		{"detach unknown", "DELETE", "/v1/nodes/n1/vifs/vif-nine", "1.95", "", 400, "Unable to detach VIF vif-nine from node " + n + " because it is not attached to it."},
		{"detach bad id", "DELETE", "/v1/nodes/n1/vifs/a%20b", "1.95", "", 400, "Expected UUID or name for vif_id: a b"},
		{"detach on unknown node", "DELETE", "/v1/nodes/n9/vifs/" + v1, "1.95", "", 404, "Node n9 could not be found."},
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
	if got := vifIDs(t, srv, "n1"); len(got) != 3 {
		t.Errorf("after the refusals: %v", got)
	}
	// A node another conductor holds: 409 NodeLocked, nothing recorded.
	if _, err := st.Reserve(context.Background(), n, "c2"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, body string }{{"DELETE", "/v1/nodes/n1/vifs/" + v2, ""}, {"POST", "/v1/nodes/n1/vifs", `{"id":"vif-five"}`}} {
		code, body := call(t, srv, r.method, r.path, "1.95", r.body)
		if code != 409 || !strings.Contains(ironicFault(t, body), "is locked by host c2") {
			t.Errorf("%s while c2 holds the node: %d %v", r.method, code, body)
		}
	}
	if err := st.Release(context.Background(), n, "c2"); err != nil {
		t.Fatal(err)
	}
	// Detach clears the record (and extra's vif_port_id); the port is free again.
	mustCall(t, srv, 200, "PATCH", "/v1/ports/"+pxe, "1.95", `[{"op":"add","path":"/extra/vif_port_id","value":"`+v2+`"}]`)
	mustCall(t, srv, 204, "DELETE", "/v1/nodes/n1/vifs/"+v2, "1.95", "")
	if p := mustCall(t, srv, 200, "GET", "/v1/ports/"+pxe, "1.95", ""); fmt.Sprint(p["internal_info"]) != "map[]" || fmt.Sprint(p["extra"]) != "map[]" {
		t.Errorf("port after detach: %v %v", p["internal_info"], p["extra"])
	}
	mustCall(t, srv, 204, "POST", "/v1/nodes/n1/vifs", "1.95", `{"id":"vif-six","port_uuid":"`+pxe+`"}`)
	// A port bound to a VIF is deleted only in maintenance.
	if code, body := call(t, srv, "DELETE", "/v1/ports/"+pxe, "1.95", ""); code != 409 ||
		ironicFault(t, body) != "Cannot delete the port "+pxe+" as it is bound to VIF vif-six for use." {
		t.Errorf("delete of a port bound to a VIF: %d %v", code, body)
	}
	mustCall(t, srv, 204, "DELETE", "/v1/nodes/n1/vifs/"+v1, "1.95", "")
	if got := vifIDs(t, srv, "n1"); !slices.Equal(got, []string{v3, "vif-six"}) {
		t.Errorf("after detaching from the group: %v", got)
	}
	mustCall(t, srv, 202, "PUT", "/v1/nodes/n1/maintenance", "1.95", `{"reason":"rewiring"}`)
	mustCall(t, srv, 204, "DELETE", "/v1/ports/"+pxe, "1.95", "")
	if got := vifIDs(t, srv, "n1"); !slices.Equal(got, []string{v3}) {
		t.Errorf("after deleting the bound port in maintenance: %v", got)
	}
	if n, err := st.GetNode(context.Background(), n); err != nil || n.Reservation != nil {
		t.Errorf("node after the VIF requests: reservation %v, %v", n.Reservation, err)
	}
}

// TestVIFsConcurrentAttach: VIFs attached at once to one node each land on
// a port of their own, under the node's lock.
func TestVIFsConcurrentAttach(t *testing.T) {
	srv, _ := vifServer(t, time.Minute)
	n := pgNode(t, srv, "n1")
	const k = 6
	for i := range k {
		mustCall(t, srv, 201, "POST", "/v1/ports", "1.95", fmt.Sprintf(`{"node_uuid":"%s","address":"52:54:00:00:00:%02x"}`, n, i+1))
	}
	var wg sync.WaitGroup
	codes := make([]int, k+1)
	for i := range k + 1 {
		wg.Go(func() {
			codes[i], _ = call(t, srv, "POST", "/v1/nodes/n1/vifs", "1.95", fmt.Sprintf(`{"id":"vif-%d"}`, i))
		})
	}
	wg.Wait()
	slices.Sort(codes)
	if want := append(slices.Repeat([]int{204}, k), 400); !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v (one port each, one VIF without)", codes, want)
	}
	seen := map[string]bool{}
	for _, p := range mustCall(t, srv, 200, "GET", "/v1/ports/detail", "1.95", "")["ports"].([]any) {
		vif := fmt.Sprint(p.(map[string]any)["internal_info"].(map[string]any)["tenant_vif_port_id"])
		if vif == "<nil>" || seen[vif] {
			t.Errorf("port %v: VIF %s (seen before: %v)", p.(map[string]any)["address"], vif, seen[vif])
		}
		seen[vif] = true
	}
	if got := vifIDs(t, srv, "n1"); len(got) != k {
		t.Errorf("VIFs: %v", got)
	}
}

// decodeSample reads one of the API reference's JSON samples.
func decodeSample(t *testing.T, name string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(apiRefSample(t, name)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
