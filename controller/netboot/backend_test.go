package netboot

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/kilnhq/kiln/controller/boot"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

func TestDecide(t *testing.T) {
	b := &Backend{FilesURL: "http://ctrl:6385/boot/files/"}
	for _, tc := range []struct {
		name       string
		state      proto.ProvisionState
		info       proto.Dict
		maint      bool
		wantAction boot.Action
		wantKernel string
	}{
		{"deploying boots the agent", proto.StateDeploying, nil, false, boot.BootAgent, ""},
		{"wait call-back boots the agent", proto.StateDeployWait, nil, false, boot.BootAgent, ""},
		{"cleaning", proto.StateCleanWait, nil, false, boot.BootAgent, ""},
		{"inspecting", proto.StateInspectWait, nil, false, boot.BootAgent, ""},
		{"active boots its disk", proto.StateActive, nil, false, boot.BootLocal, ""},
		{"available boots its disk", proto.StateAvailable, nil, false, boot.BootLocal, ""},
		{"enroll", proto.StateEnroll, nil, false, boot.BootLocal, ""},
		{"kernel by URL", proto.StateDeploying, proto.Dict{"deploy_kernel": "http://img/k"}, false, boot.BootAgent, "http://img/k"},
		{"kernel by name", proto.StateDeploying, proto.Dict{"deploy_kernel": "custom.kernel"}, false, boot.BootAgent, "http://ctrl:6385/boot/files/custom.kernel"},
		{"traversal refused", proto.StateDeploying, proto.Dict{"deploy_kernel": "../../etc/passwd"}, false, boot.BootAgent, ""},
		{"network data needs the per-node ramdisk", proto.StateInspectWait, proto.Dict{"preprovisioning_network_data": "interfaces: []"}, false, boot.BootAgent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := b.decide(&proto.Node{UUID: "u", ProvisionState: tc.state, DriverInfo: tc.info, Maintenance: tc.maint})
			if d.Action != tc.wantAction || d.KernelURL != tc.wantKernel || d.Inspect != (tc.state == proto.StateInspectWait) {
				t.Errorf("decision = %+v", d)
			}
		})
	}
}

func TestBootForUsesPorts(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := &proto.Node{UUID: "11111111-1111-4111-8111-111111111111", Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
		DriverInfo: proto.Dict{"kernel_append_params": "console=ttyS0 nomodeset"}, DriverInternalInfo: proto.Dict{}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.CreatePort(ctx, &proto.Port{UUID: "22222222-2222-4222-8222-222222222222", Address: "52:54:00:12:34:56", NodeUUID: n.UUID}); err != nil {
		t.Fatal(err)
	}
	b := &Backend{Store: st}
	d, err := b.BootFor(ctx, "52:54:00:12:34:56")
	if err != nil || d.Action != boot.BootAgent || d.NodeUUID != n.UUID || len(d.ExtraKernelArgs) != 2 {
		t.Fatalf("BootFor = %+v, %v", d, err)
	}
	if _, err := b.BootFor(ctx, "52:54:00:00:00:00"); !errors.Is(err, boot.ErrUnknownMAC) {
		t.Fatalf("unknown MAC: %v", err)
	}
}

func TestPerNodeRamdiskURL(t *testing.T) {
	b := &Backend{RamdiskURL: "http://ctrl/boot/ramdisk"}
	d := b.decide(&proto.Node{UUID: "u1", ProvisionState: proto.StateDeploying, DriverInfo: proto.Dict{"preprovisioning_network_data": "interfaces: []"}})
	if d.RamdiskURL != "http://ctrl/boot/ramdisk/u1" {
		t.Errorf("RamdiskURL = %q", d.RamdiskURL)
	}
	d = b.decide(&proto.Node{UUID: "u2", ProvisionState: proto.StateDeploying, NetworkData: proto.Dict{"links": []any{}}})
	if d.RamdiskURL != "" {
		t.Errorf("OpenStack network_data must not select the NMState ramdisk: %q", d.RamdiskURL)
	}
	d = b.decide(&proto.Node{UUID: "u3", ProvisionState: proto.StateDeploying, DriverInfo: proto.Dict{"preprovisioning_network_data": "interfaces: [{name: e}]"}})
	if d.RamdiskURL != "" {
		t.Errorf("a document the agent cannot apply selected the NMState ramdisk: %q", d.RamdiskURL)
	}
}
