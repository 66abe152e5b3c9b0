package bmcsim

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestHardwareFaultsThroughAdminAPI injects, for every personality and
// through the admin API, a BMC error mid-task, a task that never completes,
// a BIOS setting that does not stick and a BMC unreachable while it reboots,
// and checks each breaks exactly what it says; clearing the faults makes
// tasks complete again.
func TestHardwareFaultsThroughAdminAPI(t *testing.T) {
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			clock := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			lab, err := StartLab(LabConfig{N: 1, Personality: name, Clock: clock, TaskDuration: testTaskDuration, Disks: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lab.Close() })
			admin := httptest.NewServer(lab.AdminHandler())
			t.Cleanup(admin.Close)
			setFaults := func(body string) {
				t.Helper()
				if st, _, m := do(t, nil, "PUT", admin.URL+"/bmcs/0/faults", "", "", body); st != http.StatusOK {
					t.Fatalf("PUT faults %s: %d %v", body, st, m)
				}
			}
			bmc := lab.BMCs[0]
			u, p := bmc.Credentials()
			spath := bmc.SystemPath(bmc.SystemIDs()[0])
			stpath := spath + "/Storage/" + bmc.Personality().storageID()
			raid1 := map[string]any{"RAIDType": "RAID1", "Links": map[string]any{"Drives": []any{
				link(stpath + "/Drives/Disk.Bay.0"), link(stpath + "/Drives/Disk.Bay.1")}}}
			volumes := func() float64 {
				t.Helper()
				_, _, m := do(t, nil, "GET", bmc.URL+stpath+"/Volumes", u, p, nil)
				return m["Members@odata.count"].(float64)
			}

			// BMC 5xx mid-task: the monitor answers 500, the task is an
			// Exception and the volume never appears.
			setFaults(`{"task_error":true}`)
			st, h, _ := do(t, nil, "POST", bmc.URL+stpath+"/Volumes", u, p, raid1)
			if st != http.StatusAccepted {
				t.Fatalf("create: %d", st)
			}
			mon := h.Get("Location")
			clock.Advance(testTaskDuration / 4)
			if code, state := monitor(t, bmc, mon); code != http.StatusAccepted || state != TaskRunning {
				t.Fatalf("before the fault bites: %d %s", code, state)
			}
			clock.Advance(testTaskDuration)
			if code, _ := monitor(t, bmc, mon); code != http.StatusInternalServerError {
				t.Fatalf("monitor with task_error: %d", code)
			}
			for id, state := range bmc.Tasks() {
				if state != TaskException {
					t.Errorf("task %s %s, want Exception", id, state)
				}
			}
			if n := volumes(); n != 0 {
				t.Errorf("failed task created %v volumes", n)
			}

			// A task that never completes.
			setFaults(`{"task_hang":true}`)
			st, h, _ = do(t, nil, "POST", bmc.URL+"/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", u, p,
				map[string]any{"ImageURI": "http://10.0.2.2/bios-9.9.9.bin"})
			if st != http.StatusAccepted {
				t.Fatalf("update: %d", st)
			}
			mon = h.Get("Location")
			clock.Advance(100 * time.Hour)
			if code, state := monitor(t, bmc, mon); code != http.StatusAccepted || state != TaskRunning {
				t.Fatalf("hung task: %d %s", code, state)
			}
			_, _, task := do(t, nil, "GET", bmc.URL+"/redfish/v1/TaskService/Tasks/"+mon[len("/redfish/v1/TaskService/TaskMonitors/"):], u, p, nil)
			if task["PercentComplete"] != 50.0 {
				t.Errorf("hung task %v", task)
			}

			// Clearing the faults lets the hung task finish and new ones run.
			setFaults(`{}`)
			clock.Advance(testTaskDuration)
			if code, state := monitor(t, bmc, mon); code != http.StatusOK || state != TaskCompleted {
				t.Fatalf("after clearing: %d %s", code, state)
			}
			if st, _, _ := do(t, nil, "POST", bmc.URL+stpath+"/Volumes", u, p, raid1); st != http.StatusAccepted {
				t.Fatalf("create after clearing: %d", st)
			}
			clock.Advance(testTaskDuration)
			if n := volumes(); n != 1 {
				t.Errorf("volumes after clearing %v", n)
			}

			// A setting that does not stick: dropped at the boot, the others applied.
			setFaults(`{"unsticky_settings":["ProcVirtualization"]}`)
			settings := spath + "/Bios/Settings"
			_, h, _ = do(t, nil, "GET", bmc.URL+settings, u, p, nil)
			if st, _, m := doIfMatch(t, bmc, "PATCH", settings, h.Get("ETag"), map[string]any{"Attributes": map[string]any{
				"ProcVirtualization": "Disabled", "SriovGlobalEnable": "Enabled"}}); st >= 300 {
				t.Fatalf("PATCH: %d %v", st, m)
			}
			if st, _, _ := do(t, nil, "POST", bmc.URL+spath+"/Actions/ComputerSystem.Reset", u, p, map[string]any{"ResetType": "On"}); st >= 300 {
				t.Fatalf("power on: %d", st)
			}
			_, _, bios := do(t, nil, "GET", bmc.URL+spath+"/Bios", u, p, nil)
			attrs := bios["Attributes"].(map[string]any)
			if attrs["ProcVirtualization"] != "Enabled" || attrs["SriovGlobalEnable"] != "Enabled" {
				t.Errorf("with ProcVirtualization unsticky: %v", attrs)
			}

			// A BMC that is unreachable while it reboots.
			setFaults(`{"manager_reset_downtime":"90s"}`)
			mpath := "/redfish/v1/Managers/" + bmc.Personality().ManagerID
			if st, _, _ := do(t, nil, "POST", bmc.URL+mpath+"/Actions/Manager.Reset", u, p, map[string]any{"ResetType": "GracefulRestart"}); st >= 300 {
				t.Fatalf("manager reset: %d", st)
			}
			req, _ := http.NewRequest("GET", bmc.URL+mpath, nil)
			req.SetBasicAuth(u, p)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("BMC answered %d while rebooting", resp.StatusCode)
			}
			clock.Advance(90 * time.Second)
			if st, _, _ := do(t, nil, "GET", bmc.URL+mpath, u, p, nil); st != http.StatusOK {
				t.Errorf("after the reboot: %d", st)
			}

			for _, bad := range []string{`{"unsticky_settings":["NoSuchAttribute"]}`, `{"task_error":true,"task_hang":true}`, `{"manager_reset_downtime":"-1s"}`} {
				if st, _, _ := do(t, nil, "PUT", admin.URL+"/bmcs/0/faults", "", "", bad); st != http.StatusBadRequest {
					t.Errorf("PUT faults %s: %d", bad, st)
				}
			}
		})
	}
}
