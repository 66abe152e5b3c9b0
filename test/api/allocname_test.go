package api_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/allocations"
)

// TestAllocationPrefersTheNamedNode (1.79): an allocation named like an
// available node gets that node, whatever order the candidates were
// shuffled into; three such allocations among six nodes would all land on
// their namesakes by chance once in 120 runs.
func TestAllocationPrefersTheNamedNode(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	c := newClient(t, k, "1.79")
	ids := availableNodes(t, c, "web", 6)
	ctx := context.Background()
	want := map[string]string{}
	for _, i := range []int{4, 1, 5} {
		name := "web" + string(rune('0'+i))
		a, err := allocations.Create(ctx, c, allocations.CreateOpts{Name: name, ResourceClass: "gold"}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		want[a.UUID] = ids[i]
	}
	for _, a := range settled(t, c) {
		if a.State != "active" || a.NodeUUID != want[a.UUID] {
			t.Errorf("allocation %s: state %s, node %s; want active on its namesake %s", a.Name, a.State, a.NodeUUID, want[a.UUID])
		}
	}
}
