package bmcsim

import (
	"encoding/json"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func TestIdracTargetNeedsEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    bootPatch
		err  bool
	}{
		{"target alone", bootPatch{Target: ptr(TargetPxe)}, true},
		{"target and enabled", bootPatch{Target: ptr(TargetPxe), Enabled: ptr(OverrideOnce)}, false},
		{"enabled alone", bootPatch{Enabled: ptr(OverrideDisabled)}, false},
		{"mode alone", bootPatch{Mode: ptr(ModeUEFI)}, false},
	} {
		e := idracTargetNeedsEnabled(BootOverride{}, tc.p)
		if (e != nil) != tc.err {
			t.Errorf("%s: %v", tc.name, e)
		}
		if e != nil && (e.Status != 400 || !strings.HasSuffix(e.Info[0].MessageID, "SYS444")) {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
}

func TestIloModeNotWritable(t *testing.T) {
	if e := iloModeNotWritable(BootOverride{}, bootPatch{Target: ptr(TargetPxe), Enabled: ptr(OverrideOnce)}); e != nil {
		t.Errorf("patch without mode rejected: %v", e)
	}
	e := iloModeNotWritable(BootOverride{Mode: ModeUEFI}, bootPatch{Mode: ptr(ModeUEFI)})
	if e == nil || e.Status != 400 || e.Code != "iLO.0.10.ExtendedInfo" || !strings.HasSuffix(e.Info[0].MessageID, "PropertyNotWritable") {
		t.Errorf("unchanged mode accepted or wrong error: %+v", e)
	}
}

func TestSupermicroModeRevertsWhenOmitted(t *testing.T) {
	next := BootOverride{Enabled: OverrideOnce, Target: TargetPxe, Mode: ModeUEFI}
	if got := supermicroModeRevertsWhenOmitted(next, bootPatch{Target: ptr(TargetPxe)}); got.Mode != ModeLegacy {
		t.Errorf("omitted mode kept %s", got.Mode)
	}
	if got := supermicroModeRevertsWhenOmitted(next, bootPatch{Mode: ptr(ModeUEFI)}); got.Mode != ModeUEFI {
		t.Errorf("explicit mode became %s", got.Mode)
	}
}

// TestQuirksOverHTTP checks that each personality applies its quirk and its
// response style on the wire.
func TestQuirksOverHTTP(t *testing.T) {
	for _, tc := range []struct {
		personality, body string
		status            int
		wantCode, wantMsg string
		wantMode          string
	}{
		{"generic", `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`, 204, "", "", ModeUEFI},
		{"idrac", `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`, 400, "GeneralError", "SYS444", ModeUEFI},
		{"idrac", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`, 200, "", "", ModeUEFI},
		{"ilo", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideMode":"UEFI"}}`, 400, "iLO.0.10.ExtendedInfo", "PropertyNotWritable", ModeUEFI},
		{"ilo", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`, 200, "iLO.0.10.ExtendedInfo", "Success", ModeUEFI},
		{"supermicro", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`, 204, "", "", ModeLegacy},
		{"supermicro", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once","BootSourceOverrideMode":"UEFI"}}`, 204, "", "", ModeUEFI},
	} {
		t.Run(tc.personality, func(t *testing.T) {
			b := startLab(t, 1, tc.personality).BMCs[0]
			u, p := b.Credentials()
			id := b.SystemIDs()[0]
			st, _, m := do(t, nil, "PATCH", b.URL+b.SystemPath(id), u, p, tc.body)
			if st != tc.status {
				t.Fatalf("%s: status %d, want %d (%v)", tc.body, st, tc.status, m)
			}
			if tc.wantCode != "" {
				code, msgID := errorCode(t, m)
				if !strings.HasSuffix(code, tc.wantCode) || !strings.HasSuffix(msgID, tc.wantMsg) {
					t.Errorf("%s: code %s message %s", tc.body, code, msgID)
				}
			}
			bo, _ := b.Backend(id).BootOverride(t.Context())
			if bo.Mode != tc.wantMode {
				t.Errorf("%s: mode %s, want %s", tc.body, bo.Mode, tc.wantMode)
			}
		})
	}
}

func TestSupermicroInsertImageOnly(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"Image":"http://x/a.iso"}`, true},
		{`{"Image":"http://x/a.iso","UserName":"u","Password":"p"}`, true},
		{`{"Image":"http://x/a.iso","Inserted":true}`, false},
		{`{"Image":"http://x/a.iso","WriteProtected":true}`, false},
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.body), &m); err != nil {
			t.Fatal(err)
		}
		e := supermicroInsertImageOnly(m)
		if (e == nil) != tc.ok {
			t.Errorf("%s: %v", tc.body, e)
		}
		if e != nil && (e.Status != 400 || !strings.HasSuffix(e.Info[0].MessageID, "PropertyUnknown")) {
			t.Errorf("%s: %+v", tc.body, e)
		}
	}
	// On the wire: the same body is fine for generic and rejected by supermicro.
	for name, want := range map[string]int{"generic": 204, "supermicro": 400} {
		b := startLab(t, 1, name).BMCs[0]
		u, p := b.Credentials()
		path := b.SystemPath(b.SystemIDs()[0]) + "/VirtualMedia/CD1"
		if b.Personality().VirtualMediaOnManager {
			path = "/redfish/v1/Managers/" + b.Personality().ManagerID + "/VirtualMedia/CD1"
		}
		st, _, _ := do(t, nil, "POST", b.URL+path+"/Actions/VirtualMedia.InsertMedia", u, p,
			`{"Image":"http://x/a.iso","Inserted":true,"WriteProtected":true}`)
		if st != want {
			t.Errorf("%s: insert with Inserted: %d, want %d", name, st, want)
		}
	}
}
