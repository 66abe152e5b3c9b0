package bmcsim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzPatchSystem feeds arbitrary PATCH bodies (untrusted client input) to a
// system: the service must answer 2xx or a Redfish 4xx error, never panic or 5xx,
// and the stored override must stay within the allowable values.
func FuzzPatchSystem(f *testing.F) {
	for _, seed := range []string{
		`{"Boot":{"BootSourceOverrideEnabled":"Once","BootSourceOverrideTarget":"Pxe"}}`,
		`{"Boot":{"BootSourceOverrideMode":"UEFI"}}`,
		`{"Boot":{"BootSourceOverrideTarget":null}}`,
		`{"Boot":[]}`, `{"AssetTag":"rack-1"}`, `{"@odata.etag":"x"}`, `{}`, ``, `null`, `[`, `{"Boot":{"BootOrder":[]}}`,
	} {
		f.Add("idrac", seed)
		f.Add("supermicro", seed)
		f.Add("generic", seed)
	}
	f.Fuzz(func(t *testing.T, personality, body string) {
		p, err := LookupPersonality(personality)
		if err != nil {
			return
		}
		mem := NewMemory(0, Inventory{})
		svc, err := NewService(Config{Personality: p.Name, Systems: []SystemConfig{{Backend: mem}}})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPatch, svc.SystemPath(svc.SystemIDs()[0]), strings.NewReader(body))
		req.SetBasicAuth(DefaultUsername, DefaultPassword)
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, req)
		if w.Code >= 500 || (w.Code >= 300 && w.Code < 400) {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if w.Code >= 400 && !strings.Contains(w.Body.String(), `"@Message.ExtendedInfo"`) {
			t.Fatalf("error without Redfish body for %q: %s", body, w.Body)
		}
		b, _ := mem.BootOverride(t.Context())
		if !contains(p.BootTargets, b.Target) || !contains([]string{ModeLegacy, ModeUEFI}, b.Mode) ||
			!contains([]string{OverrideDisabled, OverrideOnce, OverrideContinuous}, b.Enabled) {
			t.Fatalf("override %+v after %q", b, body)
		}
	})
}

// FuzzServeHTTP sends arbitrary methods, paths and bodies to every
// personality: no panic, no 5xx, and every error is a Redfish error body.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []string{"/redfish/v1", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
		"/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD/Actions/VirtualMedia.InsertMedia",
		"/redfish/v1/Systems/1/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia", "/redfish/v1/SessionService/Sessions/1",
		"/redfish/v1/Systems/1/EthernetInterfaces/NIC0", "/redfish/v1/Chassis/1/x", "/redfish/v1//", "/redfish/v1/Managers/1/VirtualMedia/2"} {
		for _, m := range []string{"GET", "POST", "PATCH", "DELETE"} {
			f.Add("generic", m, seed, `{"ResetType":"On","Image":"http://h/i.iso"}`)
			f.Add("ilo", m, seed, `{}`)
		}
	}
	f.Fuzz(func(t *testing.T, personality, method, path, body string) {
		p, err := LookupPersonality(personality)
		if err != nil || !strings.HasPrefix(path, "/") {
			return
		}
		svc, err := NewService(Config{Personality: p.Name, Systems: []SystemConfig{{Backend: NewMemory(0, Inventory{})}}})
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(method, "http://bmc"+path, strings.NewReader(body))
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
	})
}
