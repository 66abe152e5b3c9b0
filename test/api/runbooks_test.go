package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/runbooks"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// TestRunbooksGophercloud drives /v1/runbooks on a real kiln serve with
// gophercloud's runbooks client: create, list through pages, get by name,
// update, a clean request naming a runbook, delete. (The installed
// python3-ironicclient 5.0.1 has no runbook commands.)
func TestRunbooksGophercloud(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	ctx := context.Background()
	c := newClient(t, k, "1.92")
	yes := true
	var ids []string
	for _, name := range []string{"CUSTOM_WIPE", "CUSTOM_FIRMWARE", "CUSTOM_BIOS"} {
		rb, err := runbooks.Create(ctx, c, runbooks.CreateOpts{Name: name, DisableRamdisk: &yes, Extra: map[string]any{"k": "v"},
			Steps: []runbooks.Step{{Interface: nodes.InterfaceDeploy, Step: "erase_devices", Args: map[string]any{"password": "hunter2"}, Order: 1}}}).Extract()
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		if rb.Name != name || !rb.DisableRamdisk || rb.Public || len(rb.Steps) != 1 || rb.Steps[0].Order != 1 || rb.Steps[0].Args["password"] != "******" {
			t.Errorf("created %+v", rb)
		}
		ids = append(ids, rb.UUID)
	}
	_, err := runbooks.Create(ctx, c, runbooks.CreateOpts{Name: "CUSTOM_WIPE", Steps: []runbooks.Step{{Interface: nodes.InterfaceDeploy, Step: "s", Args: map[string]any{}, Order: 1}}}).Extract()
	wantStatus(t, err, http.StatusConflict)

	var names []string
	err = runbooks.List(c, runbooks.ListOpts{Limit: 2, SortKey: "name"}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		rbs, err := runbooks.ExtractRunbooks(p)
		for _, rb := range rbs {
			names = append(names, rb.Name)
		}
		return true, err
	})
	if err != nil || !slices.Equal(names, []string{"CUSTOM_BIOS", "CUSTOM_FIRMWARE", "CUSTOM_WIPE"}) {
		t.Errorf("paged list by name: %v, %v", names, err)
	}
	rb, err := runbooks.Get(ctx, c, "CUSTOM_WIPE").Extract()
	if err != nil || rb.UUID != ids[0] {
		t.Fatalf("get by name: %+v, %v", rb, err)
	}
	rb, err = runbooks.Update(ctx, c, ids[0], runbooks.UpdateOpts{
		runbooks.UpdateOperation{Op: runbooks.ReplaceOp, Path: "/public", Value: true},
		runbooks.UpdateOperation{Op: runbooks.AddOp, Path: "/extra/site", Value: "lab"},
	}).Extract()
	if err != nil || !rb.Public || rb.Extra["site"] != "lab" || rb.UpdatedAt.IsZero() {
		t.Errorf("update: %+v, %v", rb, err)
	}

	// Below 1.92 the collection does not exist.
	_, err = runbooks.Get(ctx, newClient(t, k, "1.91"), ids[0]).Extract()
	wantStatus(t, err, http.StatusNotFound)

	// A clean naming the runbook is refused while the node lacks the trait.
	node, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: "rb-node"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes.ChangeProvisionState(ctx, c, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetManage}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	// The conductor verifies the node first; the deadline is a safety net.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		n, err := nodes.Get(ctx, c, node.UUID).Extract()
		if err == nil && n.ProvisionState == "manageable" && n.Reservation == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not manageable: %+v, %v", n, err)
		}
	}
	err = nodes.ChangeProvisionState(ctx, c, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetClean, Runbook: "CUSTOM_WIPE"}).ExtractErr()
	wantStatus(t, err, http.StatusBadRequest)
	if err == nil || !strings.Contains(err.Error(), "This runbook has not been approved for use on this node") {
		t.Errorf("clean with a runbook on a node without the trait: %v", err)
	}

	if err := runbooks.Delete(ctx, c, "CUSTOM_WIPE").ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err = runbooks.Get(ctx, c, ids[0]).Extract()
	wantStatus(t, err, http.StatusNotFound)
}
