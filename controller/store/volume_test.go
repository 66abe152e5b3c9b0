package store

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestVolumeUniqueAndCascade: on each backend, a type+connector_id and a
// node's boot index are unique (with their own errors), and deleting the
// node deletes its connectors and targets.
func TestVolumeUniqueAndCascade(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{})
		name := "v0"
		n := &proto.Node{UUID: "11111111-2222-4333-8444-555555555501", Name: &name, Driver: "fake-hardware"}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		cs, err := NewResources(st, VolumeConnectorResource)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := NewResources(st, VolumeTargetResource)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.Create(ctx, &proto.VolumeConnector{UUID: "aaaaaaaa-0000-4000-8000-000000000011", NodeUUID: n.UUID, Type: "iqn", ConnectorID: "iqn.a"}); err != nil {
			t.Fatal(err)
		}
		err = cs.Create(ctx, &proto.VolumeConnector{UUID: "aaaaaaaa-0000-4000-8000-000000000012", NodeUUID: n.UUID, Type: "iqn", ConnectorID: "iqn.a"})
		if !errors.Is(err, ErrConnectorTaken) {
			t.Errorf("second iqn.a: %v, want ErrConnectorTaken", err)
		}
		if err := cs.Create(ctx, &proto.VolumeConnector{UUID: "aaaaaaaa-0000-4000-8000-000000000013", NodeUUID: n.UUID, Type: "wwpn", ConnectorID: "iqn.a"}); err != nil {
			t.Errorf("same connector_id, other type: %v", err)
		}
		if err := ts.Create(ctx, &proto.VolumeTarget{UUID: "aaaaaaaa-0000-4000-8000-000000000021", NodeUUID: n.UUID, VolumeType: "iscsi", VolumeID: "v1"}); err != nil {
			t.Fatal(err)
		}
		err = ts.Create(ctx, &proto.VolumeTarget{UUID: "aaaaaaaa-0000-4000-8000-000000000022", NodeUUID: n.UUID, VolumeType: "iscsi", VolumeID: "v2"})
		if !errors.Is(err, ErrBootIndexTaken) {
			t.Errorf("second boot index 0: %v, want ErrBootIndexTaken", err)
		}
		if err := st.DeleteNode(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		if c, err := cs.List(ctx, Query{}); err != nil || len(c) != 0 {
			t.Errorf("connectors after the node's delete: %v %v", c, err)
		}
		if tg, err := ts.List(ctx, Query{}); err != nil || len(tg) != 0 {
			t.Errorf("targets after the node's delete: %v %v", tg, err)
		}
	})
}
