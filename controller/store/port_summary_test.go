package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// A port summary list holds the same ports, in the same order, for every
// filter, sort and marker, with UUID and address equal to the documents'.
func TestListPortSummaryMatchesDocuments(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		s := openT(t, dsn, Options{})
		ctx := context.Background()
		a, b := newNode("a"), newNode("b")
		mustCreate(t, s, a)
		mustCreate(t, s, b)
		for i := range 7 {
			owner := a
			if i%3 == 0 {
				owner = b
			}
			p := &proto.Port{UUID: fmt.Sprintf("30000000-0000-4000-8000-%012d", (i*5)%7), NodeUUID: owner.UUID,
				Address: fmt.Sprintf("52:54:00:00:00:%02X", 0x70-i), Extra: proto.Dict{"i": i}}
			if err := s.CreatePort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []PortQuery{
			{}, {NodeUUID: a.UUID}, {NodeUUID: "no-such-node"}, {Address: "52:54:00:00:00:6e"},
			{SortKey: "address", SortDir: "desc"}, {SortKey: "uuid", Limit: 3},
			{SortKey: "uuid", Marker: "30000000-0000-4000-8000-000000000003"},
			{NodeUUID: a.UUID, Marker: "30000000-0000-4000-8000-000000000005", Limit: 2},
		} {
			full, err := s.ListPorts(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			q.Summary = true
			sum, err := s.ListPorts(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(sum) != len(full) {
				t.Fatalf("%+v: %d summaries, %d ports", q, len(sum), len(full))
			}
			for i := range full {
				if sum[i].UUID != full[i].UUID || sum[i].Address != full[i].Address || sum[i].NodeUUID != "" || sum[i].Extra != nil {
					t.Errorf("%+v [%d]: summary %+v, document %+v", q, i, sum[i], full[i])
				}
			}
		}
	})
}
