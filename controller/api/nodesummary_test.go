package api

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// TestNodeSummaryMatchesNode: the default list written from summaries has,
// node by node, the bytes node writes for the node read from the store,
// at every microversion: names that need escaping or hold the summary
// row's separator (read again column by column), no name, instance UUIDs,
// power states and maintenance set or not, reservations, and the states
// older microversions rename.
func TestNodeSummaryMatchesNode(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sums, ok := store.SummariesOf(st)
	if !ok {
		t.Fatal("the SQLite store has no summaries")
	}
	r := rand.New(rand.NewPCG(5, 6))
	states := []proto.ProvisionState{proto.StateAvailable, proto.StateInspectWait, proto.StateActive, proto.StateEnroll}
	names := []string{"plain-%d", "n<&>-%d", "ünï\"cödé\\-%d", "sep\x1fin-%d", "=eq-%d", ""}
	const count = 48
	for i := range count {
		n := &proto.Node{UUID: fmt.Sprintf("0d1e2f3a-0000-4000-8000-%012d", i), Driver: "fake-hardware",
			ProvisionState: states[i%len(states)], Maintenance: r.IntN(2) == 0}
		// Every name form once in the first six nodes (the separator's in
		// the fourth), then at random.
		form := names[i%len(names)]
		if i >= len(names) {
			form = names[r.IntN(len(names))]
		}
		if form != "" {
			name := fmt.Sprintf(form, i)
			n.Name = &name
		}
		if r.IntN(2) == 0 {
			inst := fmt.Sprintf("1a2b3c4d-0000-4000-8000-%012d", i)
			n.InstanceUUID = &inst
		}
		if r.IntN(3) > 0 {
			ps := []proto.PowerState{proto.PowerOn, proto.PowerOff}[r.IntN(2)]
			n.PowerState = &ps
		}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		if r.IntN(3) == 0 {
			if _, err := st.Reserve(ctx, n.UUID, "cond<&>"); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := echo.New()
	for minor := 1; minor <= MaxMinor; minor++ {
		req := httptest.NewRequest("GET", "/v1/nodes", nil)
		c := e.NewContext(req, httptest.NewRecorder())
		c.Set(ctxMinor, minor)
		plan := nodePlan(c, proto.NodeDefaultListFields)
		fields, ok := summaryPlan(plan)
		if !ok {
			t.Fatalf("1.%d: the default list's plan is not a summary's", minor)
		}
		// Two pages: the first holds the separator's row (read column by
		// column), the second not.
		for _, q := range []store.NodeQuery{{Limit: count / 2}, {Limit: count, Marker: fmt.Sprintf("0d1e2f3a-0000-4000-8000-%012d", count/2-1)}} {
			list, err := sums.ListNodeSummaries(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != count/2 {
				t.Fatalf("1.%d: %d summaries, want %d", minor, len(list), count/2)
			}
			for i := range list {
				n, err := st.GetNode(ctx, list[i].UUID)
				if err != nil {
					t.Fatal(err)
				}
				want := getWriter()
				if err := want.node(c, n, plan); err != nil {
					t.Fatal(err)
				}
				got := getWriter()
				if err := got.nodeSummary(baseURL(c), minor, &list[i], fields, plan); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.buf.Bytes(), want.buf.Bytes()) {
					t.Fatalf("1.%d, node %s:\n summary %s\n node    %s", minor, n.UUID, got.buf.Bytes(), want.buf.Bytes())
				}
				putWriter(want)
				putWriter(got)
			}
		}
	}
}

// TestSummaryPlanRefuses: a plan with a field a summary lacks is left to
// the generic path.
func TestSummaryPlanRefuses(t *testing.T) {
	for _, fields := range [][]string{nil, {"uuid", "driver"}, {"uuid", "reservation"}} {
		p := planFields(nodeWireFields, MaxMinor, fields)
		if _, ok := summaryPlan(p); ok {
			t.Errorf("fields %v: summaryPlan accepted a plan with fields a summary lacks", fields)
		}
	}
	if _, ok := summaryPlan(planFields(nodeWireFields, MaxMinor, []string{"name", "uuid"})); !ok {
		t.Error("fields name, uuid: summaryPlan refused a plan a summary has")
	}
}
