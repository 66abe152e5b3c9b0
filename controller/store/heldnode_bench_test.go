package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/proto"
)

// BenchmarkConductorPass is one conductor pass over a node as a fleet's
// provide and deploy phases run it: the reservation, three commits of
// small decided changes (one with a history event) and the commit that
// releases the node. "read" commits through UpdateNodeWithHistory, which
// reads and decodes the row again for each commit; "held" through
// UpdateHeldNode from the version ReserveHeld gave, which reads nothing.
func BenchmarkConductorPass(b *testing.B) {
	for _, path := range []struct {
		name string
		pass func(ctx context.Context, s *sqlStore, ident string, i int) error
	}{
		{"read", passByRead},
		{"held", passHeld},
	} {
		b.Run(path.name, func(b *testing.B) {
			s, uuids := writePathStore(b)
			ctx := context.Background()
			if err := s.RegisterConductor(ctx, Conductor{Hostname: "c1"}); err != nil {
				b.Fatal(err)
			}
			ss := s.(*sqlStore)
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			i := 0
			for b.Loop() {
				if err := path.pass(ctx, ss, uuids[i%len(uuids)], i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// passCommit is the change of commit k of pass i; the last releases.
func passCommit(i, k int) func(n *proto.Node) error {
	return func(n *proto.Node) error {
		n.DriverInternalInfo["clean_step_index"] = i*10 + k
		n.DriverInternalInfo["kiln_flow_step"] = fmt.Sprintf("step-%d", k)
		if k == passCommits-1 {
			n.Reservation = nil
		}
		return nil
	}
}

// passCommits is how many commits a pass makes after its reservation.
const passCommits = 4

// passEvents is the history of commit k: one event on the second.
func passEvents(k int) []proto.HistoryEvent {
	if k != 1 {
		return nil
	}
	return []proto.HistoryEvent{{UUID: uuid.NewString(), CreatedAt: wireTime(time.Now()),
		Event: "Clean step erase_devices_metadata done", EventType: "conductor", Severity: "INFO"}}
}

func passByRead(ctx context.Context, s *sqlStore, ident string, i int) error {
	if _, err := s.Reserve(ctx, ident, "c1"); err != nil {
		return err
	}
	for k := range passCommits {
		if _, err := s.UpdateNodeWithHistory(ctx, ident, passCommit(i, k), passEvents(k)); err != nil {
			return err
		}
	}
	return nil
}

func passHeld(ctx context.Context, s *sqlStore, ident string, i int) error {
	_, held, err := s.ReserveHeld(ctx, ident, "c1")
	if err != nil {
		return err
	}
	for k := range passCommits {
		if _, held, err = s.UpdateHeldNode(ctx, ident, held, passCommit(i, k), passEvents(k)); err != nil {
			return err
		}
	}
	return nil
}
