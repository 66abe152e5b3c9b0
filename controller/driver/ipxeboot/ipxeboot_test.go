package ipxeboot_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/ipxeboot"
	"github.com/kilnhq/kiln/proto"
)

// recorder is a management interface that records the boot devices set.
type recorder struct {
	mu    sync.Mutex
	calls []string
	fail  error
}

func (r *recorder) Validate(context.Context, *proto.Node) error { return r.fail }
func (r *recorder) SetBootDevice(_ context.Context, _ *proto.Node, dev string, persistent bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	p := "once"
	if persistent {
		p = "persistent"
	}
	r.calls = append(r.calls, dev+"/"+p)
	return nil
}

var rec = &recorder{}

func init() {
	driver.RegisterManagement("ipxe-test-recorder", rec)
	driver.Register(driver.HardwareType{Name: "ipxe-test", Supported: map[string][]string{
		"power": {"fake"}, "management": {"ipxe-test-recorder"}, "boot": {"ipxe"}, "inspect": {"fake"}, "deploy": {"direct"}}})
}

func TestBootDevices(t *testing.T) {
	ctx := context.Background()
	n := &proto.Node{UUID: "u", Driver: "ipxe-test", PowerInterface: "fake", ManagementInterface: "ipxe-test-recorder", BootInterface: "ipxe", InspectInterface: "fake"}
	set, err := driver.Resolve(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Boot.(ipxeboot.Boot); !ok {
		t.Fatalf("boot interface %T", set.Boot)
	}
	b := set.Boot
	if err := b.Validate(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := b.PrepareRamdisk(ctx, n, driver.RamdiskParams{}); err != nil {
		t.Fatal(err)
	}
	if err := b.CleanUpRamdisk(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := b.PrepareInstance(ctx, n); err != nil {
		t.Fatal(err)
	}
	if want := []string{"pxe/once", "disk/persistent"}; !slices.Equal(rec.calls, want) {
		t.Fatalf("boot devices %v, want %v", rec.calls, want)
	}
	rec.fail = errors.New("BMC said no")
	defer func() { rec.fail = nil }()
	if err := b.PrepareRamdisk(ctx, n, driver.RamdiskParams{}); err == nil || !errors.Is(err, rec.fail) {
		t.Fatalf("management failure: %v", err)
	}
	if err := b.Validate(ctx, &proto.Node{Driver: "nope"}); err == nil {
		t.Fatal("validate of an unknown hardware type passed")
	}
	bad := *n
	bad.DriverInfo = proto.Dict{"preprovisioning_network_data": "interfaces:\n- name: e\n  type: ethernet\n  state: absent\n"}
	if err := b.Validate(ctx, &bad); err == nil || !strings.Contains(err.Error(), `state "absent" not supported`) {
		t.Fatalf("validate with network data the agent cannot apply: %v", err)
	}
}
