//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/kilnhq/kiln/test/phases"
)

// recordPhases follows the lab's node on kiln's event stream, charging
// each phase with the requests its BMC served.
func (l *lab) recordPhases() *phases.Recorder {
	l.t.Helper()
	rec, err := phases.Record(http.DefaultClient, l.kiln.URL, l.node, l.bmc.Requests)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { rec.Stop() })
	return rec
}

// redfishGet reads one resource of the lab's BMC directly, a check that
// does not go through kiln.
func (l *lab) redfishGet(path string, into any) {
	l.t.Helper()
	req, err := http.NewRequest("GET", l.bmc.URL+path, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	req.SetBasicAuth(l.bmc.Service.Credentials())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		l.t.Fatalf("GET %s on the BMC: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		l.t.Fatalf("GET %s on the BMC: %v", path, err)
	}
}

// redfishFirmware is the version of a FirmwareInventory member (BMC, BIOS).
func (l *lab) redfishFirmware(id string) string {
	var c struct{ Version string }
	l.redfishGet("/redfish/v1/UpdateService/FirmwareInventory/"+id, &c)
	return c.Version
}

// redfishBIOS is the current value of a BIOS attribute.
func (l *lab) redfishBIOS(name string) string {
	var b struct{ Attributes map[string]any }
	l.redfishGet(l.bmc.Service.SystemPath(l.bmc.Service.SystemIDs()[0])+"/Bios", &b)
	return fmt.Sprint(b.Attributes[name])
}
