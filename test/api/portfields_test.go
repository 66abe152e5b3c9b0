package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/kilnhq/kiln/test/osctool"
)

// TestPortFieldsOverHTTP drives the port fields of 1.94–1.111 and the port
// and port group filters of 1.99/1.106 on a real kiln serve: created with
// node_ident, hidden and refused below their microversions, filtered by
// the node's conductor group and shard, and kept across a restart on the
// same database. gophercloud (which has none of these fields) still reads
// the ports; the OpenStack client, which knows microversions up to 1.78
// only, lists them without the newer fields.
func TestPortFieldsOverHTTP(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "kiln.db")
	k := startKiln(t, db)
	ctx := context.Background()
	c := newClient(t, k, "1.95")
	var nodeIDs []string
	for i, cg := range []string{"rack-a", "rack-b"} {
		n, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: fmt.Sprintf("pf%d", i), ConductorGroup: cg}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		nodeIDs = append(nodeIDs, n.UUID)
	}
	latest := []string{"X-OpenStack-Ironic-API-Version", "latest"}
	body := `{"node_ident":"pf0","address":"52:54:00:00:60:01","description":"to tor-1","vendor":"acme","category":"uplink","available_for_dynamic_portgroup":false}`
	if code, _, b := k.call("POST", "/v1/ports", body, "X-OpenStack-Ironic-API-Version", "1.96"); code != http.StatusNotAcceptable {
		t.Errorf("create with 1.97+ fields at 1.96: %d %s, want 406", code, b)
	}
	code, _, b := k.call("POST", "/v1/ports", body, latest...)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	p := mustJSON(t, b)
	id := p["uuid"].(string)
	want := map[string]any{"node_uuid": nodeIDs[0], "description": "to tor-1", "vendor": "acme", "category": "uplink", "available_for_dynamic_portgroup": false}
	for f, v := range want {
		if p[f] != v {
			t.Errorf("created %s = %v, want %v", f, p[f], v)
		}
	}
	code, _, b = k.call("POST", "/v1/ports", `{"node_uuid":"`+nodeIDs[1]+`","address":"52:54:00:00:60:02"}`, latest...)
	if code != http.StatusCreated || mustJSON(t, b)["available_for_dynamic_portgroup"] != true {
		t.Fatalf("create on pf1: %d %s", code, b)
	}
	// Below 1.97 the fields are not shown.
	_, _, b = k.call("GET", "/v1/ports/"+id, "", "X-OpenStack-Ironic-API-Version", "1.96")
	for f := range want {
		if _, shown := mustJSON(t, b)[f]; shown && f != "node_uuid" {
			t.Errorf("GET at 1.96 shows %s: %s", f, b)
		}
	}
	// gophercloud reads the port as before.
	gp, err := ports.Get(ctx, c, id).Extract()
	if err != nil || gp.Address != "52:54:00:00:60:01" || gp.NodeUUID != nodeIDs[0] {
		t.Errorf("gophercloud get: %+v %v", gp, err)
	}

	addresses := func(path string) []string {
		t.Helper()
		code, _, b := k.call("GET", path, "", latest...)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		var got []string
		for _, o := range mustJSON(t, b)["ports"].([]any) {
			got = append(got, o.(map[string]any)["address"].(string))
		}
		return got
	}
	if got := addresses("/v1/ports?conductor_groups=rack-b"); !slices.Equal(got, []string{"52:54:00:00:60:02"}) {
		t.Errorf("?conductor_groups=rack-b: %v", got)
	}
	if code, _, _ := k.call("GET", "/v1/ports?conductor_groups=rack-b", "", "X-OpenStack-Ironic-API-Version", "1.98"); code != http.StatusNotAcceptable {
		t.Errorf("?conductor_groups= at 1.98: %d, want 406", code)
	}
	// The node moves to another group and shard: its ports follow.
	code, _, b = k.call("PATCH", "/v1/nodes/pf0", `[{"op":"replace","path":"/conductor_group","value":"rack-b"},{"op":"add","path":"/shard","value":"east"}]`, latest...)
	if code != http.StatusOK {
		t.Fatalf("patch node: %d %s", code, b)
	}
	if got := addresses("/v1/ports?conductor_groups=rack-b"); !slices.Equal(got, []string{"52:54:00:00:60:01", "52:54:00:00:60:02"}) {
		t.Errorf("after the move, ?conductor_groups=rack-b: %v", got)
	}
	if got := addresses("/v1/ports?shard=east"); !slices.Equal(got, []string{"52:54:00:00:60:01"}) {
		t.Errorf("?shard=east: %v", got)
	}
	code, _, b = k.call("POST", "/v1/portgroups", `{"node_uuid":"`+nodeIDs[0]+`","name":"bond-east"}`, latest...)
	if code != http.StatusCreated || mustJSON(t, b)["dynamic_portgroup"] != false {
		t.Fatalf("port group: %d %s", code, b)
	}
	_, _, b = k.call("GET", "/v1/portgroups?shard=east", "", latest...)
	if pgs := mustJSON(t, b)["portgroups"].([]any); len(pgs) != 1 || pgs[0].(map[string]any)["name"] != "bond-east" {
		t.Errorf("port groups ?shard=east: %s", b)
	}
	code, _, b = k.call("PATCH", "/v1/ports/"+id, `[{"op":"replace","path":"/vendor","value":"initech"},{"op":"remove","path":"/description"}]`, latest...)
	if p := mustJSON(t, b); code != http.StatusOK || p["vendor"] != "initech" || p["description"] != nil {
		t.Errorf("patch: %d %s", code, b)
	}

	// Stored, not only answered: the same after a restart.
	k.stop()
	k = startKiln(t, db)
	_, _, b = k.call("GET", "/v1/ports/"+id, "", latest...)
	p = mustJSON(t, b)
	if p["vendor"] != "initech" || p["category"] != "uplink" || p["available_for_dynamic_portgroup"] != false || p["description"] != nil {
		t.Errorf("after a restart: %s", b)
	}
	if got := addresses("/v1/ports?conductor_groups=rack-b&sort_key=address&sort_dir=desc"); !slices.Equal(got, []string{"52:54:00:00:60:02", "52:54:00:00:60:01"}) {
		t.Errorf("after a restart, ?conductor_groups=rack-b: %v", got)
	}

	if why := osctool.Missing(); why != "" {
		t.Log(why + ": the client half is skipped")
		return
	}
	out, code, err := osctool.Start(t, k.URL).Run("baremetal", "port", "list", "--long", "-f", "json")
	if err != nil || code != 0 {
		t.Fatalf("openstack baremetal port list: exit %d %v\n%s", code, err, out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 {
		t.Fatalf("port list --long: %v %s", err, out)
	}
	for _, row := range list {
		if row["UUID"] == id && (row["Address"] != "52:54:00:00:60:01" || row["Node UUID"] != nodeIDs[0]) {
			t.Errorf("port list row %v", row)
		}
		for _, newer := range []string{"Description", "Vendor", "Category"} {
			if _, ok := row[newer]; ok {
				t.Errorf("the client at its 1.78 shows %s: %v", newer, row)
			}
		}
	}
}
