package bmcsim_test

import (
	"context"
	"fmt"

	"github.com/kilnhq/kiln/test/bmcsim"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// A test starts a lab of memory BMCs, drives one with a Redfish client,
// injects a fault and reads the request count.
func Example() {
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 3, Personality: "idrac"})
	if err != nil {
		panic(err)
	}
	defer lab.Close()
	bmc := lab.BMCs[0]
	user, pass := bmc.Credentials()
	c, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{
		Endpoint: bmc.URL, Username: user, Password: pass, BasicAuth: true})
	if err != nil {
		panic(err)
	}
	systems, _ := c.Service.Systems()
	_, _ = systems[0].Reset(schemas.OnResetType)
	mem := bmc.Backend(bmc.SystemIDs()[0]).(*bmcsim.Memory)
	fmt.Println(systems[0].ID, len(mem.Boots()), bmc.Requests())

	_ = bmc.SetFaults(bmcsim.Faults{ErrorRate: 1, ErrorStatus: 503})
	_, err = c.Service.Systems()
	fmt.Println(err != nil)
	// Output:
	// System.Embedded.1 1 4
	// true
}
