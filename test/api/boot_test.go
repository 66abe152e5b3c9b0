package api_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

// TestNetworkBootServing: kiln serve answers iPXE per MAC from its store and
// serves the agent's files with Range support.
func TestNetworkBootServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bootDir := filepath.Join(dir, "boot")
	if err := os.MkdirAll(bootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bootDir, "kiln-agent.kernel"), []byte("0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bootDir, "kiln-agent.initramfs"), []byte("BASE-INITRAMFS"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &kiln{Proc: kilnproc.Start(t, kilnBin, filepath.Join(dir, "kiln.db"), "--conductor", "boot-test", "--boot-dir", bootDir), t: t}
	code, _, b := k.call("POST", "/v1/nodes", `{"driver":"fake-hardware","name":"pxe-node","deploy_interface":"direct","automated_clean":false,"instance_info":{"image_source":"http://x/y.raw","image_checksum":"`+strings.Repeat("0", 64)+`"}}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}
	uuid := mustJSON(t, b)["uuid"].(string)
	if code, _, b := k.call("POST", "/v1/ports", `{"node_uuid":"`+uuid+`","address":"52:54:00:aa:00:01"}`); code != 201 {
		t.Fatalf("port: %d %s", code, b)
	}
	// Enrolled: the machine boots its disk.
	_, _, script := k.call("GET", "/boot/boot.ipxe?mac=52-54-00-aa-00-01", "")
	if !strings.HasPrefix(string(script), "#!ipxe") || strings.Contains(string(script), "kiln-agent.kernel") {
		t.Fatalf("enrolled node script:\n%s", script)
	}
	// Deploying: the agent, with BOOTIF and the API URL.
	for _, verb := range []string{"manage", "provide", "active"} {
		if code, _, b := k.call("PUT", "/v1/nodes/"+uuid+"/states/provision", `{"target":"`+verb+`"}`); code != 202 {
			t.Fatalf("%s: %d %s", verb, code, b)
		}
		waitRaw(t, k, uuid, map[string]string{"manage": "manageable", "provide": "available", "active": "wait call-back"}[verb])
	}
	_, _, script = k.call("GET", "/boot/boot.ipxe?mac=52:54:00:aa:00:01", "")
	for _, want := range []string{"kiln-agent.kernel", "kiln-agent.initramfs", "BOOTIF=01-52-54-00-aa-00-01", "ipa-api-url=" + k.URL} {
		if !strings.Contains(string(script), want) {
			t.Errorf("agent script lacks %q:\n%s", want, script)
		}
	}
	// A static-IP host: its NMState data rides in a per-node ramdisk.
	nmstate := "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  ipv4: {enabled: true, address: [{ip: 192.0.2.10, prefix-length: 24}]}\n"
	if code, _, b := k.call("PATCH", "/v1/nodes/"+uuid, `[{"op":"add","path":"/driver_info/preprovisioning_network_data","value":`+strconv.Quote(nmstate)+`}]`); code != 409 {
		// wait call-back refuses patches (a flow is running): that is Ironic's rule too.
		t.Logf("patch in wait call-back: %d %s", code, b)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/"+uuid+"/states/provision", `{"target":"deleted"}`); code != 202 {
		t.Fatalf("undeploy: %d %s", code, b)
	}
	waitRaw(t, k, uuid, "available")
	// Undeploy cleared instance_info; give it the image again with the network data.
	if code, _, b := k.call("PATCH", "/v1/nodes/"+uuid, `[{"op":"add","path":"/driver_info/preprovisioning_network_data","value":`+strconv.Quote(nmstate)+`},`+
		`{"op":"add","path":"/instance_info/image_source","value":"http://x/y.raw"},{"op":"add","path":"/instance_info/image_checksum","value":"`+strings.Repeat("0", 64)+`"}]`); code != 200 {
		t.Fatalf("patch: %d %s", code, b)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/"+uuid+"/states/provision", `{"target":"active"}`); code != 202 {
		t.Fatalf("deploy: %d %s", code, b)
	}
	waitRaw(t, k, uuid, "wait call-back")
	_, _, script = k.call("GET", "/boot/boot.ipxe?mac=52:54:00:aa:00:01", "")
	if !strings.Contains(string(script), "/boot/ramdisk/"+uuid) {
		t.Errorf("static-IP node does not get its own ramdisk:\n%s", script)
	}
	code, _, rd := k.call("GET", "/boot/ramdisk/"+uuid, "")
	if code != 200 || !strings.HasPrefix(string(rd), "BASE-INITRAMFS") || !strings.Contains(string(rd), "etc/kiln/network.yaml") || !strings.Contains(string(rd), "192.0.2.10") {
		t.Errorf("per-node ramdisk: %d %q", code, rd)
	}
	// Unknown MAC: local disk by default.
	if _, _, s := k.call("GET", "/boot/boot.ipxe?mac=52:54:00:ff:ff:ff", ""); strings.Contains(string(s), "kernel ") {
		t.Errorf("unknown MAC got an agent script:\n%s", s)
	}
	// Files with Range.
	code, hdr, part := k.call("GET", "/boot/files/kiln-agent.kernel", "", "Range", "bytes=4-7")
	if code != 206 || string(part) != "4567" || hdr.Get("Content-Range") != "bytes 4-7/16" {
		t.Errorf("range: %d %q %v", code, part, hdr)
	}
	if code, _, _ := k.call("GET", "/boot/files/../kiln.db", ""); code == 200 {
		t.Error("path traversal served a file")
	}
}

func waitRaw(t *testing.T, k *kiln, uuid, want string) {
	t.Helper()
	for range 500 {
		_, _, b := k.call("GET", "/v1/nodes/"+uuid, "")
		n := mustJSON(t, b)
		if n["provision_state"] == want && n["reservation"] == nil {
			return
		}
		if le, _ := n["last_error"].(string); le != "" && strings.Contains(string(b), "failed") {
			t.Fatalf("node failed: %s", le)
		}
		sleep()
	}
	t.Fatalf("node %s never reached %s", uuid, want)
}
