package bmcsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzHardwareRequests sends arbitrary requests to the hardware-configuration
// resources of every personality, then reboots the system and moves the clock
// past any task: no panic, no 5xx, every error a Redfish error body, and the
// state stays valid — BIOS values within the registry, no drive in two
// volumes.
func FuzzHardwareRequests(f *testing.F) {
	for _, seed := range []struct{ method, path, body string }{
		{"PATCH", "/Systems/1/Bios/Settings", `{"Attributes":{"ProcVirtualization":"Disabled","AcPwrRcvryUserDelay":120}}`},
		{"PATCH", "/Systems/1/Bios/Settings", `{"Attributes":{"BootMode":"Bios"},"@Redfish.SettingsApplyTime":{"ApplyTime":"Immediate"}}`},
		{"PATCH", "/Systems/1/Bios/Settings", `{"Attributes":{"AssetTagBios":"01234567890123456789"}}`},
		{"POST", "/Systems/1/Bios/Actions/Bios.ResetBios", `{}`},
		{"POST", "/Systems/1/Storage/1/Volumes", `{"RAIDType":"RAID1","Links":{"Drives":[{"@odata.id":"/redfish/v1/Systems/1/Storage/1/Drives/Disk.Bay.0"},{"@odata.id":"/redfish/v1/Systems/1/Storage/1/Drives/Disk.Bay.1"}]}}`},
		{"POST", "/Systems/1/Storage/1/Volumes", `{"RAIDType":"RAID0","CapacityBytes":-1,"Links":{"Drives":[]}}`},
		{"DELETE", "/Systems/1/Storage/1/Volumes/Volume1", ``},
		{"PATCH", "/Systems/1/SecureBoot", `{"SecureBootEnable":true}`},
		{"POST", "/Systems/1/SecureBoot/Actions/SecureBoot.ResetKeys", `{"ResetKeysType":"DeletePK"}`},
		{"PATCH", "/Systems/1", `{"IndicatorLED":"Blinking","LocationIndicatorActive":false}`},
		{"POST", "/UpdateService/Actions/UpdateService.SimpleUpdate", `{"ImageURI":"http://h/bios-1.2.3.bin","Targets":["/redfish/v1/UpdateService/FirmwareInventory/BMC"]}`},
		{"POST", "/Managers/BMC/Actions/Manager.Reset", `{"ResetType":"ForceRestart"}`},
		{"GET", "/TaskService/TaskMonitors/1", ``},
		{"GET", "/Registries/BiosAttributeRegistry.v1_0_0/BiosAttributeRegistry.json", ``},
		{"GET", "/Managers/iDRAC.Embedded.1/Jobs/JID_760000000001", ``},
	} {
		for _, p := range []string{"generic", "idrac", "ilo", "supermicro"} {
			f.Add(p, seed.method, seed.path, seed.body)
		}
	}
	f.Fuzz(func(t *testing.T, personality, method, path, body string) {
		p, err := LookupPersonality(personality)
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		clock := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		inv := Inventory{Disks: []Disk{{Name: "a", SizeBytes: 1 << 30}, {Name: "b", SizeBytes: 2 << 30}}}
		svc, err := NewService(Config{Personality: p.Name, Systems: []SystemConfig{{ID: "1", Backend: NewMemory(0, inv)}},
			Clock: clock, TaskDuration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		send := func(method, path, body string) {
			req, err := http.NewRequest(method, "http://bmc"+root+path, strings.NewReader(body))
			if err != nil {
				return
			}
			req.SetBasicAuth(DefaultUsername, DefaultPassword)
			w := httptest.NewRecorder()
			svc.ServeHTTP(w, req)
			if w.Code >= 500 {
				t.Fatalf("%s %s: status %d: %s", method, path, w.Code, w.Body)
			}
			if w.Code >= 400 && !strings.Contains(w.Body.String(), `"@Message.ExtendedInfo"`) {
				t.Fatalf("%s %s: %d without Redfish error body: %s", method, path, w.Code, w.Body)
			}
		}
		path = strings.ReplaceAll(path, "/Managers/BMC", "/Managers/"+p.ManagerID)
		path = strings.ReplaceAll(path, "/Storage/1", "/Storage/"+p.storageID())
		send(method, path, body)
		send(method, path, body) // twice: a repeat must be as safe
		send("POST", "/Systems/1/Actions/ComputerSystem.Reset", `{"ResetType":"ForceRestart"}`)
		clock.Advance(time.Hour)
		svc.Tasks()

		h := svc.byID["1"].hw
		h.mu.Lock()
		defer h.mu.Unlock()
		for name, v := range h.bios {
			a := lookupBiosAttr(name)
			raw, _ := json.Marshal(v)
			if a == nil {
				t.Fatalf("unknown attribute %s in BIOS", name)
			}
			if !a.ReadOnly {
				if _, e := checkBiosValue(name, raw); e != nil {
					t.Fatalf("BIOS %s=%s is invalid after %s %s %q", name, raw, method, path, body)
				}
			}
		}
		used := map[string]string{}
		for _, v := range append(h.volumes, h.creating...) {
			for _, d := range v.drives {
				if other, dup := used[d]; dup {
					t.Fatalf("drive %s in volumes %s and %s", d, other, v.id)
				}
				used[d] = v.id
			}
		}
	})
}
