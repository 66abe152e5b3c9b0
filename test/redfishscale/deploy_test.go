package redfishscale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	kilnboot "github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/kilnhq/kiln/test/fakeagent"
	"github.com/kilnhq/kiln/test/kilnproc"
)

// agentMachine is a simulated server whose ramdisk is a fake agent: a
// power-on that boots from the network or the virtual CD starts one, like
// the real agent image would; any other boot (the disk) runs none.
type agentMachine struct {
	*bmcsim.Memory
	cfg fakeagent.Config

	mu     sync.Mutex
	agent  *fakeagent.Agent
	booted []string // first boot device of every power-on that ran an agent
}

func (m *agentMachine) Reset(ctx context.Context, t bmcsim.ResetType) error {
	before := len(m.Memory.Boots())
	if err := m.Memory.Reset(ctx, t); err != nil {
		return err
	}
	boots := m.Memory.Boots()
	ps, _ := m.Memory.PowerState(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(boots) == before && ps == bmcsim.PowerOn {
		return nil // no new power-on: the running OS goes on
	}
	if m.agent != nil {
		go m.agent.Stop()
		m.agent = nil
	}
	if ps != bmcsim.PowerOn || len(boots) == before {
		return nil
	}
	last := boots[len(boots)-1]
	if last.Target != bmcsim.TargetPxe && last.Target != bmcsim.TargetCd {
		return nil
	}
	cfg := m.cfg
	cfg.OnPowerOff = m.Memory.GuestPowerOff
	if last.Target == bmcsim.TargetCd && strings.Contains(last.Media, "/boot/files/iso/") {
		// An ISO the controller built: its kernel command line carries the
		// agent token, as the real agent would read it from /proc/cmdline.
		tok, err := tokenFromISO(last.Media)
		if err != nil {
			return err
		}
		cfg.Token = tok
	}
	a, err := fakeagent.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	m.agent = a
	m.booted = append(m.booted, last.Target+" "+last.Media)
	return nil
}

var tokenRE = regexp.MustCompile(`ipa-agent-token=([A-Za-z0-9_-]+)`)

func tokenFromISO(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	iso, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("download %s: %d %v", url, resp.StatusCode, err)
	}
	m := tokenRE.FindSubmatch(iso)
	if m == nil {
		return "", fmt.Errorf("no ipa-agent-token in %s", url)
	}
	return string(m[1]), nil
}

func (m *agentMachine) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.agent != nil {
		m.agent.Stop()
	}
}

// TestDeployThroughController takes a redfish node from enroll to active and
// back through `kiln serve`, once with the ipxe boot interface and once
// with redfish-virtual-media, and checks what the BMC was asked to boot.
func TestDeployThroughController(t *testing.T) {
	bootDir := t.TempDir()
	for name, content := range map[string]string{"kiln-agent.kernel": "KERNEL", "kiln-agent.initramfs": "INITRAMFS"} {
		if err := os.WriteFile(filepath.Join(bootDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "deploy", "--log-level", "warn",
		"--power-sync-interval", "0", "--boot-dir", bootDir)
	for i, boot := range []string{"ipxe", "redfish-virtual-media", "redfish-virtual-media-built"} {
		t.Run(boot, func(t *testing.T) {
			built := boot == "redfish-virtual-media-built"
			if built {
				boot = "redfish-virtual-media"
				if err := kilnboot.NewISOBuilder(kilnboot.ISOConfig{Dir: bootDir}).Check(); err != nil {
					t.Skip(err)
				}
			}
			mac := bmcsim.MACForIndex(200 + i)
			m := &agentMachine{Memory: bmcsim.NewMemory(200+i, bmcsim.Inventory{}),
				cfg: fakeagent.Config{ControllerURL: p.URL, MACs: []string{mac}, HeartbeatInterval: 100 * time.Millisecond}}
			defer m.stop()
			lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "idrac", NewBackend: func(int) (bmcsim.Backend, error) { return m, nil }})
			if err != nil {
				t.Fatal(err)
			}
			defer lab.Close()
			b := lab.BMCs[0]
			u, pw := b.Credentials()
			const iso = "http://10.0.2.2:6385/boot/files/agent.iso"
			info := map[string]any{"redfish_address": b.URL, "redfish_username": u, "redfish_password": pw,
				"deploy_kernel": "http://x/k", "deploy_ramdisk": "http://x/r", "deploy_iso": iso}
			if built {
				// No deploy_iso: the controller builds the node's ISO from its own agent files.
				delete(info, "deploy_iso")
				delete(info, "deploy_kernel")
				delete(info, "deploy_ramdisk")
			}
			code, out := call(t, p.URL, "POST", "/v1/nodes", map[string]any{"driver": "redfish", "boot_interface": boot, "deploy_interface": "direct",
				"driver_info": info})
			if code != 201 {
				t.Fatalf("create: %d %v", code, out)
			}
			uuid := out["uuid"].(string)
			if code, out := call(t, p.URL, "POST", "/v1/ports", map[string]any{"node_uuid": uuid, "address": mac}); code != 201 {
				t.Fatalf("port: %d %v", code, out)
			}
			step := func(verb string, body map[string]any, want string) map[string]any {
				t.Helper()
				if body == nil {
					body = map[string]any{}
				}
				body["target"] = verb
				if code, out := call(t, p.URL, "PUT", "/v1/nodes/"+uuid+"/states/provision", body); code != 202 {
					t.Fatalf("%s: %d %v", verb, code, out)
				}
				deadline := time.Now().Add(30 * time.Second)
				for {
					_, n := call(t, p.URL, "GET", "/v1/nodes/"+uuid, nil)
					if n["provision_state"] == want && n["reservation"] == nil {
						return n
					}
					if st := fmt.Sprint(n["provision_state"]); strings.Contains(st, "fail") || time.Now().After(deadline) {
						t.Fatalf("%s: state %s, last_error %v", verb, st, n["last_error"])
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			step("manage", nil, "manageable")
			step("provide", nil, "available") // automated cleaning boots the agent
			if code, out := call(t, p.URL, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
				{"op": "add", "path": "/instance_info/image_source", "value": "http://images.example/disk.qcow2"},
				{"op": "add", "path": "/instance_info/image_checksum", "value": strings.Repeat("ab", 32)},
				{"op": "add", "path": "/instance_info/image_disk_format", "value": "qcow2"},
			}); code != 200 {
				t.Fatalf("patch: %d %v", code, out)
			}
			n := step("active", nil, "active")
			if n["power_state"] != "power on" || n["last_error"] != nil {
				t.Errorf("active: power %v last_error %v", n["power_state"], n["last_error"])
			}
			want := bmcsim.TargetPxe + " "
			if boot == "redfish-virtual-media" {
				want = bmcsim.TargetCd + " " + iso
			}
			if built {
				want = bmcsim.TargetCd + " " + p.URL + "/boot/files/iso/" + uuid + ".iso"
			}
			m.mu.Lock()
			booted := append([]string(nil), m.booted...)
			m.mu.Unlock()
			if len(booted) != 2 || booted[0] != want || booted[1] != want {
				t.Errorf("agent boots %q, want two (clean, deploy) of %q", booted, want)
			}
			boots := m.Memory.Boots()
			if last := boots[len(boots)-1]; last.Target != bmcsim.TargetHdd || last.Media != "" {
				t.Errorf("instance boot %+v, want the disk without virtual media", last)
			}
			bo, _ := m.Memory.BootOverride(context.Background())
			if bo.Target != bmcsim.TargetHdd || bo.Enabled != bmcsim.OverrideContinuous {
				t.Errorf("final boot override %+v, want Hdd/Continuous", bo)
			}
		})
	}
}

// TestLastErrorNamesTheBMC: a node whose BMC refuses the password fails
// verification, and its last_error says which BMC, which request and what
// the BMC answered.
func TestLastErrorNamesTheBMC(t *testing.T) {
	p := kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "errs", "--log-level", "warn", "--power-sync-interval", "0")
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: "ilo"})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	b := lab.BMCs[0]
	code, out := call(t, p.URL, "POST", "/v1/nodes", map[string]any{"driver": "redfish",
		"driver_info": map[string]any{"redfish_address": b.URL, "redfish_username": "admin", "redfish_password": "wrong"}})
	if code != 201 {
		t.Fatalf("create: %d %v", code, out)
	}
	uuid := out["uuid"].(string)
	if code, out := call(t, p.URL, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "manage"}); code != 202 {
		t.Fatalf("manage: %d %v", code, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, n := call(t, p.URL, "GET", "/v1/nodes/"+uuid, nil)
		if e, _ := n["last_error"].(string); e != "" && n["reservation"] == nil {
			for _, want := range []string{b.URL, "POST /redfish/v1/SessionService/Sessions", "401", "redfish_password"} {
				if !strings.Contains(e, want) {
					t.Errorf("last_error %q lacks %q", e, want)
				}
			}
			if n["provision_state"] != "enroll" {
				t.Errorf("state %v after failed verification, want enroll", n["provision_state"])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no last_error: state %v", n["provision_state"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
