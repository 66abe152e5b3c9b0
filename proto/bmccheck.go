package proto

import "time"

// InfoLastBMCCheck is the driver_internal_info key under which the conductor
// records the outcome of its last exchange with a node's BMC (see BMCCheck),
// so that GET …/validate can report it without contacting the BMC.
const InfoLastBMCCheck = "kiln_last_bmc_check"

// BMCCheck is the last-known outcome of talking to a node's BMC.
type BMCCheck struct {
	At        time.Time // when the conductor talked to the BMC
	Operation string    // what it asked: "power state", "get boot device", …
	Error     string    // why it failed; "" when the BMC answered
}
