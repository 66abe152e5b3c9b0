package bmcsim

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

func connect(t *testing.T, b *BMC, basic bool) *gofish.APIClient {
	t.Helper()
	u, p := b.Credentials()
	c, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{
		Endpoint: b.URL, Username: u, Password: p, BasicAuth: basic})
	if err != nil {
		t.Fatalf("connect to %s: %v", b.URL, err)
	}
	return c
}

func redfishErr(t *testing.T, err error) *schemas.Error {
	t.Helper()
	var e *schemas.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a Redfish error, got %v", err)
	}
	return e
}

func refresh(t *testing.T, c *gofish.APIClient, sys *schemas.ComputerSystem) *schemas.ComputerSystem {
	t.Helper()
	s, err := schemas.GetComputerSystem(c, sys.ODataID)
	if err != nil {
		t.Fatalf("get system: %v", err)
	}
	return s
}

// TestGofishEveryPersonality drives every resource and action through the
// gofish client the controller's driver uses, for each personality.
func TestGofishEveryPersonality(t *testing.T) {
	wantSystemID := map[string]string{"generic": "1", "idrac": "System.Embedded.1", "ilo": "1", "supermicro": "1"}
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			bmc := lab.BMCs[0]
			mem := bmc.Backend(bmc.SystemIDs()[0]).(*Memory)
			c := connect(t, bmc, false)
			if bmc.Sessions() != 1 {
				t.Fatalf("sessions after login = %d, want 1", bmc.Sessions())
			}

			systems, err := c.Service.Systems()
			if err != nil || len(systems) != 1 {
				t.Fatalf("systems: %v %v", systems, err)
			}
			sys := systems[0]
			if sys.ID != wantSystemID[name] || sys.PowerState != schemas.OffPowerState {
				t.Fatalf("system %q power %q", sys.ID, sys.PowerState)
			}
			if !slices.Contains(sys.Boot.AllowableBootSourceOverrideTargetValues, schemas.PxeBootSource) {
				t.Errorf("allowable targets %v lack Pxe", sys.Boot.AllowableBootSourceOverrideTargetValues)
			}
			types, err := sys.GetSupportedResetTypes()
			if err != nil || len(types) != len(bmc.Personality().ResetTypes) {
				t.Fatalf("reset types %v %v", types, err)
			}
			if sys.ProcessorSummary.Count == nil || *sys.ProcessorSummary.Count == 0 || sys.MemorySummary.TotalSystemMemoryGiB == nil || *sys.MemorySummary.TotalSystemMemoryGiB == 0 {
				t.Errorf("no CPU/memory summary: %+v %+v", sys.ProcessorSummary, sys.MemorySummary)
			}
			nics, err := sys.EthernetInterfaces()
			if err != nil || len(nics) != 1 || nics[0].MACAddress != mem.Inventory().NICs[0].MAC {
				t.Errorf("NICs %v %v", nics, err)
			}

			// Power on, one-time PXE, restart consumes it.
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatalf("reset On: %v", err)
			}
			if sys = refresh(t, c, sys); sys.PowerState != schemas.OnPowerState {
				t.Fatalf("power after On = %s", sys.PowerState)
			}
			if err := sys.SetBoot(&schemas.Boot{BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
				BootSourceOverrideTarget: schemas.PxeBootSource}); err != nil {
				t.Fatalf("set boot Pxe/Once: %v", err)
			}
			sys = refresh(t, c, sys)
			if sys.Boot.BootSourceOverrideEnabled != schemas.OnceBootSourceOverrideEnabled || sys.Boot.BootSourceOverrideTarget != schemas.PxeBootSource {
				t.Fatalf("boot after PATCH = %+v", sys.Boot)
			}
			if _, err := sys.Reset(schemas.ForceRestartResetType); err != nil {
				t.Fatalf("ForceRestart: %v", err)
			}
			if sys = refresh(t, c, sys); sys.Boot.BootSourceOverrideEnabled != schemas.DisabledBootSourceOverrideEnabled {
				t.Errorf("Once override not used up: %+v", sys.Boot)
			}
			// Continuous stays.
			if err := sys.SetBoot(&schemas.Boot{BootSourceOverrideEnabled: schemas.ContinuousBootSourceOverrideEnabled,
				BootSourceOverrideTarget: schemas.HddBootSource}); err != nil {
				t.Fatalf("set boot Hdd/Continuous: %v", err)
			}
			for range 2 {
				if _, err := sys.Reset(schemas.ForceRestartResetType); err != nil {
					t.Fatal(err)
				}
			}
			boots := mem.Boots()
			var targets []string
			for _, b := range boots {
				targets = append(targets, b.Target)
			}
			if want := []string{TargetNone, TargetPxe, TargetHdd, TargetHdd}; !slices.Equal(targets, want) {
				t.Errorf("boot targets %v, want %v", targets, want)
			}

			// Every allowed reset type is accepted and does what it says.
			for _, rt := range bmc.Personality().ResetTypes {
				if _, err := sys.Reset(schemas.ResetType(rt)); err != nil {
					t.Errorf("reset %s: %v", rt, err)
				}
				ps := refresh(t, c, sys).PowerState
				switch rt {
				case ResetForceOff, ResetGracefulShutdown:
					if ps != schemas.OffPowerState {
						t.Errorf("after %s power is %s", rt, ps)
					}
					_, _ = sys.Reset(schemas.OnResetType)
				case ResetPushPowerButton:
					if ps != schemas.OffPowerState {
						t.Errorf("power button on a running system left it %s", ps)
					}
					_, _ = sys.Reset(schemas.OnResetType)
				case ResetOn, ResetForceOn, ResetForceRestart, ResetGracefulRestart, ResetPowerCycle, ResetNmi:
					if ps != schemas.OnPowerState {
						t.Errorf("after %s power is %s", rt, ps)
					}
				}
			}
			// A type outside the allowable values is rejected by the service.
			resp, err := c.Post(sys.ODataID+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "Teleport"})
			if err == nil {
				resp.Body.Close()
				t.Fatal("bad reset type accepted")
			}
			if e := redfishErr(t, err); e.HTTPReturnedStatusCode != http.StatusBadRequest || len(e.ExtendedInfos) == 0 {
				t.Errorf("bad reset type: %d %+v", e.HTTPReturnedStatusCode, e)
			}

			// Bad boot values give 400 with a Base PropertyValueNotInList.
			resp, err = c.Patch(sys.ODataID, map[string]any{"Boot": map[string]string{
				"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Floppy9"}})
			if err == nil {
				resp.Body.Close()
				t.Fatal("bad target accepted")
			}
			if e := redfishErr(t, err); e.HTTPReturnedStatusCode != 400 || !strings.Contains(e.Code+e.ExtendedInfos[0].MessageID, "PropertyValueNotInList") {
				t.Errorf("bad target: %d %s %+v", e.HTTPReturnedStatusCode, e.Code, e.ExtendedInfos)
			}

			// Virtual media lives under the manager or the system, by personality.
			var vms []*schemas.VirtualMedia
			if bmc.Personality().VirtualMediaOnManager {
				mgrs, err := c.Service.Managers()
				if err != nil || len(mgrs) != 1 {
					t.Fatalf("managers %v %v", mgrs, err)
				}
				vms, err = mgrs[0].VirtualMedia()
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if vms, err = sys.VirtualMedia(); err != nil {
					t.Fatal(err)
				}
			}
			if len(vms) != 1 || !vms[0].SupportsMediaInsert || !slices.Contains(vms[0].MediaTypes, schemas.CDVirtualMediaType) {
				t.Fatalf("virtual media %+v", vms)
			}
			vm := vms[0]
			const iso = "http://10.0.2.2:8080/boot.iso"
			if _, err := vm.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: iso}); err != nil {
				t.Fatalf("insert media: %v", err)
			}
			vm, err = schemas.GetObject[schemas.VirtualMedia](c, vm.ODataID)
			if err != nil || vm.Image != iso || vm.Inserted == nil || !*vm.Inserted {
				t.Fatalf("media after insert: %+v %v", vm, err)
			}
			if _, err := vm.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: iso}); err == nil {
				t.Error("second insert accepted")
			} else if e := redfishErr(t, err); e.HTTPReturnedStatusCode != http.StatusConflict {
				t.Errorf("second insert: %d", e.HTTPReturnedStatusCode)
			}
			if _, err := vm.EjectMedia(); err != nil {
				t.Fatalf("eject: %v", err)
			}
			if m, _ := mem.Media(context.Background()); m.Inserted {
				t.Error("still inserted after eject")
			}

			// Logout ends the session; the old token is then refused.
			sess, _ := c.GetSession()
			c.Logout()
			if bmc.Sessions() != 0 {
				t.Errorf("sessions after logout = %d", bmc.Sessions())
			}
			stale, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{Endpoint: bmc.URL,
				Session: &gofish.Session{ID: sess.ID, Token: sess.Token}})
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := stale.Get("/redfish/v1/Systems"); err == nil {
				resp.Body.Close()
				t.Error("stale token accepted")
			} else if e := redfishErr(t, err); e.HTTPReturnedStatusCode != http.StatusUnauthorized {
				t.Errorf("stale token: %d", e.HTTPReturnedStatusCode)
			}

			// Basic auth works without sessions.
			bc := connect(t, bmc, true)
			if s, err := bc.Service.Systems(); err != nil || len(s) != 1 {
				t.Errorf("basic auth systems: %v", err)
			}
			if bmc.Sessions() != 0 {
				t.Error("basic auth created a session")
			}
		})
	}
}

func TestHTTPStatusCodes(t *testing.T) {
	lab := startLab(t, 1, "generic")
	b := lab.BMCs[0]
	u, p := b.Credentials()
	sys := b.URL + b.SystemPath(b.SystemIDs()[0])

	st, _, m := do(t, nil, "GET", b.URL+"/redfish/v1/", "", "", nil)
	if st != 200 || m["@odata.id"] != "/redfish/v1" || m["@odata.type"] == nil || m["@odata.context"] == nil {
		t.Errorf("service root without auth: %d %v", st, m)
	}
	st, h, m := do(t, nil, "GET", sys, "", "", nil)
	if st != 401 || h.Get("WWW-Authenticate") == "" {
		t.Errorf("no credentials: %d %v", st, h)
	}
	if code, _ := errorCode(t, m); !strings.HasPrefix(code, "Base.1.") {
		t.Errorf("401 code %q", code)
	}
	if st, _, _ := do(t, nil, "GET", sys, u, "wrong", nil); st != 401 {
		t.Errorf("wrong password: %d", st)
	}
	st, h, m = do(t, nil, "GET", sys, u, p, nil)
	if st != 200 || h.Get("ETag") == "" || m["@odata.type"] != "#ComputerSystem.v1_20_0.ComputerSystem" {
		t.Errorf("system: %d %v", st, h)
	}
	etag := h.Get("ETag")
	if st, _, m := do(t, nil, "GET", b.URL+"/redfish/v1/Systems/nope", u, p, nil); st != 404 {
		t.Errorf("unknown system: %d", st)
	} else if _, id := errorCode(t, m); !strings.HasSuffix(id, "ResourceNotFound") {
		t.Errorf("404 message %s", id)
	}
	if st, h, _ := do(t, nil, "DELETE", sys, u, p, nil); st != 405 || h.Get("Allow") == "" {
		t.Errorf("DELETE system: %d %v", st, h)
	}
	if st, _, _ := do(t, nil, "PATCH", sys, u, p, `{"Boot":`); st != 400 {
		t.Errorf("malformed JSON: %d", st)
	}
	for _, tc := range []struct {
		body string
		want string
	}{
		{`{"Boot":{"BootSourceOverrideEnabled":"Sometimes"}}`, "PropertyValueNotInList"},
		{`{"Boot":{"BootSourceOverrideTarget":7}}`, "PropertyValueTypeError"},
		{`{"Boot":{"BootOrder":["a"]}}`, "PropertyNotWritable"},
		{`{"PowerState":"On"}`, "PropertyNotWritable"},
		{`{"Frobnicate":1}`, "PropertyUnknown"},
	} {
		st, _, m := do(t, nil, "PATCH", sys, u, p, tc.body)
		if st != 400 {
			t.Errorf("%s: status %d", tc.body, st)
			continue
		}
		if _, id := errorCode(t, m); !strings.HasSuffix(id, tc.want) {
			t.Errorf("%s: message %s, want %s", tc.body, id, tc.want)
		}
	}
	// Annotations are ignored; a matching If-Match is accepted, a stale one is 412.
	body := `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideTarget@Redfish.AllowableValues":["Pxe"]}}`
	if st, _, _ := do(t, nil, "PATCH", sys, u, p, body); st != 204 {
		t.Errorf("PATCH with annotation: %d", st)
	}
	req, _ := http.NewRequest("PATCH", sys, strings.NewReader(`{"AssetTag":"x"}`))
	req.SetBasicAuth(u, p)
	req.Header.Set("If-Match", etag)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("stale If-Match: %d", resp.StatusCode)
	}
	// Sessions: 201 + Location + X-Auth-Token; bad password 401; missing field 400.
	st, h, m = do(t, nil, "POST", b.URL+"/redfish/v1/SessionService/Sessions", "", "", map[string]string{"UserName": u, "Password": p})
	if st != 201 || !strings.HasPrefix(h.Get("Location"), "/redfish/v1/SessionService/Sessions/") || h.Get("X-Auth-Token") == "" || m["@odata.id"] != h.Get("Location") {
		t.Errorf("create session: %d %v %v", st, h, m)
	}
	if st, _, _ := do(t, nil, "POST", b.URL+"/redfish/v1/SessionService/Sessions", "", "", map[string]string{"UserName": u, "Password": "x"}); st != 401 {
		t.Errorf("session with bad password: %d", st)
	}
	if st, _, _ := do(t, nil, "POST", b.URL+"/redfish/v1/SessionService/Sessions", "", "", map[string]string{"UserName": u}); st != 400 {
		t.Errorf("session without password: %d", st)
	}
	// Reset without ResetType.
	if st, _, m := do(t, nil, "POST", sys+"/Actions/ComputerSystem.Reset", u, p, map[string]any{}); st != 400 {
		t.Errorf("reset without type: %d", st)
	} else if _, id := errorCode(t, m); !strings.HasSuffix(id, "ActionParameterMissing") {
		t.Errorf("reset without type: %s", id)
	}
	// NMI on a powered-off system conflicts.
	if st, _, _ := do(t, nil, "POST", sys+"/Actions/ComputerSystem.Reset", u, p, map[string]any{"ResetType": "Nmi"}); st != 409 {
		t.Errorf("Nmi while off: %d", st)
	}
	// Media insert with a non-URL.
	vm := sys + "/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia"
	if st, _, _ := do(t, nil, "POST", vm, u, p, map[string]any{"Image": "boot.iso"}); st != 400 {
		t.Errorf("insert non-URL: %d", st)
	}
	if st, _, _ := do(t, nil, "POST", vm, u, p, map[string]any{"Image": "http://x/a.iso", "TransferProtocolType": "NFS"}); st != 400 {
		t.Errorf("insert NFS: %d", st)
	}
}

// TestManySystemsOneService serves several systems behind one service root.
func TestManySystemsOneService(t *testing.T) {
	var systems []SystemConfig
	for i := range 5 {
		systems = append(systems, SystemConfig{ID: "node-" + string(rune('a'+i)), Backend: NewMemory(i, Inventory{})})
	}
	svc, err := NewService(Config{Systems: systems})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen("127.0.0.1:0", svc)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := connect(t, b, true)
	got, err := c.Service.Systems()
	if err != nil || len(got) != 5 {
		t.Fatalf("systems %d %v", len(got), err)
	}
	if _, err := got[3].Reset(schemas.OnResetType); err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		ps, _ := svc.Backend(s.ID).PowerState(context.Background())
		if (ps == PowerOn) != (i == 3) {
			t.Errorf("system %s power %s", s.ID, ps)
		}
		// one GET each from Systems(), plus the reset POST on node-d
		if want := uint64(1 + btoi(i == 3)); svc.SystemRequests(s.ID) != want {
			t.Errorf("system %s requests %d, want %d", s.ID, svc.SystemRequests(s.ID), want)
		}
	}
	if _, err := NewService(Config{Personality: "idrac", Systems: systems}); err == nil {
		t.Error("idrac with 5 systems accepted")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTLSLab serves HTTPS with a self-signed certificate: a verifying client
// with the lab's pool and an Insecure gofish client both work, a verifying
// client without it fails.
func TestTLSLab(t *testing.T) {
	lab, err := StartLab(LabConfig{N: 2, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	b := lab.BMCs[1]
	if !strings.HasPrefix(b.URL, "https://") {
		t.Fatalf("URL %s", b.URL)
	}
	u, p := b.Credentials()
	// gofish v0.23.0 copies http.DefaultTransport's *tls.Config pointer and
	// sets InsecureSkipVerify on it, which would make every default client in
	// the process insecure: always hand it its own transport.
	c, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{Endpoint: b.URL, Username: u, Password: p,
		Insecure: true, HTTPClient: &http.Client{Transport: &http.Transport{}}})
	if err != nil {
		t.Fatalf("insecure gofish: %v", err)
	}
	if s, err := c.Service.Systems(); err != nil || len(s) != 1 {
		t.Errorf("systems over TLS: %v", err)
	}
	verifying := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: lab.CertPool}}}
	if st, _, _ := do(t, verifying, "GET", b.URL+"/redfish/v1", "", "", nil); st != 200 {
		t.Errorf("verifying client: %d", st)
	}
	fresh := &http.Client{Transport: &http.Transport{}}
	if resp, err := fresh.Get(b.URL + "/redfish/v1"); err == nil {
		resp.Body.Close()
		t.Error("untrusted certificate accepted by a default client")
	}
}
