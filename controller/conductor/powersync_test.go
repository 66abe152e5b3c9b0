package conductor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// testHW is a hardware type whose power interface is testPower: tests
// decide what each power read does through its hook.
const testHW = "conductor-test"

type testPower struct {
	mu   sync.Mutex
	hook func(ctx context.Context, n *proto.Node) (proto.PowerState, error)
}

func (p *testPower) set(h func(ctx context.Context, n *proto.Node) (proto.PowerState, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

func (p *testPower) Validate(context.Context, *proto.Node) error { return nil }
func (p *testPower) GetPowerState(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
	p.mu.Lock()
	h := p.hook
	p.mu.Unlock()
	if h == nil {
		return proto.PowerOn, nil
	}
	return h(ctx, n)
}
func (p *testPower) SetPowerState(context.Context, *proto.Node, proto.PowerState, time.Duration) error {
	return nil
}

var power = &testPower{}

func init() {
	driver.RegisterPower("conductor-test", power)
	driver.Register(driver.HardwareType{Name: testHW, Supported: map[string][]string{
		"power": {"conductor-test"}, "management": {"fake"}, "boot": {"fake"}, "inspect": {"fake"}, "deploy": {"fake"},
	}})
}

func ptr[T any](v T) *T { return &v }

// testConductor is a conductor on a fresh SQLite store, not running.
func testConductor(t *testing.T, cfg Config) (*Conductor, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	if cfg.Name == "" {
		cfg.Name = "c1"
	}
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(cfg), st
}

// addNodes creates n manageable, powered-off nodes; bmc(i) is node i's
// redfish_address ("" for none); hw is the hardware type.
func addNodes(t *testing.T, st store.Store, hw string, n int, bmc func(i int) string) []string {
	t.Helper()
	var uuids []string
	for i := range n {
		nd := &proto.Node{
			UUID: uuid.NewString(), Name: ptr(fmt.Sprintf("n%03d", i)), Driver: hw,
			PowerInterface: "fake", ManagementInterface: "fake", BootInterface: "fake", InspectInterface: "fake", DeployInterface: "fake",
			DriverInfo: proto.Dict{}, DriverInternalInfo: proto.Dict{}, Properties: proto.Dict{}, Extra: proto.Dict{}, InstanceInfo: proto.Dict{},
			ProvisionState: proto.StateManageable, PowerState: ptr(proto.PowerOff),
		}
		if hw == testHW {
			nd.PowerInterface = "conductor-test"
		}
		if a := bmc(i); a != "" {
			nd.DriverInfo["redfish_address"] = a
		}
		if err := st.CreateNode(context.Background(), nd); err != nil {
			t.Fatal(err)
		}
		uuids = append(uuids, nd.UUID)
	}
	return uuids
}

// nodeBMC is n's BMC key, as the store's columns give it to a round.
func nodeBMC(n *proto.Node) string {
	var addrs [3]string
	for i, k := range store.PowerSyncAddressKeys {
		addrs[i], _ = n.DriverInfo[k].(string)
	}
	return bmcKey(n.UUID, addrs)
}

func TestPlanRound(t *testing.T) {
	node := func(id, addr string) syncTarget {
		return syncTarget{UUID: id, bmc: bmcKey(id, [3]string{addr})}
	}
	a1, a2, b1, c1, d1 := node("a1", "10.0.0.1"), node("a2", "10.0.0.1"), node("b1", "10.0.0.2"), node("c1", ""), node("d1", "")
	for _, tc := range []struct {
		name   string
		nodes  []syncTarget
		missed []string
		want   [][]string
	}{
		{"one batch per BMC, in order", []syncTarget{a1, b1, a2, c1, d1}, nil,
			[][]string{{"a1", "a2"}, {"b1"}, {"c1"}, {"d1"}}},
		{"address case and spaces name one BMC", []syncTarget{a1, node("a3", " 10.0.0.1 ")}, nil,
			[][]string{{"a1", "a3"}}},
		{"missed BMCs first", []syncTarget{a1, b1, a2, c1, d1}, []string{"d1", "b1"},
			[][]string{{"b1"}, {"d1"}, {"a1", "a2"}, {"c1"}}},
		{"missed node first within its BMC", []syncTarget{a1, b1, a2}, []string{"a2"},
			[][]string{{"a2", "a1"}, {"b1"}}},
		{"nothing due", nil, []string{"a1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			missed := map[string]bool{}
			for _, m := range tc.missed {
				missed[m] = true
			}
			var got [][]string
			for _, b := range planRound(tc.nodes, missed) {
				var ids []string
				for _, n := range b.nodes {
					ids = append(ids, n.UUID)
				}
				got = append(got, ids)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("planRound = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// TestPowerSyncBudget: with one worker and BMCs that take 10 s (of a fake
// clock) each, a 25 s budget reaches three of five nodes; the two missed go
// first in the next round.
func TestPowerSyncBudget(t *testing.T) {
	c, st := testConductor(t, Config{PowerSyncInterval: time.Minute, PowerSyncWorkers: 1, PowerSyncBudget: 25 * time.Second})
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.power.now = clock.now
	uuids := addNodes(t, st, testHW, 5, func(i int) string { return fmt.Sprintf("10.0.0.%d", i) })
	var mu sync.Mutex
	var order []string
	power.set(func(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
		mu.Lock()
		order = append(order, n.UUID)
		mu.Unlock()
		clock.advance(10 * time.Second)
		return proto.PowerOff, nil
	})
	t.Cleanup(func() { power.set(nil) })

	r := c.power.round(t.Context())
	if r.Candidates != 5 || r.Reached != 3 || r.Missed != 2 {
		t.Fatalf("first round = %+v, want 5 candidates, 3 reached, 2 missed", r)
	}
	first := slices.Clone(order)
	var notReached []string
	for _, u := range uuids {
		if !slices.Contains(first, u) {
			notReached = append(notReached, u)
		}
	}
	order = nil
	r = c.power.round(t.Context())
	if r.Reached != 3 || r.Missed != 2 {
		t.Fatalf("second round = %+v, want 3 reached, 2 missed", r)
	}
	if !slices.Equal(sortedCopy(order[:2]), sortedCopy(notReached)) {
		t.Errorf("second round started with %v, want the nodes the first missed, %v", order[:2], notReached)
	}
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestPowerSyncUnderReservation: each BMC read happens while the node is
// reserved by this conductor, nodes behind one BMC are read one at a time,
// different BMCs in parallel; the state read back and the check are
// recorded, and the reservation is released.
func TestPowerSyncUnderReservation(t *testing.T) {
	c, st := testConductor(t, Config{PowerSyncInterval: time.Minute, PowerSyncWorkers: 4})
	uuids := addNodes(t, st, testHW, 6, func(i int) string { return fmt.Sprintf("10.0.1.%d", i%2) })
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		maxPer   int
		reserved = map[string]string{}
	)
	both := make(chan struct{})
	var bothOnce sync.Once
	power.set(func(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
		cur, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			return "", err
		}
		key := nodeBMC(n)
		mu.Lock()
		if cur.Reservation != nil {
			reserved[n.UUID] = *cur.Reservation
		}
		inFlight[key]++
		maxPer = max(maxPer, inFlight[key])
		if len(inFlight) == 2 && inFlight[nodeBMC(&proto.Node{DriverInfo: proto.Dict{"redfish_address": "10.0.1.0"}})] > 0 &&
			inFlight[nodeBMC(&proto.Node{DriverInfo: proto.Dict{"redfish_address": "10.0.1.1"}})] > 0 {
			bothOnce.Do(func() { close(both) })
		}
		mu.Unlock()
		// The first calls wait for the other BMC's: both BMCs are read in parallel.
		select {
		case <-both:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		mu.Lock()
		inFlight[key]--
		mu.Unlock()
		return proto.PowerOn, nil
	})
	t.Cleanup(func() { power.set(nil) })

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // safety net only
	defer cancel()
	r := c.power.round(ctx)
	if r.Reached != 6 || r.Missed != 0 {
		t.Fatalf("round = %+v, want all 6 reached", r)
	}
	if maxPer != 1 {
		t.Errorf("up to %d calls at once to one BMC, want 1", maxPer)
	}
	for _, u := range uuids {
		if reserved[u] != "c1" {
			t.Errorf("node %s read while reserved by %q, want c1", u, reserved[u])
		}
		n, err := st.GetNode(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		if n.Reservation != nil {
			t.Errorf("node %s still reserved by %s", u, *n.Reservation)
		}
		if n.PowerState == nil || *n.PowerState != proto.PowerOn {
			t.Errorf("node %s power_state = %v, want power on (read back)", u, n.PowerState)
		}
		if chk, ok := lastBMCCheck(n); !ok || chk.Error != "" || chk.Operation != "power state" {
			t.Errorf("node %s last BMC check = %+v (%v), want a successful power state read", u, chk, ok)
		}
	}
}

type countingObserver struct {
	mu     sync.Mutex
	calls  map[string]int
	errors int
}

func (o *countingObserver) ObserveBMCRequest(drv, _ string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[drv]++
	if err != nil {
		o.errors++
	}
}

// TestPowerSyncCountsBMCCalls: fake-hardware's power reads are counted by
// the observer the conductor's context carries (the BMC metrics), and a
// failed read is recorded as the node's last BMC check without touching its
// power state; busy or maintenance nodes are left alone.
func TestPowerSyncCountsBMCCalls(t *testing.T) {
	c, st := testConductor(t, Config{PowerSyncInterval: time.Minute})
	uuids := addNodes(t, st, driver.FakeHardware, 4, func(int) string { return "" })
	ctx := t.Context()
	if _, err := st.UpdateNode(ctx, uuids[1], func(n *proto.Node) error {
		n.DriverInfo["fake_power_error"] = "BMC says no"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateNode(ctx, uuids[2], func(n *proto.Node) error { n.Maintenance = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, uuids[3], "someone-else"); err != nil {
		t.Fatal(err)
	}
	obs := &countingObserver{calls: map[string]int{}}
	r := c.power.round(driver.WithBMCObserver(ctx, obs))
	if r.Candidates != 2 || r.Reached != 2 {
		t.Fatalf("round = %+v, want the 2 nodes neither in maintenance nor reserved", r)
	}
	if obs.calls[driver.FakeHardware] != 2 || obs.errors != 1 {
		t.Errorf("observed %v calls, %d errors; want 2 fake-hardware calls, 1 error", obs.calls, obs.errors)
	}
	n, _ := st.GetNode(ctx, uuids[1])
	chk, ok := lastBMCCheck(n)
	if !ok || chk.Error != "BMC says no" {
		t.Errorf("failed node's last BMC check = %+v (%v), want the BMC's error", chk, ok)
	}
	if n.PowerState == nil || *n.PowerState != proto.PowerOff {
		t.Errorf("failed read changed power_state to %v", n.PowerState)
	}
	for _, u := range uuids[2:] {
		n, _ := st.GetNode(ctx, u)
		if _, ok := lastBMCCheck(n); ok {
			t.Errorf("node %s (maintenance or reserved) was read", u)
		}
	}
}

// TestHeartbeatNotDelayedByBMC: while a power-sync read hangs on a BMC,
// the conductor keeps heartbeating. Before the liveness loop had its own
// goroutine, the heartbeat waited for the whole sync.
func TestHeartbeatNotDelayedByBMC(t *testing.T) {
	c, st := testConductor(t, Config{HeartbeatInterval: 5 * time.Millisecond, PowerSyncInterval: 5 * time.Millisecond, ScanInterval: time.Hour})
	addNodes(t, st, testHW, 1, func(int) string { return "10.0.2.1" })
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	power.set(func(ctx context.Context, n *proto.Node) (proto.PowerState, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return proto.PowerOff, nil
	})
	t.Cleanup(func() { power.set(nil) })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	safety := time.After(time.Minute) // a safety net, not the verdict
	select {
	case <-entered:
	case <-safety:
		t.Fatal("power sync never reached the BMC")
	}
	before, _ := c.Heartbeats()
	for {
		beats, failed := c.Heartbeats()
		if failed > 0 {
			t.Fatalf("%d heartbeats failed", failed)
		}
		if beats >= before+3 {
			break
		}
		select {
		case <-safety:
			t.Fatalf("heartbeats stuck at %d while a BMC call hung", beats)
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
}

// lastBMCCheck is the BMC check recorded on n, ok false when there is none.
func lastBMCCheck(n *proto.Node) (proto.BMCCheck, bool) {
	fs, _ := flowstate.Of(n)
	if fs.LastBMCCheck == nil {
		return proto.BMCCheck{}, false
	}
	return *fs.LastBMCCheck, true
}

// historyRecorder is a store that notes how a node's history is written.
type historyRecorder struct {
	store.Store
	mu       sync.Mutex
	withNode []proto.HistoryEvent // stored in the node's own write
	alone    []proto.HistoryEvent // stored by AddHistory, after it
}

func (h *historyRecorder) UpdateNodeWithHistory(ctx context.Context, ident string, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, error) {
	n, err := h.Store.(store.NodeHistoryWriter).UpdateNodeWithHistory(ctx, ident, fn, events)
	if err == nil {
		h.mu.Lock()
		h.withNode = append(h.withNode, events...)
		h.mu.Unlock()
	}
	return n, err
}

func (h *historyRecorder) AddHistory(ctx context.Context, ident string, ev proto.HistoryEvent) error {
	h.mu.Lock()
	h.alone = append(h.alone, ev)
	h.mu.Unlock()
	return h.Store.AddHistory(ctx, ident, ev)
}

// TestPowerSyncChangeAndItsEventAreOneWrite: a power state changed
// outside Kiln is stored with the history event that explains it, in one
// write; a reader once saw the new state and no event yet (test/conductor
// TestPowerSync, at load 35).
func TestPowerSyncChangeAndItsEventAreOneWrite(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "kiln.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := &historyRecorder{Store: st}
	c := New(Config{Store: rec, Name: "c1", PowerSyncInterval: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	uuids := addNodes(t, st, testHW, 1, func(int) string { return "10.0.2.1" })
	power.set(func(context.Context, *proto.Node) (proto.PowerState, error) { return proto.PowerOn, nil })
	t.Cleanup(func() { power.set(nil) })

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // safety net only
	defer cancel()
	if r := c.power.round(ctx); r.Reached != 1 {
		t.Fatalf("round = %+v, want the node reached", r)
	}
	n, err := st.GetNode(ctx, uuids[0])
	if err != nil {
		t.Fatal(err)
	}
	if n.PowerState == nil || *n.PowerState != proto.PowerOn {
		t.Fatalf("power_state = %v, want power on", n.PowerState)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.alone) != 0 {
		t.Errorf("history written after the node: %+v", rec.alone)
	}
	if len(rec.withNode) != 1 || !strings.Contains(rec.withNode[0].Event, "according to its BMC") {
		t.Errorf("history written with the node = %+v, want the sync's event", rec.withNode)
	}
	hist, err := st.ListHistory(ctx, uuids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(hist), "according to its BMC") {
		t.Errorf("stored history %+v has no sync event", hist)
	}
}
