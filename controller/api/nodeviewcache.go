package api

import (
	"bytes"
	"sync"

	"github.com/kilnhq/kiln/controller/store"
)

// viewCache keeps nodes' rendered JSON for /v1/nodes/detail, which
// Metal3, Nova's resource tracker and monitoring poll over and over with
// the same nodes mostly unchanged: splitting a node's view and copying
// its members was two fifths of a detail page's CPU. An entry is used only
// when everything its bytes were made from is the same as what the store
// has just returned: the view (masked document, provision state,
// reservation; compared in full, so it stays right with several
// controllers writing one database) and the request's base URL and
// microversion. Only the full plan (every field at the microversion, as
// /detail shows) is kept. The zero value is ready; it holds at most
// viewCacheBytes.
type viewCache struct {
	mu      sync.Mutex
	entries map[viewKey]*viewEntry
	size    int // bytes held: documents and renderings
}

// viewCacheBytes bounds a viewCache: about 5 KB a node (its document and
// rendering), so some 6,000 nodes at one microversion.
const viewCacheBytes = 32 << 20

type viewKey struct {
	uuid, base string
	minor      int
}

// viewEntry is a rendering and what it was rendered from.
type viewEntry struct {
	view store.NodeView
	out  []byte
}

// size is what e holds, for the bound (the key's strings besides).
func (e *viewEntry) size() int { return len(e.view.Doc) + len(e.out) }

// sameView reports whether a and b render the same bytes.
func sameView(a, b *store.NodeView) bool {
	if a.ProvisionState != b.ProvisionState || (a.Reservation == nil) != (b.Reservation == nil) ||
		a.Reservation != nil && *a.Reservation != *b.Reservation {
		return false
	}
	return bytes.Equal(a.Doc, b.Doc)
}

// get is v's rendering at k, if kept and made from the same view.
func (c *viewCache) get(k viewKey, v *store.NodeView) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !sameView(&e.view, v) {
		return nil, false
	}
	return e.out, true
}

// put keeps out, v's rendering at k (copied), replacing what k held and,
// past the bound, dropping other entries.
func (c *viewCache) put(k viewKey, v *store.NodeView, out []byte) {
	e := &viewEntry{view: *v, out: bytes.Clone(out)}
	if e.view.Reservation != nil {
		res := *e.view.Reservation
		e.view.Reservation = &res
	}
	if e.size() > viewCacheBytes/64 {
		return // an outsized node is rendered each time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[viewKey]*viewEntry{}
	}
	if old, ok := c.entries[k]; ok {
		c.size -= old.size()
		delete(c.entries, k)
	}
	// Past the bound, drop entries (in map order, which is as good as any
	// order for a fleet read page by page) down to three quarters.
	if c.size+e.size() > viewCacheBytes {
		for dk, de := range c.entries {
			delete(c.entries, dk)
			c.size -= de.size()
			if c.size+e.size() <= viewCacheBytes*3/4 {
				break
			}
		}
	}
	c.entries[k] = e
	c.size += e.size()
}

// fullPlanLen is, by microversion, how many fields the full node plan
// shows: a plan with that many shows them all (plans keep the full plan's
// order and only drop fields).
var fullPlanLen = func() []int {
	out := make([]int, MaxMinor+1)
	for mv := range out {
		out[mv] = len(planFields(nodeWireFields, mv, nil).fields)
	}
	return out
}()

// isFullPlan reports whether p shows every node field at minor mv.
func isFullPlan(p fieldPlan, mv int) bool {
	return mv >= 0 && mv < len(fullPlanLen) && len(p.fields) == fullPlanLen[mv]
}
