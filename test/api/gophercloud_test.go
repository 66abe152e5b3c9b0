package api_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/drivers"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

func newClient(t *testing.T, k *kiln, microversion string) *gophercloud.ServiceClient {
	t.Helper()
	c, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: k.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	c.Microversion = microversion
	return c
}

func wantStatus(t *testing.T, err error, code int) {
	t.Helper()
	var ue gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ue) {
		t.Fatalf("want HTTP %d, got %v", code, err)
	}
	if ue.Actual != code {
		t.Fatalf("want HTTP %d, got %d: %s", code, ue.Actual, ue.Body)
	}
}

func TestGophercloudMicroversionNegotiation(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	c := newClient(t, k, "")
	mv, err := utils.GetSupportedMicroversions(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if mv.MinMajor != 1 || mv.MinMinor != 1 || mv.MaxMajor != 1 || mv.MaxMinor != 115 {
		t.Fatalf("microversions = %+v, want 1.1–1.115", mv)
	}
	// Metal3's baremetal-operator needs at least 1.89 (and pins 1.110).
	pinned, err := utils.RequireMicroversion(context.Background(), *c, "1.89")
	if err != nil || pinned.Microversion != "1.89" {
		t.Fatalf("RequireMicroversion(1.89) = %q, %v", pinned.Microversion, err)
	}
	// Beyond the maximum: 406.
	c.Microversion = "1.200"
	_, err = nodes.Get(context.Background(), c, "whatever").Extract()
	wantStatus(t, err, http.StatusNotAcceptable)
}

func TestGophercloudNodesAndPorts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	c := newClient(t, k, "1.95")

	// Drivers: never empty, as baremetal-operator requires.
	drvPages, err := drivers.ListDrivers(c, nil).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drvs, err := drivers.ExtractDrivers(drvPages)
	if err != nil || len(drvs) == 0 {
		t.Fatalf("drivers = %v, %v", drvs, err)
	}

	created, err := nodes.Create(ctx, c, nodes.CreateOpts{
		Name:   "metal3~worker-0",
		Driver: "fake-hardware",
		DriverInfo: map[string]any{
			"ipmi_address": "10.0.0.1", "ipmi_password": "s3cret", "deploy_kernel": "http://x/k",
		},
		Properties:    map[string]any{"cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"},
		ResourceClass: "baremetal",
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if created.ProvisionState != "enroll" || created.Name != "metal3~worker-0" || created.UUID == "" {
		t.Fatalf("created = %+v", created)
	}
	if created.DriverInfo["ipmi_password"] != "******" || created.DriverInfo["ipmi_address"] != "10.0.0.1" {
		t.Errorf("driver_info = %v: password must be masked, the rest shown", created.DriverInfo)
	}
	if created.PowerInterface != "fake" || created.NetworkInterface != "noop" {
		t.Errorf("default interfaces: power %q network %q", created.PowerInterface, created.NetworkInterface)
	}

	// Get by UUID and by name (with "~").
	for _, id := range []string{created.UUID, "metal3~worker-0"} {
		n, err := nodes.Get(ctx, c, id).Extract()
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if n.UUID != created.UUID {
			t.Fatalf("get %s returned %s", id, n.UUID)
		}
	}
	_, err = nodes.Get(ctx, c, "no-such-node").Extract()
	wantStatus(t, err, http.StatusNotFound)

	// Duplicate name: 409.
	_, err = nodes.Create(ctx, c, nodes.CreateOpts{Name: "metal3~worker-0", Driver: "fake-hardware"}).Extract()
	wantStatus(t, err, http.StatusConflict)
	// Unknown driver: 400.
	_, err = nodes.Create(ctx, c, nodes.CreateOpts{Driver: "no-such-driver"}).Extract()
	wantStatus(t, err, http.StatusBadRequest)

	// A second node for list filters.
	other, err := nodes.Create(ctx, c, nodes.CreateOpts{Name: "other", Driver: "fake-hardware", ResourceClass: "gpu"}).Extract()
	if err != nil {
		t.Fatal(err)
	}

	// Update: nested JSON-patch as baremetal-operator sends it.
	updated, err := nodes.Update(ctx, c, created.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: "http://images/x.qcow2"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/root_device", Value: map[string]any{"name": "s== /dev/vda"}},
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/driver_info/ipmi_address", Value: "10.0.0.2"},
		nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/properties/capabilities"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/automated_clean", Value: false},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if updated.InstanceInfo["image_source"] != "http://images/x.qcow2" || updated.DriverInfo["ipmi_address"] != "10.0.0.2" {
		t.Errorf("update not applied: %+v %+v", updated.InstanceInfo, updated.DriverInfo)
	}
	if _, still := updated.Properties["capabilities"]; still {
		t.Errorf("capabilities not removed: %v", updated.Properties)
	}
	if updated.DriverInfo["ipmi_password"] != "******" {
		t.Errorf("password not masked after update: %v", updated.DriverInfo)
	}
	if updated.AutomatedClean == nil || *updated.AutomatedClean {
		t.Errorf("automated_clean = %v", updated.AutomatedClean)
	}
	// Read-only path: 400.
	_, err = nodes.Update(ctx, c, created.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/provision_state", Value: "active"},
	}).Extract()
	wantStatus(t, err, http.StatusBadRequest)

	// List with and without filters.
	var names []string
	err = nodes.List(c, nodes.ListOpts{}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		ns, err := nodes.ExtractNodes(p)
		for _, n := range ns {
			names = append(names, n.Name)
		}
		return true, err
	})
	if err != nil || len(names) != 2 {
		t.Fatalf("list = %v, %v", names, err)
	}
	pages, err := nodes.ListDetail(c, nodes.ListOpts{ProvisionState: "enroll", Fields: nil}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := nodes.ExtractNodes(pages)
	if len(all) != 2 || all[0].Driver != "fake-hardware" {
		t.Fatalf("detail list = %+v", all)
	}
	pages, err = nodes.List(c, nodes.ListOpts{Fields: []string{"uuid", "name", "provision_state", "boot_interface"}}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	few, _ := nodes.ExtractNodes(pages)
	if len(few) != 2 || few[0].BootInterface == "" {
		t.Fatalf("fields list = %+v", few)
	}
	pages, err = nodes.List(c, nodes.ListOpts{ProvisionState: "active"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if none, _ := nodes.ExtractNodes(pages); len(none) != 0 {
		t.Fatalf("filter provision_state=active returned %d nodes", len(none))
	}

	// Ports.
	port, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: created.UUID, Address: "52:54:00:AA:BB:01", PXEEnabled: ptr(true)}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if port.Address != "52:54:00:aa:bb:01" {
		t.Errorf("address = %q, want lower case", port.Address)
	}
	_, err = ports.Create(ctx, c, ports.CreateOpts{NodeUUID: other.UUID, Address: "52:54:00:aa:bb:01"}).Extract()
	wantStatus(t, err, http.StatusConflict)
	if _, err := ports.Create(ctx, c, ports.CreateOpts{NodeUUID: other.UUID, Address: "52:54:00:aa:bb:02"}).Extract(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts ports.ListOpts
		want int
	}{
		{ports.ListOpts{}, 2},
		{ports.ListOpts{Address: "52:54:00:aa:bb:01"}, 1},
		{ports.ListOpts{NodeUUID: other.UUID}, 1},
		{ports.ListOpts{Address: "52:54:00:00:00:00"}, 0},
	} {
		pages, err := ports.ListDetail(c, tc.opts).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ps, _ := ports.ExtractPorts(pages)
		if len(ps) != tc.want {
			t.Errorf("ports %+v: got %d, want %d", tc.opts, len(ps), tc.want)
		}
	}
	gotPort, err := ports.Get(ctx, c, port.UUID).Extract()
	if err != nil || gotPort.NodeUUID != created.UUID {
		t.Fatalf("get port = %+v, %v", gotPort, err)
	}

	// States: manage is accepted; the conductor verifies the (fake) power
	// credentials and the node reaches manageable.
	if err := nodes.ChangeProvisionState(ctx, c, created.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetManage}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, c, created.UUID, "manageable", func(n *nodes.Node) bool { return n.ProvisionState == "manageable" && n.Reservation == "" })
	if st.TargetProvisionState != "" || st.PowerState == "" {
		t.Fatalf("after manage: target %q, power %q", st.TargetProvisionState, st.PowerState)
	}
	// Inspection with the fake inspect interface fills the properties.
	if err := nodes.ChangeProvisionState(ctx, c, created.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetInspect}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	inspected := waitFor(t, c, created.UUID, "inspected", func(n *nodes.Node) bool {
		return n.ProvisionState == "manageable" && n.Reservation == "" && n.InspectionFinishedAt != nil
	})
	if inspected.Properties["cpus"] == nil || inspected.Properties["cpu_arch"] != "x86_64" {
		t.Errorf("properties after inspection: %v", inspected.Properties)
	}
	// Deploying from enroll is not a valid transition: 400.
	err = nodes.ChangeProvisionState(ctx, c, other.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}).ExtractErr()
	wantStatus(t, err, http.StatusBadRequest)

	if err := nodes.ChangePowerState(ctx, c, other.UUID, nodes.PowerStateOpts{Target: nodes.PowerOn}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, other.UUID, "power on", func(n *nodes.Node) bool {
		return n.PowerState == "power on" && n.TargetPowerState == "" && n.Reservation == ""
	})

	if err := nodes.SetBootDevice(ctx, c, other.UUID, nodes.BootDeviceOpts{BootDevice: "pxe", Persistent: false}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, other.UUID, "boot device applied", func(n *nodes.Node) bool { return n.Reservation == "" })
	bd, err := nodes.GetBootDevice(ctx, c, other.UUID).Extract()
	if err != nil || bd.BootDevice != "pxe" {
		t.Fatalf("boot device = %+v, %v", bd, err)
	}

	if err := nodes.SetMaintenance(ctx, c, other.UUID, nodes.MaintenanceOpts{Reason: "disk swap"}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	n2, _ := nodes.Get(ctx, c, other.UUID).Extract()
	if !n2.Maintenance || n2.MaintenanceReason != "disk swap" {
		t.Fatalf("maintenance = %v %q", n2.Maintenance, n2.MaintenanceReason)
	}
	if err := nodes.UnsetMaintenance(ctx, c, other.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}

	v, err := nodes.Validate(ctx, c, other.UUID).Extract()
	if err != nil || !v.Power.Result || !v.Deploy.Result || !v.Boot.Result {
		t.Fatalf("validate = %+v, %v", v, err)
	}
	// A direct deploy without an image fails validation with the reason.
	// Credentials the BMC rejects do not: validate never contacts the BMC
	// (as in Ironic); the conductor's last BMC check is in the reason.
	if _, err := nodes.Update(ctx, c, other.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/deploy_interface", Value: "direct"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info/fake_power_error", Value: "bad password"},
	}).Extract(); err != nil {
		t.Fatal(err)
	}
	v, err = nodes.Validate(ctx, c, other.UUID).Extract()
	if err != nil || v.Deploy.Result || !strings.Contains(v.Deploy.Reason, "image_source") || !v.Power.Result {
		t.Fatalf("validate = %+v, %v", v, err)
	}

	// Inventory: 404 until an agent reports one.
	_, err = nodes.GetInventory(ctx, c, other.UUID).Extract()
	wantStatus(t, err, http.StatusNotFound)

	// Delete a port, then a node (and with it its ports).
	if err := ports.Delete(ctx, c, port.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Delete(ctx, c, other.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	_, err = nodes.Get(ctx, c, other.UUID).Extract()
	wantStatus(t, err, http.StatusNotFound)
	pages, err = ports.List(c, ports.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := ports.ExtractPorts(pages); len(ps) != 0 {
		t.Fatalf("ports left after deleting their nodes: %+v", ps)
	}
	// The rest of the lifecycle on fake-hardware: provide, deploy, undeploy.
	if err := nodes.ChangeProvisionState(ctx, c, created.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, created.UUID, "available", func(n *nodes.Node) bool { return n.ProvisionState == "available" && n.Reservation == "" })
	if err := nodes.ChangeProvisionState(ctx, c, created.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	active := waitFor(t, c, created.UUID, "active", func(n *nodes.Node) bool { return n.ProvisionState == "active" && n.Reservation == "" })
	if active.PowerState != "power on" {
		t.Errorf("deployed node power state %q", active.PowerState)
	}
	// Rebuild goes through deploying back to active.
	if err := nodes.ChangeProvisionState(ctx, c, created.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetRebuild}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, created.UUID, "active after rebuild", func(n *nodes.Node) bool {
		return n.ProvisionState == "active" && n.Reservation == "" && n.ProvisionUpdatedAt.After(active.ProvisionUpdatedAt)
	})
	// An active node cannot be deleted: 409.
	err = nodes.Delete(ctx, c, created.UUID).ExtractErr()
	wantStatus(t, err, http.StatusConflict)
	if err := nodes.ChangeProvisionState(ctx, c, created.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, c, created.UUID, "available after undeploy", func(n *nodes.Node) bool { return n.ProvisionState == "available" && n.Reservation == "" })
	if len(done.InstanceInfo) != 0 || done.PowerState != "power off" {
		t.Errorf("after undeploy: instance_info %v, power %q", done.InstanceInfo, done.PowerState)
	}
	if err := nodes.Delete(ctx, c, created.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls the node until cond holds; the deadline is a safety net.
func waitFor(t *testing.T, c *gophercloud.ServiceClient, id, what string, cond func(*nodes.Node) bool) *nodes.Node {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n, err := nodes.Get(context.Background(), c, id).Extract()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if cond(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s never reached %s: state %q target %q power %q last_error %q", id, what, n.ProvisionState, n.TargetProvisionState, n.PowerState, n.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
