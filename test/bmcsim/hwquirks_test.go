package bmcsim

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

const biosSettingsPath = "/Bios/Settings"

// TestIdracBiosJob: a BIOS PATCH becomes a scheduled JID_ job that completes
// at the next reboot; ApplyTime Immediate reboots the host and completes it.
func TestIdracBiosJob(t *testing.T) {
	bmc, _ := startClockLab(t, "idrac")
	u, p := bmc.Credentials()
	sys := bmc.SystemPath(bmc.SystemIDs()[0])
	mem := bmc.Backend(bmc.SystemIDs()[0]).(*Memory)
	st, h, _ := do(t, nil, "PATCH", bmc.URL+sys+biosSettingsPath, u, p, map[string]any{
		"Attributes": map[string]any{"SriovGlobalEnable": "Enabled"}, "@Redfish.SettingsApplyTime": map[string]any{"ApplyTime": "OnReset"}})
	job := h.Get("Location")
	if st != http.StatusAccepted || !strings.HasPrefix(job, "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_") || len(job) != len("/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_")+12 {
		t.Fatalf("PATCH: %d Location %q", st, job)
	}
	jobState := func() string {
		t.Helper()
		st, _, m := do(t, nil, "GET", bmc.URL+job, u, p, nil)
		if st != http.StatusOK || m["JobType"] != "BIOSConfiguration" {
			t.Fatalf("job: %d %v", st, m)
		}
		return m["JobState"].(string)
	}
	if s := jobState(); s != "Scheduled" {
		t.Fatalf("job before reboot %s", s)
	}
	_, _, jobs := do(t, nil, "GET", bmc.URL+"/redfish/v1/Managers/iDRAC.Embedded.1/Jobs", u, p, nil)
	if jobs["Members@odata.count"] != 1.0 {
		t.Errorf("job queue %v", jobs)
	}
	if err := mem.Reset(context.Background(), ResetOn); err != nil {
		t.Fatal(err)
	}
	if s := jobState(); s != "Completed" {
		t.Fatalf("job after boot %s", s)
	}
	if st, _, m := do(t, nil, "GET", bmc.URL+sys+"/Bios", u, p, nil); st != 200 || m["Attributes"].(map[string]any)["SriovGlobalEnable"] != "Enabled" {
		t.Fatalf("bios after job: %v", m["Attributes"])
	}

	// Immediate: the host reboots now and the setting is applied.
	boots := len(mem.Boots())
	st, h, _ = do(t, nil, "PATCH", bmc.URL+sys+biosSettingsPath, u, p, map[string]any{
		"Attributes": map[string]any{"ProcHyperThreading": "Disabled"}, "@Redfish.SettingsApplyTime": map[string]any{"ApplyTime": "Immediate"}})
	if st != http.StatusAccepted || len(mem.Boots()) != boots+1 {
		t.Fatalf("Immediate: %d, boots %d → %d", st, boots, len(mem.Boots()))
	}
	job = h.Get("Location")
	if s := jobState(); s != "Completed" {
		t.Errorf("Immediate job %s", s)
	}
	if _, _, m := do(t, nil, "GET", bmc.URL+sys+"/Bios", u, p, nil); m["Attributes"].(map[string]any)["ProcHyperThreading"] != "Disabled" {
		t.Errorf("Immediate not applied: %v", m["Attributes"])
	}
	if st, _, _ := do(t, nil, "PATCH", bmc.URL+sys+biosSettingsPath, u, p, map[string]any{
		"Attributes": map[string]any{"ProcHyperThreading": "Enabled"}, "@Redfish.SettingsApplyTime": map[string]any{"ApplyTime": "Never"}}); st != 400 {
		t.Errorf("bad ApplyTime: %d", st)
	}
}

// TestGenericBiosApplyTimeOnResetOnly: the other personalities accept only
// OnReset and answer without a job.
func TestGenericBiosApplyTimeOnResetOnly(t *testing.T) {
	for _, name := range []string{"generic", "ilo", "supermicro"} {
		t.Run(name, func(t *testing.T) {
			bmc, _ := startClockLab(t, name)
			path := bmc.SystemPath(bmc.SystemIDs()[0]) + biosSettingsPath
			u, p := bmc.Credentials()
			_, h, _ := do(t, nil, "GET", bmc.URL+path, u, p, nil)
			body := map[string]any{"Attributes": map[string]any{"ProcHyperThreading": "Disabled"},
				"@Redfish.SettingsApplyTime": map[string]any{"ApplyTime": "Immediate"}}
			if st, _, _ := doIfMatch(t, bmc, "PATCH", path, h.Get("ETag"), body); st != http.StatusBadRequest {
				t.Errorf("Immediate accepted: %d", st)
			}
			body["@Redfish.SettingsApplyTime"] = map[string]any{"ApplyTime": "OnReset"}
			st, hh, _ := doIfMatch(t, bmc, "PATCH", path, h.Get("ETag"), body)
			if st != http.StatusOK && st != http.StatusNoContent || hh.Get("Location") != "" {
				t.Errorf("OnReset: %d Location %q", st, hh.Get("Location"))
			}
		})
	}
}

// TestIloBiosPendingSettings: iLO's settings object is the whole pending
// attribute set, and a PATCH answers 200 with SystemResetRequired.
func TestIloBiosPendingSettings(t *testing.T) {
	bmc, _ := startClockLab(t, "ilo")
	u, p := bmc.Credentials()
	path := bmc.SystemPath(bmc.SystemIDs()[0]) + biosSettingsPath
	if got := pending(t, bmc, path); len(got) != len(biosAttrs) || got["ProcVirtualization"] != "Enabled" {
		t.Fatalf("pending settings before any PATCH: %v", got)
	}
	st, _, m := do(t, nil, "PATCH", bmc.URL+path, u, p, map[string]any{"Attributes": map[string]any{"ProcVirtualization": "Disabled"}})
	if code, id := errorCode(t, m); st != http.StatusOK || code != "iLO.0.10.ExtendedInfo" || id != "iLO.2.15.SystemResetRequired" {
		t.Fatalf("PATCH: %d %s %s", st, code, id)
	}
	if got := pending(t, bmc, path); len(got) != len(biosAttrs) || got["ProcVirtualization"] != "Disabled" || got["BootMode"] != "Uefi" {
		t.Errorf("pending settings after PATCH: %v", got)
	}
}

// TestSupermicroBiosNeedsETag: Supermicro refuses a BIOS settings PATCH
// without If-Match (428) and with a stale one (412); the current ETag works.
func TestSupermicroBiosNeedsETag(t *testing.T) {
	bmc, _ := startClockLab(t, "supermicro")
	u, p := bmc.Credentials()
	path := bmc.SystemPath(bmc.SystemIDs()[0]) + biosSettingsPath
	body := map[string]any{"Attributes": map[string]any{"ProcVirtualization": "Disabled"}}
	if st, _, m := do(t, nil, "PATCH", bmc.URL+path, u, p, body); st != http.StatusPreconditionRequired {
		t.Fatalf("no If-Match: %d %v", st, m)
	}
	if st, _, _ := doIfMatch(t, bmc, "PATCH", path, `"0000000000000000"`, body); st != http.StatusPreconditionFailed {
		t.Fatalf("stale If-Match: %d", st)
	}
	if got := pending(t, bmc, path); len(got) != 0 {
		t.Fatalf("refused PATCHes staged %v", got)
	}
	_, h, _ := do(t, nil, "GET", bmc.URL+path, u, p, nil)
	if st, _, _ := doIfMatch(t, bmc, "PATCH", path, h.Get("ETag"), body); st != http.StatusNoContent {
		t.Fatalf("current If-Match: %d", st)
	}
	if got := pending(t, bmc, path); got["ProcVirtualization"] != "Disabled" {
		t.Errorf("pending %v", got)
	}
	// Generic does not insist.
	g, _ := startClockLab(t, "generic")
	gu, gp := g.Credentials()
	if st, _, _ := do(t, nil, "PATCH", g.URL+g.SystemPath("1")+biosSettingsPath, gu, gp, body); st != http.StatusNoContent {
		t.Errorf("generic without If-Match: %d", st)
	}
}
