package redfish_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// simGet reads a simulator resource with the BMC's credentials.
func simGet(t *testing.T, b *bmcsim.BMC, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", b.URL+path, nil)
	u, p := b.Credentials()
	req.SetBasicAuth(u, p)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestManagementExtrasEveryPersonality: secure boot on and off (read back
// from the BMC, and in force after the next boot), the indicator LED, an
// NMI, and a BMC reset survived, on every personality.
func TestManagementExtrasEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab, env := raidLab(t, name)
			pool := newPool(t, fast)
			m := &redfish.Management{Pool: pool}
			pw := &redfish.Power{Pool: pool}
			b := lab.BMCs[0]
			n := nodeFor(b, nil)
			sbPath := "/redfish/v1/Systems/" + b.SystemIDs()[0] + "/SecureBoot"
			for _, on := range []bool{true, false} {
				if err := m.SetSecureBoot(ctx, n, on); err != nil {
					t.Fatalf("secure boot %v: %v", on, err)
				}
				if err := pw.SetPowerState(ctx, n, proto.PowerRebooting, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				var sb struct {
					SecureBootEnable      bool
					SecureBootCurrentBoot string
				}
				simGet(t, b, sbPath, &sb)
				want := map[bool]string{true: "Enabled", false: "Disabled"}[on]
				if sb.SecureBootEnable != on || sb.SecureBootCurrentBoot != want {
					t.Errorf("after secure boot %v and a reboot: %+v", on, sb)
				}
			}
			for _, st := range []string{"on", "blinking", "off"} {
				if err := m.SetIndicator(ctx, n, st); err != nil {
					t.Fatalf("indicator %s: %v", st, err)
				}
				if got, err := m.Indicator(ctx, n); err != nil || got != st {
					t.Errorf("indicator after %s: %s %v", st, got, err)
				}
			}
			if err := m.SetIndicator(ctx, n, "GREEN"); err == nil || !strings.Contains(err.Error(), "not one of blinking, off, on") {
				t.Errorf("indicator GREEN: %v", err)
			}
			if err := pw.SetPowerState(ctx, n, proto.PowerOn, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			nmis := lab.Memory(0).NMIs()
			if err := m.InjectNMI(ctx, n); err != nil {
				t.Fatalf("NMI: %v", err)
			}
			if got := lab.Memory(0).NMIs(); got != nmis+1 {
				t.Errorf("NMIs %d, want %d", got, nmis+1)
			}
			if err := lab.SetFaults(bmcsim.Faults{ManagerResetDowntime: 20 * time.Second}); err != nil {
				t.Fatal(err)
			}
			before, start := lab.Requests()[0], time.Now()
			err := m.ResetBMC(ctx, n, env)
			t.Logf("personality %s: management.reset_bmc (20 s down) took %s and %d BMC requests", name, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
			if err != nil {
				t.Fatalf("reset BMC: %v", err)
			}
			if _, err := pw.GetPowerState(ctx, n); err != nil {
				t.Errorf("after the BMC reset: %v", err)
			}
		})
	}
}
