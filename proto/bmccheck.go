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

// Dict is the form stored in driver_internal_info.
func (b BMCCheck) Dict() Dict {
	d := Dict{"at": b.At.UTC().Format(time.RFC3339Nano), "operation": b.Operation, "ok": b.Error == ""}
	if b.Error != "" {
		d["error"] = b.Error
	}
	return d
}

// LastBMCCheck reads the check recorded in n, ok false when there is none.
func LastBMCCheck(n *Node) (BMCCheck, bool) {
	d, _ := n.DriverInternalInfo[InfoLastBMCCheck].(map[string]any)
	if d == nil {
		return BMCCheck{}, false
	}
	s, _ := d["at"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return BMCCheck{}, false
	}
	b := BMCCheck{At: at}
	b.Operation, _ = d["operation"].(string)
	b.Error, _ = d["error"].(string)
	if ok, _ := d["ok"].(bool); !ok && b.Error == "" {
		b.Error = "unknown error"
	}
	return b, true
}
