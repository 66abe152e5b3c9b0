package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/controller/deploy"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// offlineResult is GET …/validate's answer for one interface, from the
// node's record alone: an API request never waits on a BMC, as in Ironic.
// The power and management results also show the conductor's last-known
// BMC check (flowstate.State.LastBMCCheck) with its age: informative only, since
// a BMC that was down a minute ago does not make the configuration wrong.
func offlineResult(n *proto.Node, ifs driver.Set, iface string) proto.ValidateResult {
	var err error
	switch iface {
	case "power":
		err = driver.CheckConfig(ifs.Power, n)
	case "management":
		err = driver.CheckConfig(ifs.Management, n)
	case "boot":
		err = errors.Join(driver.CheckConfig(ifs.Boot, n), driver.CheckCapabilities(n))
	case "inspect":
		err = driver.CheckConfig(ifs.Inspect, n)
	case "deploy":
		err = errors.Join(deploy.Validate(n), driver.CheckCapabilities(n))
	}
	if err != nil {
		no := false
		reason := secrets.Scrub(err.Error())
		return proto.ValidateResult{Result: &no, Reason: &reason}
	}
	yes := true
	out := proto.ValidateResult{Result: &yes}
	if iface == "power" || iface == "management" {
		if fs, _ := flowstate.Read(n, flowstate.PartBMC); fs.LastBMCCheck != nil {
			reason := secrets.Scrub(bmcCheckReason(*fs.LastBMCCheck, time.Now()))
			out.Reason = &reason
		}
	}
	return out
}

// bmcCheckReason words a last-known BMC check and its age.
func bmcCheckReason(chk proto.BMCCheck, now time.Time) string {
	age := max(now.Sub(chk.At), 0).Round(time.Second)
	if chk.Error != "" {
		return fmt.Sprintf("driver_info is valid; the BMC was last contacted %s ago (%s) and failed: %s", age, chk.Operation, chk.Error)
	}
	return fmt.Sprintf("driver_info is valid; the BMC last answered %s ago (%s)", age, chk.Operation)
}
