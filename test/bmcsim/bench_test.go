package bmcsim

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkPowerCycleHTTP measures one Reset On + Reset ForceOff pair over
// real HTTP (keep-alive) against one memory BMC.
func BenchmarkPowerCycleHTTP(b *testing.B) {
	lab := startLab(b, 1, "generic")
	bmc := lab.BMCs[0]
	url := bmc.URL + bmc.SystemPath(bmc.SystemIDs()[0]) + "/Actions/ComputerSystem.Reset"
	post := func(rt string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(fmt.Sprintf(`{"ResetType":%q}`, rt)))
		req.SetBasicAuth(DefaultUsername, DefaultPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 204 {
			b.Fatalf("reset %s: %v", rt, err)
		}
		resp.Body.Close()
	}
	for b.Loop() {
		post("On")
		post("ForceOff")
	}
}

// BenchmarkStartLab1000 measures starting and stopping 1,000 memory BMCs.
func BenchmarkStartLab1000(b *testing.B) {
	for b.Loop() {
		l, err := StartLab(LabConfig{N: 1000})
		if err != nil {
			b.Fatal(err)
		}
		_ = l.Close()
	}
}
