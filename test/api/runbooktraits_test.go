package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/runbooks"
)

// TestRunbookTraitsOverHTTP drives runbooks at 1.112 on a real kiln serve
// with gophercloud's runbooks client: a name that is no trait, a
// description, the traits sub-resource, their approval of a node for a
// runbook, and the same data after a restart; below 1.112 the traits
// routes are 404.
func TestRunbookTraitsOverHTTP(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "kiln.db")
	k := startKiln(t, db)
	ctx := context.Background()
	c := newClient(t, k, "1.112")
	rb, err := runbooks.Create(ctx, c, runbooks.CreateOpts{Name: "wipe-disks", Description: "erase every disk",
		Steps: []runbooks.Step{{Interface: nodes.InterfaceDeploy, Step: "erase_devices", Args: map[string]any{}, Order: 1}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if rb.Description == nil || *rb.Description != "erase every disk" || rb.Traits == nil || len(rb.Traits) != 0 {
		t.Errorf("created: %+v", rb)
	}
	if err := runbooks.AddTrait(ctx, c, "wipe-disks", "CUSTOM_WIPE_OK").ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := runbooks.SetTraits(ctx, c, rb.UUID, []string{"CUSTOM_WIPE_OK", "CUSTOM_LAB"}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := runbooks.DeleteTrait(ctx, c, "wipe-disks", "CUSTOM_LAB").ExtractErr(); err != nil {
		t.Fatal(err)
	}
	ts, err := runbooks.ListTraits(ctx, c, "wipe-disks").Extract()
	if err != nil || !slices.Equal(ts, []string{"CUSTOM_WIPE_OK"}) {
		t.Errorf("traits: %v %v", ts, err)
	}
	_, err = runbooks.ListTraits(ctx, newClient(t, k, "1.111"), "wipe-disks").Extract()
	wantStatus(t, err, http.StatusNotFound)

	// A node with the runbook's trait may run it (the name is no trait).
	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: "rb1"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes.ChangeProvisionState(ctx, c, n.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetManage}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, n.UUID, "manageable", func(n *nodes.Node) bool { return n.ProvisionState == "manageable" && n.Reservation == "" })
	clean := `{"target":"clean","runbook":"wipe-disks"}`
	latest := []string{"X-OpenStack-Ironic-API-Version", "1.112"}
	if code, _, b := k.call("PUT", "/v1/nodes/rb1/states/provision", clean, latest...); code != http.StatusBadRequest {
		t.Errorf("clean without the trait: %d %s", code, b)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/rb1/traits/CUSTOM_WIPE_OK", "", latest...); code != http.StatusNoContent {
		t.Fatalf("add node trait: %d %s", code, b)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/rb1/states/provision", clean, latest...); code != http.StatusAccepted {
		t.Errorf("clean with the trait: %d %s", code, b)
	}

	k.stop()
	k = startKiln(t, db)
	c = newClient(t, k, "1.112")
	got, err := runbooks.Get(ctx, c, "wipe-disks").Extract()
	if err != nil || got.Description == nil || *got.Description != "erase every disk" || !slices.Equal(got.Traits, []string{"CUSTOM_WIPE_OK"}) {
		t.Errorf("after a restart: %+v %v", got, err)
	}
}
