package driver

import (
	"slices"
	"testing"
)

func TestWithAgentRAID(t *testing.T) {
	for _, c := range []struct {
		name         string
		deploy, raid []string
		want         []string
		def          string
	}{
		{"agent deploy: agent raid added after the type's own", []string{"direct", "ramdisk"}, []string{"no-raid"}, []string{"no-raid", "agent"}, "no-raid"},
		{"keeps a vendor default", []string{"direct"}, []string{"redfish", "no-raid"}, []string{"redfish", "no-raid", "agent"}, "redfish"},
		{"already there", []string{"direct"}, []string{"agent", "no-raid"}, []string{"agent", "no-raid"}, "agent"},
		{"no raid listed", []string{"direct"}, nil, []string{"no-raid", "agent"}, "no-raid"},
		{"no agent deploy: unchanged", []string{"ramdisk"}, []string{"no-raid"}, []string{"no-raid"}, "no-raid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := HardwareType{Name: "t", Supported: map[string][]string{"deploy": c.deploy, "raid": c.raid}}
			raidBefore := slices.Clone(c.raid)
			h := withAgentRAID(in)
			if !slices.Equal(h.Supported["raid"], c.want) || h.Default("raid") != c.def {
				t.Fatalf("raid %v default %s, want %v %s", h.Supported["raid"], h.Default("raid"), c.want, c.def)
			}
			if !slices.Equal(in.Supported["raid"], raidBefore) {
				t.Fatalf("the caller's map changed: %v", in.Supported["raid"])
			}
		})
	}
	// Registered types carry it: redfish-style types and fake-hardware.
	h, ok := Lookup(FakeHardware)
	if !ok || !slices.Contains(h.Supported["raid"], AgentRAID) {
		t.Fatalf("fake-hardware raid interfaces %v, want agent among them", h.Supported["raid"])
	}
}
