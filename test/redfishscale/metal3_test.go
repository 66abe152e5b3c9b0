package redfishscale

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/fakeagent"
	"github.com/kilnhq/kiln/test/kilnproc"
	"github.com/kilnhq/kiln/test/phases"
)

// metal3Clean is the one manual clean baremetal-operator asks for when a
// BareMetalHost carries a hardware RAID spec, firmware (BIOS) settings and
// firmware component updates, in its order: RAID first (delete, then
// create from target_raid_config), then the BIOS settings, then the
// firmware updates.
var metal3Clean = []map[string]any{
	{"interface": "raid", "step": "delete_configuration"},
	{"interface": "raid", "step": "create_configuration"},
	{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []map[string]any{
		{"name": "ProcVirtualization", "value": "Disabled"},
		{"name": "SriovGlobalEnable", "value": "Enabled"},
	}}},
	{"interface": "firmware", "step": "update", "args": map[string]any{"settings": []map[string]any{
		{"component": "bios", "url": "http://firmware.example/bios-9.8.7.bin"},
		{"component": "bmc", "url": "http://firmware.example/bmc-6.5.4.bin"},
	}}},
}

// TestMetal3Sequence drives a redfish node of every simulator personality
// through a real `kiln serve` the way baremetal-operator drives Ironic:
// enrolled with a BMC address, credentials, deploy ramdisk and boot MAC;
// manage, agent inspection, target_raid_config through
// PUT /states/raid, ONE manual clean with the RAID, BIOS and firmware
// steps, provide, then deploy with an image, its checksum and a config
// drive. It checks what the steps did, not only the states: the BIOS
// settings read back through /bios, the RAID-1 volume exists on the BMC
// and is the node's root device, the firmware versions changed in
// /firmware, the write_image step got the config drive and the instance
// booted from the disk. Each phase's wall time and the BMC requests it
// took are logged per personality (the table of docs/hardware-config.md).
func TestMetal3Sequence(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Metal3 sequence boots the fake agent five times per personality")
	}
	p := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "metal3", "--log-level", "warn",
		"--power-sync-interval", "0", "--boot-dir", t.TempDir())
	for i, personality := range bmcsim.PersonalityNames() {
		t.Run(personality, func(t *testing.T) { metal3Sequence(t, p, personality, 300+i) })
	}
}

func metal3Sequence(t *testing.T, p *kilnproc.Proc, personality string, index int) {
	pers, err := bmcsim.LookupPersonality(personality)
	if err != nil {
		t.Fatal(err)
	}
	mac := bmcsim.MACForIndex(index)
	inv := bmcsim.Inventory{Manufacturer: pers.Manufacturer, Model: pers.Model,
		Disks: []bmcsim.Disk{{Name: "disk0", SizeBytes: 10 << 30}, {Name: "disk1", SizeBytes: 10 << 30}}}
	var (
		wroteMu    sync.Mutex
		configdrv  string
		imageWrote string
	)
	m := &agentMachine{Memory: bmcsim.NewMemory(index, inv)}
	m.cfg = fakeagent.Config{ControllerURL: p.URL, MACs: []string{mac}, HeartbeatInterval: 100 * time.Millisecond,
		Inventory: agentInventory(m.Memory.Inventory(), mac),
		StepBehavior: func(kind, step string, args map[string]any) (any, error, time.Duration) {
			if step == "write_image" {
				wroteMu.Lock()
				configdrv, _ = args["configdrive"].(string)
				info, _ := args["image_info"].(map[string]any)
				imageWrote = fmt.Sprint(info["id"])
				wroteMu.Unlock()
			}
			return nil, nil, 0
		}}
	defer m.stop()
	defer func() {
		if t.Failed() {
			t.Logf("boots: %+v", m.Memory.Boots())
		}
	}()
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: personality, TaskDuration: 10 * time.Millisecond,
		NewBackend: func(int) (bmcsim.Backend, error) { return m, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	b := lab.BMCs[0]
	u, pw := b.Credentials()
	bmc := redfishReader{t: t, base: b.URL, user: u, password: pw}
	biosBefore := bmc.firmwareVersion("BIOS")
	bmcBefore := bmc.firmwareVersion("BMC")

	// Enroll as baremetal-operator does: the redfish hardware type with its
	// bios/raid/firmware interfaces, agent inspection, the ramdisk in
	// driver_info, then the boot MAC as a port.
	code, out := call(t, p.URL, "POST", "/v1/nodes", map[string]any{"name": "metal3~" + personality, "driver": "redfish",
		"boot_interface": "ipxe", "deploy_interface": "direct", "inspect_interface": "agent",
		"bios_interface": "redfish", "raid_interface": "redfish", "firmware_interface": "redfish",
		"driver_info": map[string]any{"redfish_address": b.URL, "redfish_system_id": "/redfish/v1/Systems/" + b.SystemIDs()[0],
			"redfish_username": u, "redfish_password": pw,
			"deploy_kernel": "http://images.example/ironic-python-agent.kernel", "deploy_ramdisk": "http://images.example/ironic-python-agent.initramfs"},
		"properties": map[string]any{"capabilities": "boot_mode:uefi"}})
	if code != 201 {
		t.Fatalf("create: %d %v", code, out)
	}
	uuid := out["uuid"].(string)
	if code, out := call(t, p.URL, "POST", "/v1/ports", map[string]any{"node_uuid": uuid, "address": mac, "pxe_enabled": true}); code != 201 {
		t.Fatalf("port: %d %v", code, out)
	}

	rec, err := phases.Record(http.DefaultClient, p.URL, uuid, func() uint64 { return lab.Requests()[0] })
	if err != nil {
		t.Fatal(err)
	}
	run := func(verb string, body map[string]any, want string) map[string]any {
		t.Helper()
		if body == nil {
			body = map[string]any{}
		}
		body["target"] = verb
		return provision(t, p.URL, uuid, body, want)
	}
	run("manage", nil, "manageable")
	m.mu.Lock()
	m.cfg.Inspect = true
	m.mu.Unlock()
	n := run("inspect", nil, "manageable")
	m.mu.Lock()
	m.cfg.Inspect = false
	m.mu.Unlock()
	if n["inspection_finished_at"] == nil || fmt.Sprint(n["properties"].(map[string]any)["memory_mb"]) != fmt.Sprint(m.Memory.Inventory().MemoryGiB<<10) {
		t.Errorf("after inspect: inspection_finished_at %v, properties %v", n["inspection_finished_at"], n["properties"])
	}

	if code, out := call(t, p.URL, "PUT", "/v1/nodes/"+uuid+"/states/raid", map[string]any{"logical_disks": []map[string]any{
		{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}}}); code != 204 {
		t.Fatalf("states/raid: %d %v", code, out)
	}
	run("clean", map[string]any{"clean_steps": metal3Clean}, "manageable")
	run("provide", nil, "available")
	// The image as baremetal-operator sets it before asking for active.
	if code, out := call(t, p.URL, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/worker.qcow2"},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("ab", 32)},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "qcow2"},
		{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{"boot_mode": "uefi"}},
	}); code != 200 {
		t.Fatalf("patch instance_info: %d %v", code, out)
	}
	run("active", map[string]any{"configdrive": map[string]any{
		"meta_data": map[string]any{"uuid": uuid, "name": "metal3-" + personality, "local-hostname": "worker-0"},
		"user_data": "#cloud-config\nhostname: worker-0\n"}}, "active")

	// What the steps did.
	if code, out := call(t, p.URL, "GET", "/v1/nodes/"+uuid+"/bios", nil); code != 200 || biosValue(out, "ProcVirtualization") != "Disabled" || biosValue(out, "SriovGlobalEnable") != "Enabled" {
		t.Errorf("GET /bios: %d ProcVirtualization=%q SriovGlobalEnable=%q", code, biosValue(out, "ProcVirtualization"), biosValue(out, "SriovGlobalEnable"))
	}
	if got := bmc.biosAttribute("ProcVirtualization"); got != "Disabled" {
		t.Errorf("BMC's ProcVirtualization %q, want Disabled", got)
	}
	vols := bmc.volumes()
	if len(vols) != 1 || vols[0].RAIDType != "RAID1" {
		t.Errorf("BMC volumes after the clean: %+v, want one RAID1", vols)
	}
	_, n = call(t, p.URL, "GET", "/v1/nodes/"+uuid, nil)
	lds, _ := n["raid_config"].(map[string]any)["logical_disks"].([]any)
	rootDev := n["properties"].(map[string]any)["root_device"]
	if len(lds) != 1 || lds[0].(map[string]any)["is_root_volume"] != true || lds[0].(map[string]any)["raid_level"] != "1" {
		t.Errorf("raid_config %v", n["raid_config"])
	}
	if len(vols) == 1 && fmt.Sprint(rootDev) != fmt.Sprintf("map[size:%d]", vols[0].CapacityBytes>>30) {
		t.Errorf("properties.root_device %v, want the RAID-1 volume's %d GiB", rootDev, vols[0].CapacityBytes>>30)
	}
	_, fw := call(t, p.URL, "GET", "/v1/nodes/"+uuid+"/firmware", nil)
	versions := map[string]string{}
	for _, x := range fw["firmware"].([]any) {
		c := x.(map[string]any)
		versions[fmt.Sprint(c["component"])] = fmt.Sprint(c["current_version"]) + "/" + fmt.Sprint(c["last_version_flashed"])
	}
	if versions["bios"] != "9.8.7/9.8.7" || versions["bmc"] != "6.5.4/6.5.4" {
		t.Errorf("GET /firmware after the update: %v", fw["firmware"])
	}
	if biosNow, bmcNow := bmc.firmwareVersion("BIOS"), bmc.firmwareVersion("BMC"); biosNow != "9.8.7" || bmcNow != "6.5.4" || biosBefore == biosNow || bmcBefore == bmcNow {
		t.Errorf("BMC firmware: BIOS %s → %s, BMC %s → %s", biosBefore, biosNow, bmcBefore, bmcNow)
	}
	wroteMu.Lock()
	if configdrv == "" || imageWrote == "" || imageWrote == "<nil>" {
		t.Errorf("write_image got image %q and a config drive of %d bytes", imageWrote, len(configdrv))
	}
	wroteMu.Unlock()
	if n["provision_state"] != "active" || n["power_state"] != "power on" || n["last_error"] != nil {
		t.Errorf("deployed: %v, %v, last_error %v", n["provision_state"], n["power_state"], n["last_error"])
	}
	// The agent booted from the network for inspection, the manual clean,
	// again after the BIOS step's reboot (the firmware step after it needs
	// the agent back), automated cleaning and the deploy.
	m.mu.Lock()
	booted := append([]string(nil), m.booted...)
	m.mu.Unlock()
	if len(booted) != 5 || strings.Count(strings.Join(booted, ","), bmcsim.TargetPxe+" ") != 5 {
		t.Errorf("agent boots %q, want five from the network", booted)
	}
	boots := m.Memory.Boots()
	if last := boots[len(boots)-1]; last.Target != bmcsim.TargetHdd {
		t.Errorf("the instance booted from %+v, want the disk", last)
	}

	t.Logf("phases of the Metal3 sequence:\n%s", phases.Table(fmt.Sprintf("%-10s", personality), rec.Stop()))
}

// provision asks for verb and polls the node until it reaches want,
// failing the test on a failed state or a last_error.
func provision(t *testing.T, base, uuid string, body map[string]any, want string) map[string]any {
	t.Helper()
	verb := body["target"]
	if code, out := call(t, base, "PUT", "/v1/nodes/"+uuid+"/states/provision", body); code != 202 {
		t.Fatalf("%s: %d %v", verb, code, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, n := call(t, base, "GET", "/v1/nodes/"+uuid, nil)
		st := fmt.Sprint(n["provision_state"])
		if st == want && n["reservation"] == nil && n["target_provision_state"] == nil {
			return n
		}
		if strings.Contains(st, "fail") || n["last_error"] != nil || time.Now().After(deadline) {
			t.Fatalf("%s: state %s, last_error %v, clean_step %v, deploy_step %v", verb, st, n["last_error"], n["clean_step"], n["deploy_step"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func biosValue(out map[string]any, name string) string {
	for _, x := range out["bios"].([]any) {
		if s := x.(map[string]any); s["name"] == name {
			return fmt.Sprint(s["value"])
		}
	}
	return ""
}

// agentInventory is what ironic-python-agent reports on this machine.
func agentInventory(inv bmcsim.Inventory, mac string) map[string]any {
	disks := []any{}
	for i, d := range inv.Disks {
		disks = append(disks, map[string]any{"name": "/dev/sd" + string(rune('a'+i)), "size": d.SizeBytes, "rotational": false, "model": "SIM DISK"})
	}
	ifaces := []any{}
	for i, nic := range inv.NICs {
		ifaces = append(ifaces, map[string]any{"name": fmt.Sprintf("eno%d", i+1), "mac_address": nic.MAC, "has_carrier": true})
	}
	return map[string]any{
		"cpu":           map[string]any{"count": inv.CPUCount, "architecture": "x86_64", "model_name": inv.CPUModel, "flags": []string{}},
		"memory":        map[string]any{"total": int64(inv.MemoryGiB) << 30, "physical_mb": inv.MemoryGiB << 10},
		"disks":         disks,
		"interfaces":    ifaces,
		"boot":          map[string]any{"current_boot_mode": "uefi", "pxe_interface": mac},
		"system_vendor": map[string]any{"manufacturer": inv.Manufacturer, "product_name": inv.Model, "serial_number": inv.SerialNumber},
	}
}

// redfishReader reads the simulated BMC directly, as a check independent
// of the controller.
type redfishReader struct {
	t                    *testing.T
	base, user, password string
}

func (r redfishReader) get(path string, into any) {
	r.t.Helper()
	req, err := http.NewRequest("GET", r.base+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.SetBasicAuth(r.user, r.password)
	resp, err := client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		r.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		r.t.Fatalf("GET %s: %v", path, err)
	}
}

type members struct {
	Members []struct {
		ID string `json:"@odata.id"`
	}
}

func (r redfishReader) system() string {
	var c members
	r.get("/redfish/v1/Systems", &c)
	return c.Members[0].ID
}

func (r redfishReader) firmwareVersion(id string) string {
	var c struct{ Version string }
	r.get("/redfish/v1/UpdateService/FirmwareInventory/"+id, &c)
	return c.Version
}

func (r redfishReader) biosAttribute(name string) string {
	var b struct{ Attributes map[string]any }
	r.get(r.system()+"/Bios", &b)
	return fmt.Sprint(b.Attributes[name])
}

type volume struct {
	RAIDType      string
	CapacityBytes int64
}

func (r redfishReader) volumes() []volume {
	var storage members
	r.get(r.system()+"/Storage", &storage)
	var out []volume
	for _, s := range storage.Members {
		var vols members
		r.get(s.ID+"/Volumes", &vols)
		for _, v := range vols.Members {
			var vol volume
			r.get(v.ID, &vol)
			out = append(out, vol)
		}
	}
	return out
}
