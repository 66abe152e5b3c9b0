package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// TestChassisOverHTTP drives /v1/chassis on a real kiln serve: raw HTTP
// for the chassis (gophercloud has no chassis client), gophercloud for
// the nodes in them, paging to the end through next, and a restart on
// the same database.
func TestChassisOverHTTP(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "kiln.db")
	k := startKiln(t, db)
	ctx := context.Background()

	// GET /v1/ links the collection.
	code, _, b := k.call("GET", "/v1/", "")
	if code != http.StatusOK || !strings.Contains(string(b), k.URL+"/v1/chassis/") {
		t.Fatalf("GET /v1/: %d %s", code, b)
	}
	var ids []string
	for i := range 5 {
		code, hdr, b := k.call("POST", "/v1/chassis", fmt.Sprintf(`{"description":"rack%d","extra":{"row":%d}}`, 4-i, i))
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
		ch := mustJSON(t, b)
		id := ch["uuid"].(string)
		if hdr.Get("Location") != k.URL+"/v1/chassis/"+id {
			t.Errorf("Location %q", hdr.Get("Location"))
		}
		ids = append(ids, id)
	}
	// Paging to the end through next, by description: rack0 … rack4 is
	// the reverse of creation.
	var got []string
	next := "/v1/chassis?limit=2&sort_key=description"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("no end to the pages")
		}
		code, _, b := k.call("GET", strings.TrimPrefix(next, k.URL), "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", next, code, b)
		}
		page := mustJSON(t, b)
		for _, c := range page["chassis"].([]any) {
			got = append(got, c.(map[string]any)["uuid"].(string))
		}
		next, _ = page["next"].(string)
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Errorf("paged by description: %v, want %v", got, want)
	}

	// Nodes join a chassis at creation (gophercloud's CreateOpts has no
	// chassis_uuid, so raw) and are found by it through gophercloud.
	for i, ch := range []string{ids[0], ids[0], ids[1]} {
		code, _, b := k.call("POST", "/v1/nodes", fmt.Sprintf(`{"driver":"fake-hardware","name":"n%d","chassis_uuid":"%s"}`, i, ch))
		if code != http.StatusCreated {
			t.Fatalf("node: %d %s", code, b)
		}
	}
	c := newClient(t, k, "1.95")
	var names []string
	err := nodes.List(c, nodes.ListOpts{ChassisUUID: ids[0], Fields: []string{"name", "chassis_uuid"}}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		ns, err := nodes.ExtractNodes(p)
		for _, n := range ns {
			if n.ChassisUUID != ids[0] {
				t.Errorf("node %s listed under chassis %s has chassis_uuid %q", n.Name, ids[0], n.ChassisUUID)
			}
			names = append(names, n.Name)
		}
		return true, err
	})
	if err != nil || !slices.Equal(names, []string{"n0", "n1"}) {
		t.Errorf("gophercloud nodes of chassis 0: %v, %v", names, err)
	}
	code, _, b = k.call("GET", "/v1/chassis/"+ids[1]+"/nodes", "")
	if list := mustJSON(t, b)["nodes"].([]any); code != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["name"] != "n2" {
		t.Errorf("GET /v1/chassis/{1}/nodes: %d %s", code, b)
	}

	// Delete is refused while nodes belong to the chassis, as Ironic does.
	code, _, b = k.call("DELETE", "/v1/chassis/"+ids[1], "")
	if code != http.StatusBadRequest || faultstring(t, b) != "Cannot complete the requested action because chassis "+ids[1]+" contains nodes." {
		t.Errorf("delete of a chassis with a node: %d %s", code, b)
	}
	// A gophercloud patch moves n2 to chassis 2, then the delete goes through.
	n, err := nodes.Update(ctx, c, "n2", nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/chassis_uuid", Value: ids[2]}}).Extract()
	if err != nil || n.ChassisUUID != ids[2] {
		t.Fatalf("move n2: %+v, %v", n, err)
	}
	_, err = nodes.Update(ctx, c, "n2", nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/chassis_uuid", Value: "2be26c0b-03f2-4d2e-ae87-c02d7f33c123"}}).Extract()
	wantStatus(t, err, http.StatusBadRequest)
	if code, _, b := k.call("DELETE", "/v1/chassis/"+ids[1], ""); code != http.StatusNoContent {
		t.Fatalf("delete of the emptied chassis: %d %s", code, b)
	}
	if code, _, b := k.call("GET", "/v1/chassis/"+ids[1], ""); code != http.StatusNotFound ||
		faultstring(t, b) != "Chassis "+ids[1]+" could not be found." {
		t.Errorf("deleted chassis: %d %s", code, b)
	}
	if code, _, b := k.call("PATCH", "/v1/chassis/"+ids[0], `[{"op":"add","path":"/extra/site","value":"lab"},{"op":"remove","path":"/description"}]`); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, b)
	}

	// Everything survives a restart on the same database.
	k.stop()
	k = startKiln(t, db)
	code, _, b = k.call("GET", "/v1/chassis/detail?sort_key=created_at", "")
	if code != http.StatusOK {
		t.Fatalf("after restart: %d %s", code, b)
	}
	var after struct {
		Chassis []struct {
			UUID        string         `json:"uuid"`
			Description *string        `json:"description"`
			Extra       map[string]any `json:"extra"`
		} `json:"chassis"`
	}
	if err := json.Unmarshal(b, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Chassis) != 4 || after.Chassis[0].UUID != ids[0] || after.Chassis[0].Description != nil ||
		after.Chassis[0].Extra["site"] != "lab" || after.Chassis[0].Extra["row"] != float64(0) {
		t.Errorf("after restart: %s", b)
	}
}

// TestChassisOpenstackClient runs `openstack baremetal chassis …` against
// a real kiln serve and checks what each command prints.
func TestChassisOpenstackClient(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	run, jsonInto := stepsOSC(t, k)
	jsonOut := func(args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		jsonInto(&m, args...)
		return m
	}
	ch := jsonOut("chassis", "create", "--description", "rack1", "--extra", "a=b")
	id, _ := ch["uuid"].(string)
	if id == "" || ch["description"] != "rack1" || fmt.Sprint(ch["extra"]) != "map[a:b]" {
		t.Fatalf("chassis create printed %v", ch)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(run(true, "chassis", "list", "-f", "json")), &list); err != nil || len(list) != 1 ||
		list[0]["UUID"] != id || list[0]["Description"] != "rack1" {
		t.Errorf("chassis list: %v %v", list, err)
	}
	run(true, "chassis", "set", "--description", "rack2", "--extra", "c=d", id)
	run(true, "chassis", "unset", "--extra", "a", id)
	shown := jsonOut("chassis", "show", id)
	if shown["description"] != "rack2" || fmt.Sprint(shown["extra"]) != "map[c:d]" || shown["updated_at"] == nil {
		t.Errorf("chassis show after set/unset: %v", shown)
	}
	node := jsonOut("node", "create", "--driver", "fake-hardware", "--name", "n1", "--chassis-uuid", id)
	if node["chassis_uuid"] != id {
		t.Errorf("node create --chassis-uuid printed chassis_uuid %v", node["chassis_uuid"])
	}
	if out := run(true, "node", "list", "--chassis", id, "-f", "value", "-c", "Name"); strings.TrimSpace(out) != "n1" {
		t.Errorf("node list --chassis: %q", out)
	}
	if out := run(false, "chassis", "delete", id); !strings.Contains(out, "contains nodes. (HTTP 400)") {
		t.Errorf("chassis delete with a node printed %q", out)
	}
	run(true, "node", "delete", "n1")
	if out := run(true, "chassis", "delete", id); !strings.Contains(out, "Deleted chassis "+id) {
		t.Errorf("chassis delete printed %q", out)
	}
	if out := run(false, "chassis", "show", id); !strings.Contains(out, "Chassis "+id+" could not be found. (HTTP 404)") {
		t.Errorf("chassis show of a deleted chassis printed %q", out)
	}
}
