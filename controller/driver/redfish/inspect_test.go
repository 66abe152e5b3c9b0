package redfish_test

import (
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// emptySystem is a BMC whose system reports no processors and no memory,
// as some do before their first POST.
type emptySystem struct{ *bmcsim.Memory }

func (e emptySystem) Inventory() bmcsim.Inventory {
	inv := e.Memory.Inventory()
	inv.CPUCount, inv.MemoryGiB, inv.CPUArch = 0, 0, ""
	return inv
}

// TestInspectNoCPUOrMemory: out-of-band inspection of a BMC that reports no
// CPU and no memory fails, naming what is missing, instead of storing
// cpus 0 and memory_mb 0.
func TestInspectNoCPUOrMemory(t *testing.T) {
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, NewBackend: func(i int) (bmcsim.Backend, error) {
		return emptySystem{bmcsim.NewMemory(i, bmcsim.Inventory{})}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	in := &redfish.Inspect{Pool: newPool(t, fast)}
	n := nodeFor(lab.BMCs[0], nil)
	res, _, err := in.Inspect(t.Context(), n)
	if err == nil {
		t.Fatalf("inspection succeeded with properties %v", res.Properties)
	}
	if !strings.Contains(err.Error(), "Failed to discover the following properties: cpu_arch, cpus, memory_mb") {
		t.Errorf("error %q does not name the missing properties", err)
	}
}
