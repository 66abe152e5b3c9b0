package bmcsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

const testTaskDuration = 10 * time.Second

// startClockLab starts one memory BMC whose tasks run on a manual clock.
func startClockLab(t *testing.T, personality string) (*BMC, *ManualClock) {
	t.Helper()
	clock := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := StartLab(LabConfig{N: 1, Personality: personality, Clock: clock, TaskDuration: testTaskDuration, Disks: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.BMCs[0], clock
}

func firstSystem(t *testing.T, c *gofish.APIClient) *schemas.ComputerSystem {
	t.Helper()
	systems, err := c.Service.Systems()
	if err != nil || len(systems) != 1 {
		t.Fatalf("systems %v %v", systems, err)
	}
	return systems[0]
}

// monitor GETs a task monitor and returns its status and the task's state.
func monitor(t *testing.T, b *BMC, uri string) (int, string) {
	t.Helper()
	u, p := b.Credentials()
	st, _, m := do(t, nil, "GET", b.URL+uri, u, p, nil)
	state, _ := m["TaskState"].(string)
	return st, state
}

// TestGofishBios reads the BIOS and its attribute registry, stages settings,
// checks they apply only at the next boot, and that bad settings change
// nothing; then ResetBios restores the defaults at the following boot.
func TestGofishBios(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc, _ := startClockLab(t, name)
			c := connect(t, bmc, true)
			sys := firstSystem(t, c)
			bios, err := sys.Bios()
			if err != nil {
				t.Fatalf("bios: %v", err)
			}
			inv := bmc.Backend(bmc.SystemIDs()[0]).Inventory()
			if bios.Attributes["ProcVirtualization"] != "Enabled" || bios.Attributes["SystemServiceTag"] != inv.SerialNumber {
				t.Fatalf("attributes %v", bios.Attributes)
			}
			if bios.AttributeRegistry != biosRegistryID {
				t.Errorf("AttributeRegistry %q", bios.AttributeRegistry)
			}

			// The registry is found through /redfish/v1/Registries.
			files, err := c.Service.Registries()
			if err != nil || len(files) != 1 || files[0].ID != bios.AttributeRegistry || len(files[0].Location) != 1 {
				t.Fatalf("registries %+v %v", files, err)
			}
			reg, err := schemas.GetAttributeRegistry(c, files[0].Location[0].URI)
			if err != nil {
				t.Fatalf("registry: %v", err)
			}
			byName := map[string]schemas.Attributes{}
			for _, a := range reg.RegistryEntries.Attributes {
				byName[a.AttributeName] = a
			}
			if a := byName["ProcVirtualization"]; a.Type != schemas.EnumerationAttributeType || len(a.Value) != 2 || !a.ResetRequired || a.ReadOnly {
				t.Errorf("ProcVirtualization entry %+v", a)
			}
			if a := byName["SystemServiceTag"]; !a.ReadOnly || !a.IsSystemUniqueProperty {
				t.Errorf("SystemServiceTag entry %+v", a)
			}
			if a := byName["AcPwrRcvryUserDelay"]; a.Type != schemas.IntegerAttributeType || a.UpperBound == nil || *a.UpperBound != 600 {
				t.Errorf("AcPwrRcvryUserDelay entry %+v", a)
			}
			if len(byName) != len(bios.Attributes) {
				t.Errorf("registry has %d attributes, BIOS %d", len(byName), len(bios.Attributes))
			}

			// Bad settings are refused and leave nothing pending.
			u, p := bmc.Credentials()
			settings := bios.ODataID + "/Settings"
			for _, bad := range []map[string]any{
				{"NoSuchAttribute": "x"},
				{"SystemServiceTag": "ABC"},
				{"ProcVirtualization": "Sometimes"},
				{"AcPwrRcvryUserDelay": 5},
				{"AcPwrRcvryUserDelay": "soon"},
				{"ProcVirtualization": "Disabled", "BootMode": "Floppy"},
			} {
				_, h, _ := do(t, nil, "GET", bmc.URL+settings, u, p, nil)
				st, _, m := doIfMatch(t, bmc, "PATCH", settings, h.Get("ETag"), map[string]any{"Attributes": bad})
				if st != http.StatusBadRequest {
					t.Errorf("PATCH %v: %d %v", bad, st, m)
				}
			}
			if got := pending(t, bmc, settings); got["ProcVirtualization"] == "Disabled" {
				t.Fatalf("refused PATCH left pending values %v", got)
			}

			// Good settings are pending until the next boot.
			if err := bios.UpdateBiosAttributes(schemas.SettingsAttributes{"ProcVirtualization": "Disabled", "AcPwrRcvryUserDelay": 120}); err != nil {
				t.Fatalf("update bios: %v", err)
			}
			if got := pending(t, bmc, settings); got["ProcVirtualization"] != "Disabled" || got["AcPwrRcvryUserDelay"] != 120.0 {
				t.Fatalf("pending %v", got)
			}
			if bios, _ = sys.Bios(); bios.Attributes["ProcVirtualization"] != "Enabled" {
				t.Fatalf("applied before a reboot: %v", bios.Attributes)
			}
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatal(err)
			}
			bios, _ = sys.Bios()
			if bios.Attributes["ProcVirtualization"] != "Disabled" || bios.Attributes["AcPwrRcvryUserDelay"] != 120.0 {
				t.Fatalf("after boot %v", bios.Attributes)
			}
			if got := pending(t, bmc, settings); got["ProcVirtualization"] == "Disabled" && !bmc.Personality().biosSettingsFull {
				t.Errorf("still pending after boot: %v", got)
			}

			if _, err := bios.ResetBios(); err != nil {
				t.Fatalf("reset bios: %v", err)
			}
			if _, err := sys.Reset(schemas.ForceRestartResetType); err != nil {
				t.Fatal(err)
			}
			if bios, _ = sys.Bios(); bios.Attributes["ProcVirtualization"] != "Enabled" || bios.Attributes["AcPwrRcvryUserDelay"] != 60.0 {
				t.Errorf("after ResetBios and boot %v", bios.Attributes)
			}
		})
	}
}

// pending returns the Attributes of the BIOS settings object.
func pending(t *testing.T, b *BMC, settings string) map[string]any {
	t.Helper()
	u, p := b.Credentials()
	st, _, m := do(t, nil, "GET", b.URL+settings, u, p, nil)
	if st != http.StatusOK {
		t.Fatalf("GET %s: %d", settings, st)
	}
	a, _ := m["Attributes"].(map[string]any)
	return a
}

// doIfMatch sends a request with basic auth and an If-Match header.
func doIfMatch(t *testing.T, b *BMC, method, path, etag string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	u, p := b.Credentials()
	c := &http.Client{Transport: headerTransport{"If-Match": etag}}
	return do(t, c, method, b.URL+path, u, p, body)
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestGofishStorageVolumes creates a RAID-1 volume through a task monitor,
// refuses bad requests, and deletes the volume again.
func TestGofishStorageVolumes(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc, clock := startClockLab(t, name)
			c := connect(t, bmc, true)
			sys := firstSystem(t, c)
			storage, err := sys.Storage()
			if err != nil || len(storage) != 1 {
				t.Fatalf("storage %v %v", storage, err)
			}
			st := storage[0]
			if len(st.StorageControllers) != 1 || !slices.Contains(st.StorageControllers[0].SupportedRAIDTypes, schemas.RAID1RAIDType) {
				t.Fatalf("controllers %+v", st.StorageControllers)
			}
			drives, err := st.Drives()
			if err != nil || len(drives) < 2 {
				t.Fatalf("drives %v %v", drives, err)
			}
			vpath := st.ODataID + "/Volumes"
			u, p := bmc.Credentials()
			two := []any{link(drives[0].ODataID), link(drives[1].ODataID)}
			for _, bad := range []map[string]any{
				{"RAIDType": "RAID7", "Links": map[string]any{"Drives": two}},
				{"RAIDType": "RAID5", "Links": map[string]any{"Drives": two}},
				{"Links": map[string]any{"Drives": two}},
				{"RAIDType": "RAID1", "Links": map[string]any{"Drives": []any{link(drives[0].ODataID), link(drives[0].ODataID)}}},
				{"RAIDType": "RAID1", "Links": map[string]any{"Drives": []any{link(drives[0].ODataID), link(st.ODataID + "/Drives/Nope")}}},
				{"RAIDType": "RAID1", "Links": map[string]any{"Drives": two}, "CapacityBytes": *drives[0].CapacityBytes + 1},
				{"RAIDType": "RAID1", "Links": map[string]any{"Drives": two}, "Colour": "red"},
			} {
				if code, _, m := do(t, nil, "POST", bmc.URL+vpath, u, p, bad); code != http.StatusBadRequest {
					t.Errorf("POST %v: %d %v", bad, code, m)
				}
			}
			if len(bmc.Tasks()) != 0 {
				t.Fatalf("refused requests made tasks: %v", bmc.Tasks())
			}

			code, h, _ := do(t, nil, "POST", bmc.URL+vpath, u, p, map[string]any{
				"RAIDType": "RAID1", "Name": "root", "Links": map[string]any{"Drives": two}})
			mon := h.Get("Location")
			if code != http.StatusAccepted || !strings.HasPrefix(mon, root+"/TaskService/TaskMonitors/") {
				t.Fatalf("create volume: %d Location %q", code, mon)
			}
			if code, _, m := do(t, nil, "POST", bmc.URL+vpath, u, p, map[string]any{"RAIDType": "RAID0",
				"Links": map[string]any{"Drives": []any{link(drives[0].ODataID)}}}); code != http.StatusConflict {
				// The first volume is not there yet, but its drives are taken.
				t.Fatalf("second create on a drive of a running create: %d %v", code, m)
			}
			clock.Advance(testTaskDuration / 2)
			if code, state := monitor(t, bmc, mon); code != http.StatusAccepted || state != TaskRunning {
				t.Fatalf("monitor halfway: %d %s", code, state)
			}
			if vols, _ := st.Volumes(); len(vols) != 0 {
				t.Fatalf("volume visible before its task completed: %v", vols)
			}
			clock.Advance(testTaskDuration)
			if code, state := monitor(t, bmc, mon); code != http.StatusOK || state != TaskCompleted {
				t.Fatalf("monitor after: %d %s", code, state)
			}
			vols, err := st.Volumes()
			if err != nil || len(vols) != 1 {
				t.Fatalf("volumes %v %v", vols, err)
			}
			var root1 *schemas.Volume
			for _, v := range vols {
				if v.Name == "root" {
					root1 = v
				}
			}
			if root1 == nil || root1.RAIDType != schemas.RAID1RAIDType || root1.CapacityBytes == nil || *root1.CapacityBytes != *drives[0].CapacityBytes {
				t.Fatalf("root volume %+v", root1)
			}
			if vd, err := root1.Drives(); err != nil || len(vd) != 2 {
				t.Errorf("root volume drives %v %v", vd, err)
			}
			if code, _, _ := do(t, nil, "POST", bmc.URL+vpath, u, p, map[string]any{"RAIDType": "RAID1",
				"Links": map[string]any{"Drives": two}}); code != http.StatusConflict {
				t.Errorf("create on used drives: %d", code)
			}

			code, h, _ = do(t, nil, "DELETE", bmc.URL+root1.ODataID, u, p, nil)
			if code != http.StatusAccepted {
				t.Fatalf("delete: %d", code)
			}
			clock.Advance(testTaskDuration)
			if code, state := monitor(t, bmc, h.Get("Location")); code != http.StatusOK || state != TaskCompleted {
				t.Fatalf("delete monitor: %d %s", code, state)
			}
			if vols, _ := st.Volumes(); len(vols) != 0 {
				t.Errorf("volumes after delete %v", vols)
			}
		})
	}
}

// TestGofishSimpleUpdate updates the BIOS and the BMC firmware: each update
// is a task, and the new version shows only after the next host boot (BIOS)
// or manager reset (BMC).
func TestGofishSimpleUpdate(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			bmc, clock := startClockLab(t, name)
			c := connect(t, bmc, true)
			us, err := c.Service.UpdateService()
			if err != nil {
				t.Fatalf("update service: %v", err)
			}
			version := func(id string) string {
				t.Helper()
				fw, err := us.FirmwareInventory()
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fw {
					if f.ID == id {
						return f.Version
					}
				}
				t.Fatalf("no %s in %v", id, fw)
				return ""
			}
			if version("BIOS") != "1.0.0" || version("BMC") != "1.0.0" {
				t.Fatalf("initial versions %s %s", version("BIOS"), version("BMC"))
			}
			info, err := us.SimpleUpdate(&schemas.UpdateServiceSimpleUpdateParameters{ImageURI: "http://10.0.2.2/fw/bios-2.19.1.bin"})
			if err != nil || info == nil || info.TaskMonitor == "" {
				t.Fatalf("simple update: %+v %v", info, err)
			}
			clock.Advance(testTaskDuration)
			if code, state := monitor(t, bmc, info.TaskMonitor); code != http.StatusOK || state != TaskCompleted {
				t.Fatalf("update monitor: %d %s", code, state)
			}
			if version("BIOS") != "1.0.0" {
				t.Fatal("BIOS version changed before a reboot")
			}
			sys := firstSystem(t, c)
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatal(err)
			}
			if v := version("BIOS"); v != "2.19.1" {
				t.Errorf("BIOS after reboot %s", v)
			}
			if sys = refresh(t, c, sys); sys.BiosVersion != "2.19.1" {
				t.Errorf("system BiosVersion %s", sys.BiosVersion)
			}

			info, err = us.SimpleUpdate(&schemas.UpdateServiceSimpleUpdateParameters{ImageURI: "https://10.0.2.2/fw/bmc.img",
				Targets: []string{us.ODataID + "/FirmwareInventory/BMC"}})
			if err != nil || info == nil {
				t.Fatalf("BMC update: %v", err)
			}
			clock.Advance(testTaskDuration)
			if code, _ := monitor(t, bmc, info.TaskMonitor); code != http.StatusOK {
				t.Fatalf("BMC update monitor %d", code)
			}
			mgrs, _ := c.Service.Managers()
			if _, err := mgrs[0].Reset(schemas.ForceRestartResetType); err != nil {
				t.Fatal(err)
			}
			c = connect(t, bmc, true) // the manager reset ended the session
			us, _ = c.Service.UpdateService()
			if v := version("BMC"); v != "1.0.1" {
				t.Errorf("BMC after manager reset %s", v)
			}
			u, p := bmc.Credentials()
			target := bmc.URL + us.ODataID + "/Actions/UpdateService.SimpleUpdate"
			for _, bad := range []map[string]any{{}, {"ImageURI": "ftp://x/y"}, {"ImageURI": "http://x/y", "Targets": []string{"/nope"}}} {
				if code, _, m := do(t, nil, "POST", target, u, p, bad); code != http.StatusBadRequest {
					t.Errorf("SimpleUpdate %v: %d %v", bad, code, m)
				}
			}
		})
	}
}

// TestConcurrentVolumeCreates: many clients ask for a RAID-1 on the same two
// drives at once; exactly one gets the drives (202), the others 409, and
// after the task one volume exists.
func TestConcurrentVolumeCreates(t *testing.T) {
	bmc, clock := startClockLab(t, "generic")
	u, p := bmc.Credentials()
	stpath := bmc.SystemPath("1") + "/Storage/1"
	body := map[string]any{"RAIDType": "RAID1", "Links": map[string]any{"Drives": []any{
		link(stpath + "/Drives/Disk.Bay.0"), link(stpath + "/Drives/Disk.Bay.1")}}}
	const n = 16
	codes := make(chan int, n)
	for range n {
		go func() {
			req, _ := http.NewRequest("POST", bmc.URL+stpath+"/Volumes", strings.NewReader(mustJSON(body)))
			req.SetBasicAuth(u, p)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	for range n {
		got[<-codes]++
	}
	if got[http.StatusAccepted] != 1 || got[http.StatusConflict] != n-1 {
		t.Fatalf("status counts %v, want one 202 and %d 409", got, n-1)
	}
	clock.Advance(testTaskDuration)
	if _, _, m := do(t, nil, "GET", bmc.URL+stpath+"/Volumes", u, p, nil); m["Members@odata.count"] != 1.0 {
		t.Errorf("volumes %v", m)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
