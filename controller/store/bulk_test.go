package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestCreateNodesInBatches(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := openT(t, dsn, Options{Now: newFakeClock().Now})
		const count = bulkBatch + 7 // more than one batch
		var nodes []*proto.Node
		var ports []*proto.Port
		for i := range count {
			name := fmt.Sprintf("bulk-%04d", i)
			n := &proto.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Name: &name, Driver: "fake-hardware",
				ProvisionState: proto.StateAvailable, Properties: proto.Dict{"cpus": float64(i%8 + 1)}}
			nodes = append(nodes, n)
			ports = append(ports, &proto.Port{UUID: fmt.Sprintf("10000000-0000-4000-8000-%012d", i), NodeUUID: n.UUID,
				Address: fmt.Sprintf("52:54:00:%02X:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff)})
		}
		if err := CreateNodes(ctx, st, nodes, ports); err != nil {
			t.Fatal(err)
		}
		all, err := st.ListNodes(ctx, NodeQuery{})
		if err != nil || len(all) != count {
			t.Fatalf("listed %d nodes (%v), want %d", len(all), err, count)
		}
		for _, i := range []int{0, bulkBatch - 1, bulkBatch, count - 1} {
			got, err := st.GetNode(ctx, *nodes[i].Name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, nodes[i]) {
				t.Errorf("node %d stored as\n%+v\nwant\n%+v", i, got, nodes[i])
			}
			p, err := st.GetPortByAddress(ctx, ports[i].Address)
			if err != nil || p.NodeUUID != nodes[i].UUID || p.Address != ports[i].Address {
				t.Errorf("port %d: %+v %v", i, p, err)
			}
		}
		dup := &proto.Node{UUID: nodes[3].UUID, Driver: "fake-hardware"}
		if err := CreateNodes(ctx, st, []*proto.Node{dup}, nil); !errors.Is(err, ErrDuplicateUUID) {
			t.Errorf("duplicate UUID: %v", err)
		}
		orphan := &proto.Port{UUID: "20000000-0000-4000-8000-000000000001", NodeUUID: "no-such-node", Address: "52:54:00:ff:ff:ff"}
		if err := CreateNodes(ctx, st, nil, []*proto.Port{orphan}); !errors.Is(err, ErrNotFound) {
			t.Errorf("port of an unknown node: %v", err)
		}
	})
}
