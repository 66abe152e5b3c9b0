package store

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestDeployTemplateNames: names are unique on each backend, on create and
// on rename, and a name filter finds one template.
func TestDeployTemplateNames(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		rs, err := NewResources(st, DeployTemplateResource)
		if err != nil {
			t.Fatal(err)
		}
		step := []proto.DeployTemplateStep{{Interface: "bios", Step: "apply_configuration", Args: proto.Dict{"k": "v"}, Priority: 150}}
		a := &proto.DeployTemplate{UUID: "aaaaaaaa-0000-4000-8000-000000000001", Name: "CUSTOM_A", Steps: step, Links: []proto.Link{{Href: "x"}}}
		b := &proto.DeployTemplate{UUID: "aaaaaaaa-0000-4000-8000-000000000002", Name: "CUSTOM_B", Steps: step}
		for _, d := range []*proto.DeployTemplate{a, b} {
			if err := rs.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		dup := &proto.DeployTemplate{UUID: "aaaaaaaa-0000-4000-8000-000000000003", Name: "CUSTOM_A", Steps: step}
		if err := rs.Create(ctx, dup); !errors.Is(err, ErrTemplateNameTaken) {
			t.Errorf("create with a taken name: %v, want ErrTemplateNameTaken", err)
		}
		if _, err := rs.Update(ctx, b.UUID, func(d *proto.DeployTemplate) error { d.Name = "CUSTOM_A"; return nil }); !errors.Is(err, ErrTemplateNameTaken) {
			t.Errorf("rename onto a taken name: %v, want ErrTemplateNameTaken", err)
		}
		got, err := rs.List(ctx, Query{Filters: map[string]string{"name": "CUSTOM_B"}})
		if err != nil || len(got) != 1 || got[0].UUID != b.UUID || got[0].Steps[0].Priority != 150 || got[0].Steps[0].Args["k"] != "v" {
			t.Fatalf("by name: %+v, %v", got, err)
		}
		if got, err := rs.Get(ctx, a.UUID); err != nil || got.Links != nil {
			t.Errorf("stored with links: %+v, %v", got, err)
		}
	})
}
