package api_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVolumeOpenstackClient runs every `openstack baremetal volume
// connector …` and `volume target …` command against a real kiln serve
// and checks what each prints, the powered-on refusal included.
func TestVolumeOpenstackClient(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	run, jsonOut := stepsOSC(t, k)
	code, _, b := k.call("POST", "/v1/nodes", `{"driver":"fake-hardware","name":"vn1"}`)
	if code != 201 {
		t.Fatalf("node: %d %s", code, b)
	}
	node := mustJSON(t, b)["uuid"].(string)
	// A fresh node's power state is unknown: a change is refused (Ironic's
	// conductor wants it powered off), then allowed once it is off.
	var conn map[string]any
	jsonOut(&conn, "volume", "connector", "create", "--node", node, "--type", "iqn", "--connector-id", "iqn.2017-07.org.openstack:01:d9a51732c3f", "--extra", "a=b")
	cid, _ := conn["uuid"].(string)
	if cid == "" || conn["node_uuid"] != node || conn["type"] != "iqn" || fmt.Sprint(conn["extra"]) != "map[a:b]" {
		t.Fatalf("volume connector create printed %v", conn)
	}
	if out := run(false, "volume", "connector", "set", cid, "--extra", "c=d"); !strings.Contains(out,
		`The requested action "volume connector update" can not be performed on node "`+node+`" while it is in state "None". (HTTP 400)`) {
		t.Errorf("set on a node not powered off printed %q", out)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/vn1/states/power", `{"target":"power off"}`); code != 202 {
		t.Fatalf("power off: %d %s", code, b)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, _, b := k.call("GET", "/v1/nodes/vn1", "")
		if n := mustJSON(t, b); n["power_state"] == "power off" && n["reservation"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not powered off: %s", b)
		}
	}
	run(true, "volume", "connector", "set", cid, "--extra", "c=d", "--connector-id", "iqn.2017-07.org.openstack:02:10190a4153e")
	run(true, "volume", "connector", "unset", cid, "--extra", "a")
	conn = nil
	jsonOut(&conn, "volume", "connector", "show", cid)
	if conn["connector_id"] != "iqn.2017-07.org.openstack:02:10190a4153e" || fmt.Sprint(conn["extra"]) != "map[c:d]" || conn["updated_at"] == nil {
		t.Errorf("volume connector show after set/unset: %v", conn)
	}
	var list []map[string]any
	jsonOut(&list, "volume", "connector", "list", "--node", "vn1")
	if len(list) != 1 || list[0]["UUID"] != cid || list[0]["Node UUID"] != node || list[0]["Type"] != "iqn" {
		t.Errorf("volume connector list --node: %v", list)
	}
	if out := run(false, "volume", "connector", "create", "--node", node, "--type", "iqn", "--connector-id", "iqn.2017-07.org.openstack:02:10190a4153e"); !strings.Contains(out,
		"A volume connector with type iqn and connector ID iqn.2017-07.org.openstack:02:10190a4153e already exists. (HTTP 409)") {
		t.Errorf("duplicate connector printed %q", out)
	}

	var tgt map[string]any
	jsonOut(&tgt, "volume", "target", "create", "--node", node, "--type", "iscsi", "--boot-index", "0",
		"--volume-id", "04452bed-5367-4202-8bf5-de4335ac56d2", "--property", "target_lun=0")
	tid, _ := tgt["uuid"].(string)
	if tid == "" || tgt["boot_index"] != float64(0) || tgt["volume_type"] != "iscsi" || fmt.Sprint(tgt["properties"]) != "map[target_lun:0]" {
		t.Fatalf("volume target create printed %v", tgt)
	}
	if out := run(false, "volume", "target", "create", "--node", node, "--type", "iscsi", "--boot-index", "0", "--volume-id", "v2"); !strings.Contains(out,
		"A volume target with boot index '0' for the same node already exists. (HTTP 409)") {
		t.Errorf("duplicate boot index printed %q", out)
	}
	run(true, "volume", "target", "set", tid, "--volume-id", "7211f7d3-3f32-4efc-b64e-9b8e92e64a8e", "--property", "auth=chap")
	run(true, "volume", "target", "unset", tid, "--property", "target_lun")
	tgt = nil
	jsonOut(&tgt, "volume", "target", "show", tid)
	if tgt["volume_id"] != "7211f7d3-3f32-4efc-b64e-9b8e92e64a8e" || fmt.Sprint(tgt["properties"]) != "map[auth:chap]" {
		t.Errorf("volume target show after set/unset: %v", tgt)
	}
	list = nil
	jsonOut(&list, "volume", "target", "list", "--long")
	if len(list) != 1 || list[0]["UUID"] != tid || list[0]["Boot Index"] != float64(0) || list[0]["Node UUID"] != node {
		t.Errorf("volume target list --long: %v", list)
	}
	if out := run(true, "volume", "target", "delete", tid); !strings.Contains(out, "Deleted volume target "+tid) {
		t.Errorf("volume target delete printed %q", out)
	}
	if out := run(true, "volume", "connector", "delete", cid); !strings.Contains(out, "Deleted volume connector "+cid) {
		t.Errorf("volume connector delete printed %q", out)
	}
	if out := run(false, "volume", "connector", "show", cid); !strings.Contains(out, "Volume connector "+cid+" could not be found. (HTTP 404)") {
		t.Errorf("show of a deleted connector printed %q", out)
	}
}
