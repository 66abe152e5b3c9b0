package api

import (
	"net/http"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestPickVIFTarget: the port group or port a VIF attaches to, in Ironic's
// order, and its refusals.
func TestPickVIFTarget(t *testing.T) {
	str := func(s string) *string { return &s }
	port := func(uuid string, pxe bool, group, vif string) *proto.Port {
		p := &proto.Port{UUID: uuid, PXEEnabled: pxe, InternalInfo: proto.Dict{}}
		if group != "" {
			p.PortgroupUUID = str(group)
		}
		if vif != "" {
			p.InternalInfo[proto.TenantVIFKey] = vif
		}
		return p
	}
	group := func(uuid, vif string) *proto.Portgroup {
		g := &proto.Portgroup{UUID: uuid, InternalInfo: proto.Dict{}}
		if vif != "" {
			g.InternalInfo[proto.TenantVIFKey] = vif
		}
		return g
	}
	for _, c := range []struct {
		name            string
		ports           []*proto.Port
		groups          []*proto.Portgroup
		port, portgroup string
		want            string // UUID of the chosen port or group
		code            int    // or the refusal
	}{
		{name: "first PXE port", ports: []*proto.Port{port("p1", false, "", ""), port("p2", true, "", ""), port("p3", true, "", "")}, want: "p2"},
		{name: "any port when none boots by PXE", ports: []*proto.Port{port("p1", false, "", ""), port("p2", false, "", "")}, want: "p1"},
		{name: "a group before ports", ports: []*proto.Port{port("p1", true, "", ""), port("p2", false, "g1", "")}, groups: []*proto.Portgroup{group("g1", "")}, want: "g1"},
		{name: "empty groups are skipped", ports: []*proto.Port{port("p1", false, "", "")}, groups: []*proto.Portgroup{group("g1", "")}, want: "p1"},
		{name: "a group with a VIF is taken", ports: []*proto.Port{port("p1", false, "g1", ""), port("p2", false, "", "")}, groups: []*proto.Portgroup{group("g1", "v0")}, want: "p2"},
		{name: "a member with a VIF frees the group's other ports", ports: []*proto.Port{port("p1", true, "g1", "v0"), port("p2", true, "g1", "")}, groups: []*proto.Portgroup{group("g1", "")}, want: "p2"},
		{name: "ports with VIFs are taken", ports: []*proto.Port{port("p1", true, "", "v0"), port("p2", false, "", "")}, want: "p2"},
		{name: "port asked for", ports: []*proto.Port{port("p1", true, "", ""), port("p2", false, "", "")}, port: "p2", want: "p2"},
		{name: "group asked for", ports: []*proto.Port{port("p1", true, "", ""), port("p2", false, "g2", "")}, groups: []*proto.Portgroup{group("g2", "")}, portgroup: "g2", want: "g2"},
		{name: "a member port asked for", ports: []*proto.Port{port("p1", true, "g1", "")}, groups: []*proto.Portgroup{group("g1", "")}, port: "p1", code: http.StatusBadRequest},
		{name: "no ports", code: http.StatusBadRequest},
		{name: "all taken", ports: []*proto.Port{port("p1", true, "", "v0")}, code: http.StatusBadRequest},
		{name: "already on a port", ports: []*proto.Port{port("p1", true, "", ""), port("p2", true, "", "vif")}, code: http.StatusConflict},
		{name: "already on a group", ports: []*proto.Port{port("p1", true, "g1", "")}, groups: []*proto.Portgroup{group("g1", "vif")}, code: http.StatusConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := pickVIFTarget("vif", c.ports, c.groups, c.port, c.portgroup)
			if c.code != 0 {
				e, ok := err.(*Error)
				if !ok || e.Code != c.code {
					t.Fatalf("got %+v, %v; want a %d", got, err, c.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			uuid := ""
			if got.portgroup != nil {
				uuid = got.portgroup.UUID
			} else if got.port != nil {
				uuid = got.port.UUID
			}
			if uuid != c.want {
				t.Errorf("chose %q, want %q", uuid, c.want)
			}
		})
	}
}
