package store

import "sync/atomic"

// Committed writes, counted by kind so that what a node costs the single
// writer can be read per phase of a fleet's life (/metrics:
// kiln_store_writes_total). A write is one committed transaction or
// single-statement write; the kinds below are the node write path's, and
// "other" is every other write.

// WriteKinds are the kinds WriteCounts reports, in a fixed order.
var WriteKinds = []string{"update_node", "update_node_lost", "reserve", "release", "record_agent", "record_seen", "history", "inventory", "other"}

const (
	writeUpdateNode = iota
	// writeUpdateNodeLost is an optimistic UpdateNode's conditional
	// UPDATE that found the row changed since it was read: it wrote
	// nothing but took the writer (nodeupdate.go).
	writeUpdateNodeLost
	writeReserve
	writeRelease
	writeRecordAgent
	writeRecordSeen
	writeHistory
	writeInventory
	writeOther
)

// writeCounter counts committed writes: all of them, and those of each
// named kind; other is the difference.
type writeCounter struct {
	all   atomic.Uint64
	kinds [writeOther]atomic.Uint64
}

// WriteCounter is a Store that counts its writes.
type WriteCounter interface {
	// WriteCounts is the writes committed so far by kind (WriteKinds).
	WriteCounts() map[string]uint64
}

// WriteCounterOf is st's WriteCounter, through wrappers; false if none.
func WriteCounterOf(st Store) (WriteCounter, bool) {
	for {
		if c, ok := st.(WriteCounter); ok {
			return c, true
		}
		w, ok := st.(Unwrapper)
		if !ok {
			return nil, false
		}
		st = w.Unwrap()
	}
}

func (s *sqlStore) WriteCounts() map[string]uint64 {
	m := make(map[string]uint64, len(WriteKinds))
	var named uint64
	for i := range writeOther {
		k := s.writes.kinds[i].Load()
		m[WriteKinds[i]] = k
		named += k
	}
	// Read last: all counts a write before its kind does, so other
	// never goes below zero.
	all := s.writes.all.Load()
	m["other"] = all - min(named, all)
	return m
}

// wrote counts a committed write of kind (counted in all already).
func (s *sqlStore) wrote(kind int) {
	s.writes.kinds[kind].Add(1)
}
