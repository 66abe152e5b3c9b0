package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

func TestDecideHeartbeat(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	stamp := now.Format(time.RFC3339Nano)
	holder := "c1"
	hb := proto.HeartbeatRequest{CallbackURL: "http://10.0.0.5:9999", AgentVersion: "10.1", AgentToken: "tok"}
	withCA := hb
	withCA.AgentVerifyCA = "PEM"
	recorded := []store.KeyValue{{Key: proto.InfoAgentURL, Value: hb.CallbackURL}, {Key: proto.InfoAgentVersion, Value: "10.1"}, {Key: proto.InfoAgentLastHeartbeat, Value: stamp}}
	for _, tc := range []struct {
		name    string
		view    store.AgentView
		hb      proto.HeartbeatRequest
		wantSet []store.KeyValue
		wantAct bool
		status  int // error status, 0 for none
	}{
		{"active node: nothing changes", store.AgentView{ProvisionState: proto.StateActive, Token: "tok"}, hb, nil, false, 0},
		{"available node: nothing changes", store.AgentView{ProvisionState: proto.StateAvailable, Token: "tok", URL: hb.CallbackURL, HasURL: true}, hb, nil, false, 0},
		{"deploy wait: record and act", store.AgentView{ProvisionState: proto.StateDeployWait, Token: "tok"}, hb,
			append(append([]store.KeyValue{}, recorded...), store.KeyValue{Key: proto.InfoHeartbeatPending, Value: stamp}), true, 0},
		{"deploy wait in maintenance: record only", store.AgentView{ProvisionState: proto.StateDeployWait, Maintenance: true, Token: "tok"}, hb, recorded, false, 0},
		{"inspect wait: record", store.AgentView{ProvisionState: proto.StateInspectWait, Token: "tok"}, hb, recorded, false, 0},
		{"verify CA kept", store.AgentView{ProvisionState: proto.StateInspectWait, Token: "tok"}, withCA,
			append(append([]store.KeyValue{}, recorded...), store.KeyValue{Key: proto.InfoAgentVerifyCA, Value: "PEM"}), false, 0},
		{"wrong token", store.AgentView{ProvisionState: proto.StateDeployWait, Token: "other"}, hb, nil, false, http.StatusBadRequest},
		{"no token on the node", store.AgentView{ProvisionState: proto.StateDeployWait}, hb, nil, false, http.StatusBadRequest},
		{"wrong token on an active node", store.AgentView{ProvisionState: proto.StateActive, Token: "other"}, hb, nil, false, http.StatusBadRequest},
		{"agent URL pinned", store.AgentView{ProvisionState: proto.StateDeployWait, Token: "tok", URL: "http://10.0.0.6:9999", HasURL: true}, hb, nil, false, http.StatusBadRequest},
		{"locked before the first heartbeat", store.AgentView{ProvisionState: proto.StateDeployWait, Token: "tok", Reservation: &holder}, hb, nil, false, http.StatusConflict},
		{"locked after the first heartbeat", store.AgentView{ProvisionState: proto.StateDeployWait, Token: "tok", Reservation: &holder, URL: hb.CallbackURL, HasURL: true}, hb,
			append(append([]store.KeyValue{}, recorded...), store.KeyValue{Key: proto.InfoHeartbeatPending, Value: stamp}), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, act, err := decideHeartbeat(tc.view, &tc.hb, now, 5*time.Second)
			if tc.status != 0 {
				var e *Error
				if !errors.As(err, &e) || e.Code != tc.status {
					t.Fatalf("err = %v, want status %d", err, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if act != tc.wantAct || len(set) != len(tc.wantSet) {
				t.Fatalf("set %v act %v, want %v %v", set, act, tc.wantSet, tc.wantAct)
			}
			for i := range set {
				if set[i] != tc.wantSet[i] {
					t.Errorf("set[%d] = %v, want %v", i, set[i], tc.wantSet[i])
				}
			}
		})
	}
}

// TestDecideHeartbeatRepeat: a heartbeat that repeats the recorded agent
// within the resolution, and gives the conductor nothing to do, writes
// nothing; anything new, an older record, or work for the conductor does.
func TestDecideHeartbeatRepeat(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const res = 5 * time.Second
	hb := proto.HeartbeatRequest{CallbackURL: "http://10.0.0.5:9999", AgentVersion: "10.1", AgentToken: "tok"}
	withCA := hb
	withCA.AgentVerifyCA = "PEM"
	// seen is a node in maintenance in deploy wait (record only) whose
	// agent last heartbeated age ago with hb's values.
	seen := func(age time.Duration, edit func(*store.AgentView)) store.AgentView {
		v := store.AgentView{ProvisionState: proto.StateDeployWait, Maintenance: true, Token: "tok",
			URL: hb.CallbackURL, HasURL: true, Version: "10.1", LastHeartbeat: now.Add(-age)}
		if edit != nil {
			edit(&v)
		}
		return v
	}
	for _, tc := range []struct {
		name      string
		view      store.AgentView
		hb        proto.HeartbeatRequest
		write     bool
		resolving time.Duration
	}{
		{"same agent just now", seen(0, nil), hb, false, res},
		{"same agent within the resolution", seen(res-time.Millisecond, nil), hb, false, res},
		{"same agent at the resolution", seen(res, nil), hb, true, res},
		{"same agent long ago", seen(time.Hour, nil), hb, true, res},
		{"recorded in the future (clock skew)", seen(-time.Second, nil), hb, true, res},
		{"no recorded heartbeat", seen(0, func(v *store.AgentView) { v.LastHeartbeat = time.Time{} }), hb, true, res},
		{"new agent version", seen(0, func(v *store.AgentView) { v.Version = "10.0" }), hb, true, res},
		{"no URL recorded", seen(0, func(v *store.AgentView) { v.URL, v.HasURL = "", false }), hb, true, res},
		{"new verify CA", seen(0, nil), withCA, true, res},
		{"same verify CA", seen(0, func(v *store.AgentView) { v.VerifyCA = "PEM" }), withCA, false, res},
		{"CA recorded, none sent", seen(0, func(v *store.AgentView) { v.VerifyCA = "PEM" }), hb, false, res},
		{"inspect wait", seen(time.Second, func(v *store.AgentView) { v.ProvisionState, v.Maintenance = proto.StateInspectWait, false }), hb, false, res},
		{"inspect wait in maintenance", seen(time.Second, func(v *store.AgentView) { v.ProvisionState = proto.StateInspectWait }), hb, false, res},
		{"inspecting", seen(time.Second, func(v *store.AgentView) { v.ProvisionState, v.Maintenance = proto.StateInspecting, false }), hb, false, res},
		{"deploy wait: the conductor acts", seen(0, func(v *store.AgentView) { v.Maintenance = false }), hb, true, res},
		{"zero resolution", seen(0, nil), hb, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, _, err := decideHeartbeat(tc.view, &tc.hb, now, tc.resolving)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(set) > 0; got != tc.write {
				t.Fatalf("write %v (%v), want %v", got, set, tc.write)
			}
			if tc.write && !slices.Contains(set, store.KeyValue{Key: proto.InfoAgentLastHeartbeat, Value: now.Format(time.RFC3339Nano)}) {
				t.Errorf("the write %v does not record the heartbeat's time", set)
			}
		})
	}
	// A refused heartbeat is refused however recent the record.
	bad := hb
	bad.AgentToken = "other"
	if _, _, err := decideHeartbeat(seen(0, nil), &bad, now, res); err == nil {
		t.Error("a wrong token was accepted from a recently recorded agent")
	}
}

func TestHeartbeatResolution(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{5 * time.Minute, 5 * time.Second},
		{time.Minute, 3 * time.Second},
		{10 * time.Second, 500 * time.Millisecond},
		{0, 0},
	} {
		if got := heartbeatResolution(tc.timeout); got != tc.want {
			t.Errorf("heartbeatResolution(%v) = %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

// TestNarrowHeartbeat: a heartbeat decided to be recorded is written as a
// narrow stamp only when its one news is the time: the node records the
// same URL, version and CA, an older heartbeat, and the conductor has
// nothing to do. Anything else rewrites the node as before.
func TestNarrowHeartbeat(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	hb := proto.HeartbeatRequest{CallbackURL: "http://10.0.0.5:9999", AgentVersion: "10.1", AgentToken: "tok"}
	withCA := hb
	withCA.AgentVerifyCA = "PEM"
	seen := store.AgentView{ProvisionState: proto.StateDeployWait, Maintenance: true, Token: "tok", URL: hb.CallbackURL, HasURL: true,
		Version: "10.1", LastHeartbeat: now.Add(-25 * time.Second)}
	with := func(f func(v *store.AgentView)) store.AgentView { v := seen; f(&v); return v }
	set := []store.KeyValue{{Key: proto.InfoAgentLastHeartbeat, Value: "x"}}
	for _, tc := range []struct {
		name string
		view store.AgentView
		hb   proto.HeartbeatRequest
		set  []store.KeyValue
		act  bool
		want bool
	}{
		{"still there", seen, hb, set, false, true},
		{"still there, same CA", with(func(v *store.AgentView) { v.VerifyCA = "PEM" }), withCA, set, false, true},
		{"nothing to record", seen, hb, nil, false, false},
		{"work for the conductor", seen, hb, set, true, false},
		{"first heartbeat: no URL recorded", with(func(v *store.AgentView) { v.URL, v.HasURL = "", false }), hb, set, false, false},
		{"new version", with(func(v *store.AgentView) { v.Version = "10.0" }), hb, set, false, false},
		{"new CA", seen, withCA, set, false, false},
		{"no recorded heartbeat", with(func(v *store.AgentView) { v.LastHeartbeat = time.Time{} }), hb, set, false, false},
		{"recorded heartbeat in the future", with(func(v *store.AgentView) { v.LastHeartbeat = now.Add(time.Second) }), hb, set, false, false},
		{"recorded heartbeat now", with(func(v *store.AgentView) { v.LastHeartbeat = now }), hb, set, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := narrowHeartbeat(tc.view, &tc.hb, tc.set, tc.act, now); got != tc.want {
				t.Errorf("narrowHeartbeat = %v, want %v", got, tc.want)
			}
		})
	}
}

// racingStore changes the node between the heartbeat's read and its write,
// as a conductor finishing a step would.
type racingStore struct {
	store.Store
	between func()
	records int // RecordAgent and RecordSeen calls
	narrow  int // RecordSeen calls
	// urgent notes, for each of those calls, whether its writes went
	// ahead of bulk work (store.Urgent).
	urgent []bool
}

func (r *racingStore) AgentOf(ctx context.Context, ident string) (store.AgentView, error) {
	v, err := r.Store.AgentOf(ctx, ident)
	if r.between != nil {
		r.between()
	}
	return v, err
}

func (r *racingStore) RecordAgent(ctx context.Context, seen store.AgentView, set []store.KeyValue, touch bool) (bool, error) {
	r.records++
	r.urgent = append(r.urgent, store.IsUrgent(ctx))
	return r.Store.RecordAgent(ctx, seen, set, touch)
}

func (r *racingStore) RecordSeen(ctx context.Context, seen store.AgentView, at time.Time) (bool, error) {
	r.records++
	r.narrow++
	r.urgent = append(r.urgent, store.IsUrgent(ctx))
	return r.Store.RecordSeen(ctx, seen, at)
}

func TestRecordHeartbeat(t *testing.T) {
	ctx := context.Background()
	hb := proto.HeartbeatRequest{CallbackURL: "http://10.0.0.5:9999", AgentVersion: "10.1", AgentToken: "tok"}
	setup := func(t *testing.T, ps proto.ProvisionState) (*Server, *racingStore, string) {
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		n := &proto.Node{UUID: "5a4b3c2d-1e0f-4a1b-9c8d-7e6f5a4b3c2d", Driver: "fake-hardware", ProvisionState: ps,
			DriverInternalInfo: proto.Dict{proto.InfoAgentToken: "tok"}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		rs := &racingStore{Store: st}
		return New(Config{Store: rs, Conductor: "c1"}), rs, n.UUID
	}
	heartbeat := func(t *testing.T, s *Server, rs *racingStore, uuid string) (bool, error) {
		v, err := rs.AgentOf(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		return s.recordHeartbeat(ctx, uuid, v, &hb)
	}

	t.Run("ignored heartbeat writes nothing", func(t *testing.T) {
		s, rs, uuid := setup(t, proto.StateActive)
		before, _ := rs.GetNode(ctx, uuid)
		act, err := heartbeat(t, s, rs, uuid)
		if err != nil || act {
			t.Fatalf("act %v err %v", act, err)
		}
		after, _ := rs.GetNode(ctx, uuid)
		if rs.records != 0 || !sameTime(after.UpdatedAt, before.UpdatedAt) || len(after.DriverInternalInfo) != 1 {
			t.Errorf("an ignored heartbeat wrote: %d writes, updated_at %v → %v, %v", rs.records, before.UpdatedAt, after.UpdatedAt, after.DriverInternalInfo)
		}
	})
	t.Run("only a heartbeat to act on writes ahead", func(t *testing.T) {
		// In maintenance the conductor does not act: nobody waits on
		// the write. Out of it, the agent waits for its next command.
		s, rs, uuid := setup(t, proto.StateDeployWait)
		if _, err := rs.Store.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.Maintenance = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if act, err := heartbeat(t, s, rs, uuid); err != nil || act {
			t.Fatalf("in maintenance: act %v err %v", act, err)
		}
		if _, err := rs.Store.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.Maintenance = false; return nil }); err != nil {
			t.Fatal(err)
		}
		if act, err := heartbeat(t, s, rs, uuid); err != nil || !act {
			t.Fatalf("out of maintenance: act %v err %v", act, err)
		}
		if want := []bool{false, true}; !slices.Equal(rs.urgent, want) {
			t.Errorf("writes urgent %v, want %v", rs.urgent, want)
		}
	})
	t.Run("repeated heartbeat in maintenance writes once", func(t *testing.T) {
		s, rs, uuid := setup(t, proto.StateDeployWait)
		if _, err := rs.Store.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.Maintenance = true; return nil }); err != nil {
			t.Fatal(err)
		}
		act, err := heartbeat(t, s, rs, uuid)
		if err != nil || act || rs.records != 1 {
			t.Fatalf("first heartbeat: act %v err %v, %d writes", act, err, rs.records)
		}
		first, _ := rs.GetNode(ctx, uuid)
		// The default heartbeat timeout (a minute) gives a 3 s resolution:
		// the next heartbeat comes within it, then one after it.
		recorded := parseTime(t, first.DriverInternalInfo[proto.InfoAgentLastHeartbeat])
		s.clock = func() time.Time { return recorded.Add(3*time.Second - time.Microsecond) }
		if act, err := heartbeat(t, s, rs, uuid); err != nil || act {
			t.Fatalf("second heartbeat: act %v err %v", act, err)
		}
		second, _ := rs.GetNode(ctx, uuid)
		if rs.records != 1 || !sameTime(second.UpdatedAt, first.UpdatedAt) ||
			second.DriverInternalInfo[proto.InfoAgentLastHeartbeat] != first.DriverInternalInfo[proto.InfoAgentLastHeartbeat] {
			t.Errorf("a repeated heartbeat wrote: %d writes, %v → %v", rs.records, first.DriverInternalInfo, second.DriverInternalInfo)
		}
		s.clock = func() time.Time { return recorded.Add(3 * time.Second) }
		if _, err := heartbeat(t, s, rs, uuid); err != nil {
			t.Fatal(err)
		}
		third, _ := rs.GetNode(ctx, uuid)
		if got := parseTime(t, third.DriverInternalInfo[proto.InfoAgentLastHeartbeat]); rs.records != 2 || !got.Equal(recorded.Add(3*time.Second)) {
			t.Fatalf("a heartbeat at the resolution: %d writes, recorded %v, want %v", rs.records, got, recorded.Add(3*time.Second))
		}
		// It only said the agent is still there: a narrow stamp, the
		// node's documents untouched.
		if rs.narrow != 1 || !sameTime(third.UpdatedAt, first.UpdatedAt) {
			t.Errorf("a heartbeat with no news rewrote the node: %d narrow writes, updated_at %v → %v", rs.narrow, first.UpdatedAt, third.UpdatedAt)
		}
		// A new agent version is written at once.
		hb2 := hb
		hb2.AgentVersion = "10.2"
		v, err := rs.AgentOf(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.recordHeartbeat(ctx, uuid, v, &hb2); err != nil {
			t.Fatal(err)
		}
		if n, _ := rs.GetNode(ctx, uuid); rs.records != 3 || rs.narrow != 1 || n.DriverInternalInfo[proto.InfoAgentVersion] != "10.2" {
			t.Errorf("a new version was not recorded: %d writes, %v", rs.records, n.DriverInternalInfo)
		}
	})
	t.Run("inspect wait: the timeout runs from the recorded heartbeat", func(t *testing.T) {
		s, rs, uuid := setup(t, proto.StateInspectWait)
		t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
		at := func(d time.Duration) { s.clock = func() time.Time { return t0.Add(d) } }
		timedOut := func(now time.Duration) bool {
			t.Helper()
			got, err := rs.NodesWithWork(ctx, store.WorkQuery{HeartbeatBefore: t0.Add(now - time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			return slices.Contains(got, uuid)
		}
		// Heartbeats every second; the default minute of heartbeat
		// timeout gives a 3 s resolution: those at 0 s and 3 s are written.
		for sec := range 5 {
			at(time.Duration(sec) * time.Second)
			if act, err := heartbeat(t, s, rs, uuid); err != nil || act {
				t.Fatalf("heartbeat at %ds: act %v err %v", sec, act, err)
			}
		}
		n, _ := rs.GetNode(ctx, uuid)
		if rs.records != 2 || rs.narrow != 1 || !parseTime(t, n.DriverInternalInfo[proto.InfoAgentLastHeartbeat]).Equal(t0.Add(3*time.Second)) {
			t.Fatalf("%d writes (%d narrow), recorded %v; want 2 (1), the heartbeat at 3s", rs.records, rs.narrow, n.DriverInternalInfo[proto.InfoAgentLastHeartbeat])
		}
		// The agent's last heartbeat was at 4 s; the node times out a
		// minute after the recorded one, within the resolution of it.
		if timedOut(time.Minute + 3*time.Second) {
			t.Error("the node timed out a minute after its recorded heartbeat, not past it")
		}
		if !timedOut(time.Minute + 3*time.Second + time.Microsecond) {
			t.Error("the node did not time out past a minute after its recorded heartbeat")
		}
	})
	t.Run("fast path", func(t *testing.T) {
		s, rs, uuid := setup(t, proto.StateDeployWait)
		act, err := heartbeat(t, s, rs, uuid)
		if err != nil || !act {
			t.Fatalf("act %v err %v", act, err)
		}
		n, _ := rs.GetNode(ctx, uuid)
		if n.DriverInternalInfo[proto.InfoAgentURL] != hb.CallbackURL || n.DriverInternalInfo[proto.InfoHeartbeatPending] == nil || n.ProvisionUpdatedAt == nil {
			t.Errorf("recorded %v, provision_updated_at %v", n.DriverInternalInfo, n.ProvisionUpdatedAt)
		}
	})
	t.Run("node changed between read and write: decided again", func(t *testing.T) {
		s, rs, uuid := setup(t, proto.StateDeployWait)
		rs.between = func() {
			// The conductor finished the deploy: the heartbeat is now one to ignore.
			if _, err := rs.Store.UpdateNode(ctx, uuid, func(n *proto.Node) error { n.ProvisionState = proto.StateActive; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		act, err := heartbeat(t, s, rs, uuid)
		if err != nil || act {
			t.Fatalf("act %v err %v, want an ignored heartbeat", act, err)
		}
		n, _ := rs.GetNode(ctx, uuid)
		if rs.records != 1 || n.DriverInternalInfo[proto.InfoAgentURL] != nil || n.DriverInternalInfo[proto.InfoHeartbeatPending] != nil {
			t.Errorf("stale decision stored: %d fast writes, %v", rs.records, n.DriverInternalInfo)
		}
	})
	t.Run("token wiped between read and write: refused", func(t *testing.T) {
		s, rs, uuid := setup(t, proto.StateDeployWait)
		rs.between = func() {
			if _, err := rs.Store.UpdateNode(ctx, uuid, func(n *proto.Node) error { delete(n.DriverInternalInfo, proto.InfoAgentToken); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		_, err := heartbeat(t, s, rs, uuid)
		var e *Error
		if !errors.As(err, &e) || e.Code != http.StatusBadRequest {
			t.Fatalf("err = %v, want 400", err)
		}
		n, _ := rs.GetNode(ctx, uuid)
		if n.DriverInternalInfo[proto.InfoAgentURL] != nil {
			t.Errorf("refused heartbeat wrote %v", n.DriverInternalInfo)
		}
	})
}

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("recorded time %v: %v", v, err)
	}
	return at
}

func sameTime(a, b *proto.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b.Time)
}

// A lookup for a node whose token was issued answers it masked and writes
// nothing; the first lookup issues and stores one.
func TestLookupWritesOnlyANewToken(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "k.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := &proto.Node{UUID: "6b5a4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d", Driver: "fake-hardware", ProvisionState: proto.StateDeployWait,
		DriverInternalInfo: proto.Dict{}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{Store: st, Conductor: "c1"}))
	defer srv.Close()
	lookup := func() proto.LookupResponse {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/lookup?node_uuid="+n.UUID, nil)
		req.Header.Set(proto.HeaderIronicAPIVersion, "1.95")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc proto.LookupResponse
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("lookup: %d %v", resp.StatusCode, err)
		}
		return doc
	}
	first := lookup()
	if first.Config.AgentToken == "" || first.Config.AgentToken == proto.MaskedToken {
		t.Fatalf("first lookup gave token %q", first.Config.AgentToken)
	}
	stored, _ := st.GetNode(ctx, n.UUID)
	if stored.DriverInternalInfo[proto.InfoAgentToken] != first.Config.AgentToken {
		t.Fatalf("stored token %v, answered %q", stored.DriverInternalInfo[proto.InfoAgentToken], first.Config.AgentToken)
	}
	second := lookup()
	if second.Config.AgentToken != proto.MaskedToken || second.Node.DriverInternalInfo[proto.InfoAgentToken] != secrets.Masked {
		t.Errorf("second lookup: token %q, driver_internal_info %v", second.Config.AgentToken, second.Node.DriverInternalInfo)
	}
	after, _ := st.GetNode(ctx, n.UUID)
	if !sameTime(after.UpdatedAt, stored.UpdatedAt) || after.DriverInternalInfo[proto.InfoAgentToken] != first.Config.AgentToken {
		t.Errorf("second lookup wrote: updated_at %v → %v", stored.UpdatedAt, after.UpdatedAt)
	}
}
