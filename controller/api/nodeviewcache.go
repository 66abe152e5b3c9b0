package api

import (
	"bytes"
	"sync"
)

// viewCache keeps nodes' rendered JSON for /v1/nodes/detail, which
// Metal3, Nova's resource tracker and monitoring poll over and over with
// the same nodes mostly unchanged: splitting a node's view and copying
// its members was two fifths of a detail page's CPU, and reading the
// documents back from the database only to compare them with what was
// rendered most of the rest. An entry is keyed by the node's row id (never
// reused), the request's base URL and microversion, and used only while
// the row's version (store.NodeVersion, bumped in the database by every
// write that changes what is rendered, so it stays right with several
// controllers writing one database) is the one it was rendered from. Only
// the full plan (every field at the microversion, as /detail shows) and
// the default list plan (/v1/nodes) are kept. The zero value is ready; it holds at most viewCacheBytes.
type viewCache struct {
	mu      sync.Mutex
	entries map[viewKey]*viewEntry
	size    int // bytes held: renderings and UUIDs
}

// viewCacheBytes bounds a viewCache: about 2.5 KB a node, so some 12,000
// nodes at one microversion.
const viewCacheBytes = 32 << 20

type viewKey struct {
	id    int64
	base  string
	minor int
	plan  keptPlan
}

// keptPlan names the field plans whose renderings are kept.
type keptPlan uint8

const (
	keptFull    keptPlan = iota // every field: /detail
	keptSummary                 // the default list fields: /v1/nodes
)

// viewEntry is a rendering, the row version it was rendered from and the
// node's UUID (for the page's next link).
type viewEntry struct {
	version int64
	uuid    string
	out     []byte
}

// size is what e holds, for the bound (the key's strings besides).
func (e *viewEntry) size() int { return len(e.uuid) + len(e.out) }

// get is the rendering at k of row version version, and the node's UUID,
// if kept. out is read-only.
func (c *viewCache) get(k viewKey, version int64) (uuid string, out []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || e.version != version {
		return "", nil, false
	}
	return e.uuid, e.out, true
}

// put keeps out, the rendering at k of the node uuid at row version
// version (copied), replacing what k held and, past the bound, dropping
// other entries.
func (c *viewCache) put(k viewKey, version int64, uuid string, out []byte) {
	e := &viewEntry{version: version, uuid: uuid, out: bytes.Clone(out)}
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
