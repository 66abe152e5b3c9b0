package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestPowerSyncNodes: the rows a power-sync round plans from are the free
// nodes of the group, out of maintenance and without work, with their
// states from the columns and their BMC addresses from driver_info.
func TestPowerSyncNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		on, off := proto.PowerOn, proto.PowerOff
		created := 0
		mk := func(name string, edit func(n *proto.Node)) string {
			created++
			n := &proto.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", created), Name: &name, Driver: "redfish",
				ProvisionState: proto.StateActive, PowerState: &on,
				DriverInfo: proto.Dict{"redfish_address": "https://10.0.0.1", "redfish_password": "secret"}}
			if edit != nil {
				edit(n)
			}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			return n.UUID
		}
		plain := mk("plain", nil)
		ipmi := mk("ipmi-node", func(n *proto.Node) {
			n.DriverInfo = proto.Dict{"ipmi_address": "10.0.0.2"}
			n.PowerState = nil
			n.ProvisionState = proto.StateEnroll
		})
		mk("in-maintenance", func(n *proto.Node) { n.Maintenance = true })
		mk("powering", func(n *proto.Node) { n.TargetPowerState = &off })
		mk("other-group", func(n *proto.Node) { n.ConductorGroup = "rack9" })
		held := mk("held", nil)
		if _, err := st.Reserve(ctx, held, "c1"); err != nil {
			t.Fatal(err)
		}
		got, err := st.PowerSyncNodes(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]PowerSyncNode{
			plain: {UUID: plain, ProvisionState: proto.StateActive, PowerState: on, BMC: [3]string{"https://10.0.0.1", "", ""}},
			ipmi:  {UUID: ipmi, ProvisionState: proto.StateEnroll, BMC: [3]string{"", "10.0.0.2", ""}},
		}
		if len(got) != len(want) {
			t.Fatalf("got %d rows %+v, want %d", len(got), got, len(want))
		}
		for _, r := range got {
			if r != want[r.UUID] {
				t.Errorf("row %+v, want %+v", r, want[r.UUID])
			}
		}
	})
}
