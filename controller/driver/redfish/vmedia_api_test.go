package redfish_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// TestAttachVirtualMediaEveryPersonality: the management interface's
// virtual media (Ironic's /vmedia) on each simulated BMC: attach an image
// to the CD (replacing what it held), read it back, detach by type and all
// at once; a device the BMC lacks is a refused request, not a BMC failure.
func TestAttachVirtualMediaEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab := startLab(t, 1, name)
			mg := &redfish.Management{Pool: newPool(t, fast)}
			n := nodeFor(lab.BMCs[0], nil)
			m := mem(lab, 0)
			if err := m.InsertMedia(ctx, "http://old/stale.iso", true); err != nil {
				t.Fatal(err)
			}
			const img = "http://images.example/rescue.iso"
			if err := mg.AttachVirtualMedia(ctx, n, "cdrom", img); err != nil {
				t.Fatalf("attach: %v", err)
			}
			if md, _ := m.Media(ctx); !md.Inserted || md.Image != img {
				t.Fatalf("BMC media after attach: %+v", md)
			}
			got, err := mg.GetVirtualMedia(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			cd := slices.IndexFunc(got, func(v proto.VirtualMedia) bool { return slices.Contains(v.MediaTypes, "CD") })
			if cd < 0 || !got[cd].Inserted || got[cd].Image != img {
				t.Fatalf("get: %+v", got)
			}
			for _, typ := range []string{"floppy", "disk"} {
				if err := mg.AttachVirtualMedia(ctx, n, typ, img); !errors.Is(err, driver.ErrInvalidParameter) {
					t.Errorf("attach to %s, which the BMC lacks: %v, want an invalid parameter", typ, err)
				}
			}
			if err := mg.DetachVirtualMedia(ctx, n, []string{"cdrom"}); err != nil {
				t.Fatalf("detach cdrom: %v", err)
			}
			if md, _ := m.Media(ctx); md.Inserted || md.Image != "" {
				t.Fatalf("BMC media after detach: %+v", md)
			}
			if err := mg.DetachVirtualMedia(ctx, n, []string{"cdrom"}); err != nil {
				t.Errorf("detach of an empty drive: %v", err)
			}
			if err := mg.AttachVirtualMedia(ctx, n, "cdrom", img); err != nil {
				t.Fatal(err)
			}
			if err := mg.DetachVirtualMedia(ctx, n, nil); err != nil {
				t.Fatalf("detach all: %v", err)
			}
			if got, err := mg.GetVirtualMedia(ctx, n); err != nil || len(got) == 0 || got[cd].Inserted || got[cd].Image != "" {
				t.Errorf("get after detach all: %+v, %v", got, err)
			}
		})
	}
}
