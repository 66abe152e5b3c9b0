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
