package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/driver"
	_ "github.com/kilnhq/kiln/controller/driver/ipmi"
	_ "github.com/kilnhq/kiln/controller/driver/ipxeboot"
	_ "github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// validateServer is the API on a fresh store and a "BMC" that counts the
// requests it gets.
func validateServer(t *testing.T) (srv *httptest.Server, st store.Store, bmc *httptest.Server, bmcRequests *atomic.Int64) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bmcRequests = &atomic.Int64{}
	bmc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bmcRequests.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	srv = httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1"}))
	t.Cleanup(func() {
		srv.Close()
		bmc.Close()
		st.Close()
	})
	return srv, st, bmc, bmcRequests
}

func doJSON(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var r *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	} else {
		r = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.95")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestValidateDoesNotContactBMC: GET …/validate judges driver_info and
// capabilities from the node record; the BMC gets no request, and the
// conductor's last-known BMC check shows with its age.
func TestValidateDoesNotContactBMC(t *testing.T) {
	srv, st, bmc, bmcRequests := validateServer(t)
	good := map[string]any{"redfish_address": bmc.URL, "redfish_username": "admin", "redfish_password": "secret"}
	for _, tc := range []struct {
		name       string
		driverInfo map[string]any
		properties map[string]any
		bmcCheck   *proto.BMCCheck
		// want: interface → "true", "false" or "none", with ":text" the reason
		// must contain; ages are matched to the minute, as the request reads
		// the clock after the check was written.
		want map[string]string
	}{
		{"valid, never contacted", good, nil, nil,
			map[string]string{"power": "true", "management": "true", "boot": "true", "inspect": "true"}},
		{"missing address", map[string]any{"redfish_username": "admin"}, nil, nil,
			map[string]string{"power": "false:missing redfish_address", "management": "false:missing redfish_address", "inspect": "false:missing redfish_address"}},
		{"bad boot_mode capability", good, map[string]any{"capabilities": "boot_mode:efi"}, nil,
			map[string]string{"power": "true", "boot": "false:boot_mode \"efi\"", "deploy": "false:boot_mode \"efi\""}},
		{"capabilities not key:value", good, map[string]any{"capabilities": "boot_mode"}, nil,
			map[string]string{"boot": "false:not key:value"}},
		{"last check failed 90 s ago", good, nil, &proto.BMCCheck{At: time.Now().Add(-90 * time.Second), Operation: "power state", Error: "BMC x: 503"},
			map[string]string{"power": "true:failed: BMC x: 503", "management": "true:contacted 1m"}},
		{"last check succeeded", good, nil, &proto.BMCCheck{At: time.Now().Add(-2 * time.Hour), Operation: "power state"},
			map[string]string{"power": "true:last answered 2h0m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, n := doJSON(t, "POST", srv.URL+"/v1/nodes", map[string]any{"driver": "redfish", "driver_info": tc.driverInfo,
				"properties": tc.properties, "boot_interface": "ipxe", "inspect_interface": "redfish"})
			if code != 201 {
				t.Fatalf("create: %d %v", code, n)
			}
			uuid := n["uuid"].(string)
			if tc.bmcCheck != nil {
				if _, err := st.UpdateNode(t.Context(), uuid, func(n *proto.Node) error {
					chk := tc.bmcCheck
					flowstate.Update(n, func(s *flowstate.State) { s.LastBMCCheck = chk })
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			code, out := doJSON(t, "GET", srv.URL+"/v1/nodes/"+uuid+"/validate", nil)
			if code != 200 {
				t.Fatalf("validate: %d %v", code, out)
			}
			for iface, want := range tc.want {
				r, _ := out[iface].(map[string]any)
				result, text, _ := strings.Cut(want, ":")
				if got := r["result"]; (result == "true") != (got == true) {
					t.Errorf("%s: result %v, want %s (%v)", iface, got, result, r)
				}
				reason, _ := r["reason"].(string)
				if text != "" && !strings.Contains(reason, text) {
					t.Errorf("%s: reason %q does not say %q", iface, reason, text)
				}
				if text == "" && result == "true" && reason != "" {
					t.Errorf("%s: unexpected reason %q", iface, reason)
				}
			}
		})
	}
	if got := bmcRequests.Load(); got != 0 {
		t.Errorf("validate sent %d requests to the BMC, want none", got)
	}
}

// TestEveryImplementationChecksOffline: each interface implementation the
// shipped hardware types offer has an offline check, so validate never
// needs the BMC. (Tests register implementations of their own; those are
// not offered by these types.)
func TestEveryImplementationChecksOffline(t *testing.T) {
	impls := map[string]any{}
	driver.EachImplementation(func(kind, name string, impl any) { impls[kind+"/"+name] = impl })
	checked := 0
	for _, hwName := range []string{driver.FakeHardware, "redfish", "ipmi"} {
		hw, ok := driver.Lookup(hwName)
		if !ok {
			t.Fatalf("hardware type %s is not registered", hwName)
		}
		for _, kind := range []string{"power", "management", "boot", "inspect"} {
			for _, name := range hw.Supported[kind] {
				if strings.HasPrefix(name, "no-") && kind != "inspect" {
					continue
				}
				impl, ok := impls[kind+"/"+name]
				if !ok {
					t.Errorf("%s offers %s interface %q, which is not registered", hwName, kind, name)
					continue
				}
				checked++
				if _, ok := impl.(driver.ConfigChecker); !ok {
					t.Errorf("%s interface %q (offered by %s) has no CheckConfig", kind, name, hwName)
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d implementations checked", checked)
	}
}
