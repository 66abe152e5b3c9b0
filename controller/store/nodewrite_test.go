package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

func TestSameColumn(t *testing.T) {
	for _, c := range []struct {
		stored, v any
		want      bool
	}{
		{nil, nil, true},
		{nil, "", false},
		{"", nil, false},
		{"a", "a", true},
		{"a", "b", false},
		{[]byte("a"), "a", true},
		{[]byte("a"), "b", false},
		{int64(1), true, true},
		{int64(0), false, true},
		{int64(0), true, false},
		{int64(2), true, false}, // not a boolean SQLite wrote: rewrite it
		{true, true, true},
		{false, true, false},
		{int64(7), int64(7), true},
		{int64(7), int64(8), false},
		{nil, int64(0), false},
		{"7", int64(7), false},
		{float64(7), int64(7), false}, // a type it does not know: rewrite
		{"x", []byte("x"), true},
		{[]byte("x"), []byte("y"), false},
	} {
		if got := sameColumn(c.stored, c.v); got != c.want {
			t.Errorf("sameColumn(%#v, %#v) = %v, want %v", c.stored, c.v, got, c.want)
		}
	}
}

func TestChangedColumns(t *testing.T) {
	n := newNode("a")
	vals, err := nodeValues(n)
	if err != nil {
		t.Fatal(err)
	}
	stored := slices.Clone(vals)
	onlyDocs := columnMask(1<<nodeColumnIndex["doc"] | 1<<nodeColumnIndex["masked_doc"])
	if got := changedColumns(stored, vals); got != onlyDocs {
		t.Errorf("nothing changed: mask %b, want the documents' %b", got, onlyDocs)
	}
	n.ProvisionState = proto.StateManageable
	n.Maintenance = true
	vals, err = nodeValues(n)
	if err != nil {
		t.Fatal(err)
	}
	want := onlyDocs | 1<<nodeColumnIndex["provision_state"] | 1<<nodeColumnIndex["maintenance"]
	if got := changedColumns(stored, vals); got != want {
		t.Errorf("state and maintenance changed: mask %b, want %b", got, want)
	}
	q := updateNodeColumns(want)
	if q != "UPDATE nodes SET provision_state = ?, maintenance = ?, doc = ?, masked_doc = ?, row_version = row_version + 1 WHERE id = ?" {
		t.Errorf("updateNodeColumns = %q", q)
	}
	args := maskedArgs(want, vals, 42)
	if len(args) != 5 || args[0] != string(proto.StateManageable) || args[1] != true || args[4] != int64(42) {
		t.Errorf("maskedArgs = %v", args)
	}
}

// storedColumnsMatch fails t unless every column of the node's row holds
// what nodeValues derives from its stored document, node_projects holds
// its owner and lessee, and its ports carry its conductor group.
func storedColumnsMatch(t *testing.T, s Store, ident string) {
	t.Helper()
	ctx := context.Background()
	ss := s.(*sqlStore)
	var n *proto.Node
	var stored []any
	var id int64
	err := ss.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		id, stored, n, err = ss.getNodeForUpdate(ctx, tx, nil, ss.nodeSelectForUpdate(), ident)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	vals, err := nodeValues(n)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range nodeColumns {
		if docColumns[c] {
			continue
		}
		if !sameColumn(stored[i], vals[i]) {
			t.Errorf("node %s: column %s holds %#v, its document says %#v", ident, c, stored[i], vals[i])
		}
	}
	var want []string
	for _, p := range []*string{n.Owner, n.Lessee} {
		if p != nil && *p != "" && !slices.Contains(want, *p) {
			want = append(want, *p)
		}
	}
	slices.Sort(want)
	rows, err := ss.query(ctx, ss.wdb, "SELECT project FROM node_projects WHERE node_id = ? ORDER BY project", id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	rows.Close()
	if !slices.Equal(got, want) {
		t.Errorf("node %s: node_projects %q, want %q", ident, got, want)
	}
	var groups []string
	rows, err = ss.query(ctx, ss.wdb, "SELECT COALESCE(node_conductor_group, '<null>') FROM ports WHERE node_id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
	}
	rows.Close()
	for _, g := range groups {
		if g != n.ConductorGroup {
			t.Errorf("node %s: a port's node_conductor_group is %q, want %q", ident, g, n.ConductorGroup)
		}
	}
}

// TestUpdateNodeColumns changes each kind of column through UpdateNode,
// which writes only the changed ones, and checks after each write that the
// row, node_projects and the ports' placement agree with the document.
func TestUpdateNodeColumns(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clock := newFakeClock()
		s := openT(t, dsn, Options{Now: clock.Now})
		n := mustCreate(t, s, newNode("cols", func(n *proto.Node) {
			n.Owner, n.ConductorGroup = ptr("p1"), "g1"
		}))
		if err := s.CreatePort(ctx, &proto.Port{UUID: uuid.NewString(), Address: "52:54:00:00:00:01", NodeUUID: n.UUID}); err != nil {
			t.Fatal(err)
		}
		storedColumnsMatch(t, s, n.UUID)
		for _, step := range []struct {
			name string
			fn   func(n *proto.Node)
		}{
			{"nothing", func(n *proto.Node) {}},
			{"name", func(n *proto.Node) { n.Name = ptr("renamed") }},
			{"no name", func(n *proto.Node) { n.Name = nil }},
			{"state", func(n *proto.Node) {
				n.ProvisionState, n.ProvisionUpdatedAt = proto.StateManageable, wireTime(clock.Now())
			}},
			{"maintenance", func(n *proto.Node) { n.Maintenance = true }},
			{"out of maintenance", func(n *proto.Node) { n.Maintenance = false }},
			{"power", func(n *proto.Node) { n.PowerState = ptr(proto.PowerOn) }},
			{"owner", func(n *proto.Node) { n.Owner = ptr("p2") }},
			{"lessee", func(n *proto.Node) { n.Lessee = ptr("p3") }},
			{"lessee is owner", func(n *proto.Node) { n.Lessee = ptr("p2") }},
			{"no owner", func(n *proto.Node) { n.Owner, n.Lessee = nil, nil }},
			{"conductor group", func(n *proto.Node) { n.ConductorGroup = "g2" }},
			{"shard", func(n *proto.Node) { n.Shard = ptr("s1") }},
			{"retired", func(n *proto.Node) { n.Retired = true }},
			{"work", func(n *proto.Node) {
				flowstate.Update(n, func(s *flowstate.State) { s.HeartbeatPending = clock.Now() })
			}},
			{"no work", func(n *proto.Node) {
				flowstate.Update(n, func(s *flowstate.State) { s.HeartbeatPending = time.Time{} })
			}},
			{"description", func(n *proto.Node) { n.Description = ptr(strings.Repeat("d", 100)) }},
		} {
			clock.Advance(time.Second)
			got, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { step.fn(n); return nil })
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if !got.UpdatedAt.Equal(clock.Now().Truncate(time.Microsecond)) {
				t.Errorf("%s: updated_at %v, want %v", step.name, got.UpdatedAt, clock.Now())
			}
			back, err := s.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := nodeValues(got)
			have, _ := nodeValues(back)
			if want[nodeColumnIndex["doc"]] != have[nodeColumnIndex["doc"]] {
				t.Errorf("%s: read back %s\nwant %s", step.name, have[nodeColumnIndex["doc"]], want[nodeColumnIndex["doc"]])
			}
			storedColumnsMatch(t, s, n.UUID)
		}
		// A column that disagrees with the document (written by hand here)
		// is compared with what is stored, not with the old document: the
		// next write puts it right although the node's state did not change.
		ss := s.(*sqlStore)
		if _, err := ss.exec(ctx, ss.wdb, "UPDATE nodes SET provision_state = 'bogus', updated_at = 0, "+bumpRowVersion+" WHERE uuid = ?", n.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateNode(ctx, n.UUID, func(n *proto.Node) error { return nil }); err != nil {
			t.Fatal(err)
		}
		storedColumnsMatch(t, s, n.UUID)
	})
}

// maskCorpus are nodes whose masked documents must come out the same
// whichever way they are computed: secrets at every depth, typed values
// in the free-form objects (as the conductor's flow state keeps them),
// escapes, a last_error that names a secret.
func maskCorpus() []*proto.Node {
	type typed struct {
		Z        string `json:"z"`
		Password string `json:"password"`
		A        int    `json:"a"`
	}
	return []*proto.Node{
		newNode("plain"),
		newNode("fleet", fleetShaped),
		newNode("", func(n *proto.Node) {
			n.DriverInfo = nil
			n.Properties = proto.Dict{}
			n.Extra = nil
		}),
		newNode("secrets", func(n *proto.Node) {
			fleetShaped(n)
			n.DriverInternalInfo["nested"] = map[string]any{"list": []any{map[string]any{"token": "t0p", "keep": 1.5}}, "ipmi_password": "x"}
			n.DriverInternalInfo["typed"] = typed{Z: "z", Password: "hunter2", A: 3}
			n.DriverInternalInfo["big"] = int64(1) << 52
			n.InstanceInfo = proto.Dict{"configdrive": "H4sI", "image_source": "http://img/<a>&b", "image_checksum": "abc"}
			n.Extra = proto.Dict{"note": "line\nbreak \u2028 \"quoted\" é"}
			n.LastError = ptr("GET https://admin:hunter2@bmc/redfish/v1 failed: agent_token=t0p")
			n.Description = ptr("<b>&amp;</b>")
			n.Traits = []string{"CUSTOM_Z", "CUSTOM_A"}
			n.InspectionStartedAt = wireTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
		}),
		newNode("bad utf8", func(n *proto.Node) {
			n.Description = ptr("a\xffb")
			n.Extra = proto.Dict{"k": "\xfe"}
		}),
	}
}

func TestMaskedDocOf(t *testing.T) {
	for _, n := range maskCorpus() {
		doc := *n
		b, err := json.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		want, err := maskedDoc(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := maskedDocOf(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("node %s:\n got %s\nwant %s", n.UUID, got, want)
		}
		for _, secret := range []string{"hunter2", "t0p", "H4sI", "UdmRJ46lkL4OP8B8aUv3i0PHtN7IyZbnSBc85XOOmIA"} {
			if strings.Contains(string(got), secret) {
				t.Errorf("node %s: masked document holds %q: %s", n.UUID, secret, got)
			}
		}
	}
}

// BenchmarkMaskedDoc compares the masked copy computed by decoding the
// whole document with maskedDocOf, on a fleet node's document.
func BenchmarkMaskedDoc(b *testing.B) {
	n := newNode("fleet", fleetShaped)
	doc, err := json.Marshal(n)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   func([]byte) ([]byte, error)
	}{{"decode", maskedDoc}, {"members", maskedDocOf}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				if _, err := c.fn(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
