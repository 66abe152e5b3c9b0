package api_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/api"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// releasingStore releases the node's reservation the first time a request
// finds it held: a conductor that committed a settled state and is about to
// release the node, as a client acting on that state meets it.
type releasingStore struct {
	store.Store
	held     atomic.Bool
	attempts atomic.Int32
}

func (s *releasingStore) UpdateNode(ctx context.Context, ident string, fn func(n *proto.Node) error) (*proto.Node, error) {
	s.attempts.Add(1)
	n, err := s.Store.UpdateNode(ctx, ident, fn)
	if err != nil && s.held.CompareAndSwap(true, false) {
		if rerr := s.Store.Release(ctx, ident, "c9"); rerr != nil {
			return nil, rerr
		}
	}
	return n, err
}

func (s *releasingStore) GetNode(ctx context.Context, ident string) (*proto.Node, error) {
	s.attempts.Add(1)
	n, err := s.Store.GetNode(ctx, ident)
	if err == nil && n.Reservation != nil && s.held.CompareAndSwap(true, false) {
		if rerr := s.Store.Release(ctx, ident, "c9"); rerr != nil {
			return nil, rerr
		}
	}
	return n, err
}

// TestRequestsWaitOutANodeLock: provision, power, patch and delete requests
// that find the node reserved wait for the release, as Ironic's conductor
// retries a node's lock, instead of answering 409 at once; with no release
// within the wait, the answer is Ironic's 409 NodeLocked and nothing changed.
func TestRequestsWaitOutANodeLock(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"provision", "PUT", "/states/provision", map[string]any{"target": "manage"}, 202},
		{"power", "PUT", "/states/power", map[string]any{"target": "power on"}, 202},
		{"patch", "PATCH", "", []map[string]any{{"op": "add", "path": "/extra/a", "value": "b"}}, 200},
		{"delete", "DELETE", "", nil, 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, release := range []bool{true, false} {
				base, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"), store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				st := &releasingStore{Store: base}
				wait := time.Minute // long: the release must end the wait, not the clock
				if !release {
					wait = 30 * time.Millisecond
				}
				srv := httptest.NewServer(api.New(api.Config{Store: st, Conductor: "c1", LockWait: wait}))
				code, n := doJSON(t, "POST", srv.URL+"/v1/nodes", map[string]any{"driver": "fake-hardware"})
				if code != 201 {
					t.Fatalf("create: %d %v", code, n)
				}
				uuid := n["uuid"].(string)
				if _, err := base.Reserve(t.Context(), uuid, "c9"); err != nil {
					t.Fatal(err)
				}
				st.held.Store(release)
				before := st.attempts.Load()
				code, out := doJSON(t, tc.method, srv.URL+"/v1/nodes/"+uuid+tc.path, tc.body)
				switch {
				case release && code != tc.want:
					t.Errorf("released during the wait: %s = %d %v, want %d", tc.name, code, out, tc.want)
				case release && st.attempts.Load()-before < 2:
					t.Errorf("released during the wait: %s answered without trying again", tc.name)
				case !release && code != 409:
					t.Errorf("never released: %s = %d %v, want 409", tc.name, code, out)
				}
				if !release {
					after, err := base.GetNode(t.Context(), uuid)
					if err != nil {
						t.Fatal(err)
					}
					if after.ProvisionState != proto.StateEnroll || after.TargetPowerState != nil || len(after.Extra) != 0 {
						t.Errorf("a refused %s changed the node: %+v", tc.name, after)
					}
				}
				srv.Close()
				base.Close()
			}
		})
	}
}
