package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// A steady heartbeat rewrites values its node's documents already hold:
// driver_internal_info's agent URL, version and last heartbeat, and
// updated_at. RecordAgent replaces those values in Go, in the document it
// read and in the masked copy, and its UPDATE writes both when the row
// still holds the document read: SQLite then parses no JSON for the
// change or the conditions (json_extract and json_set parsed the whole
// document for each, a third of a heartbeat), and the masked copy stays
// current, so the next GET passes it through instead of deriving it.

// docEdit is one value to replace: the member key of the top-level object,
// or, with sub set, the member sub of the object at key.
type docEdit struct {
	key, sub string
	val      []byte
}

// spliceDoc is doc with each edit's value replaced; ok is false when a
// member is missing or repeated, or doc is not a compact object as
// encoding/json writes one (lined: as jsonscan.ToLined writes one).
func spliceDoc(doc []byte, lined bool, edits []docEdit) (out []byte, ok bool) {
	type span struct {
		start, end int
		val        []byte
	}
	spans := make([]span, 0, len(edits))
	found := make([]int, len(edits))
	// off is where v, a slice of doc, starts in doc.
	off := func(v []byte) int { return cap(doc) - cap(v) }
	bad := false
	member := func(key, val []byte) {
		for i, e := range edits {
			if e.key != string(key) {
				continue
			}
			if e.sub == "" {
				found[i]++
				spans = append(spans, span{off(val), off(val) + len(val), e.val})
				continue
			}
			if len(val) == 0 || val[0] != '{' {
				bad = true
				return
			}
			if jsonscan.Members(val, func(k, v []byte) {
				for j, e := range edits {
					if e.key == string(key) && e.sub == string(k) {
						found[j]++
						spans = append(spans, span{off(v), off(v) + len(v), e.val})
					}
				}
			}) != nil {
				bad = true
			}
			return // every edit of this object was looked for
		}
	}
	var err error
	if lined {
		err = jsonscan.Lines(doc, member)
	} else {
		err = jsonscan.Members(doc, member)
	}
	if err != nil || bad {
		return nil, false
	}
	for _, n := range found {
		if n != 1 {
			return nil, false
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	size := len(doc)
	for _, s := range spans {
		size += len(s.val) - (s.end - s.start)
	}
	out = make([]byte, 0, size)
	at := 0
	for _, s := range spans {
		out = append(out, doc[at:s.start]...)
		out = append(out, s.val...)
		at = s.end
	}
	return append(out, doc[at:]...), true
}

// agentEdits are the edits of a heartbeat's keys and timestamps.
func agentEdits(set []KeyValue, stamp []byte, touchProvision bool) []docEdit {
	edits := make([]docEdit, 0, len(set)+2)
	for _, kv := range set {
		v, _ := json.Marshal(kv.Value) // a string always encodes
		edits = append(edits, docEdit{"driver_internal_info", kv.Key, v})
	}
	edits = append(edits, docEdit{key: "updated_at", val: stamp})
	if touchProvision {
		edits = append(edits, docEdit{key: "provision_updated_at", val: stamp})
	}
	return edits
}

// spliceAgent is the document and masked document RecordAgent writes for
// seen, or ok false when the document does not hold every key already
// (the first heartbeat of an agent) and json_set must add them. The masked
// copy is spliced when none of the keys is masked, derived from the new
// document when the row has none, and NULL when deriving fails.
func spliceAgent(seen AgentView, set []KeyValue, now *proto.Time, touchProvision bool) (doc string, masked any, ok bool) {
	stamp, _ := now.MarshalJSON()
	edits := agentEdits(set, stamp, touchProvision)
	d, ok := spliceDoc(unsafe.Slice(unsafe.StringData(seen.doc), len(seen.doc)), false, edits)
	if !ok {
		return "", nil, false
	}
	if seen.masked != nil && !slices.ContainsFunc(set, func(kv KeyValue) bool { return secrets.IsSecretKey(kv.Key) }) {
		if m, ok := spliceDoc(unsafe.Slice(unsafe.StringData(*seen.masked), len(*seen.masked)), true, edits); ok {
			return asString(d), asString(m), true
		}
	}
	if m, err := maskedDoc(d); err == nil {
		return asString(d), asString(m), true
	}
	return asString(d), nil, true
}

// asString is b as a string without copying it: b is a fresh buffer
// spliceDoc or maskedDoc built, never written again.
func asString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// execWrite runs one write statement, prepared on the writer, as a
// transaction of its own: SQLite's BEGIN and COMMIT statements around a
// single UPDATE cost as much as the UPDATE. The statement is retried when
// the database reports contention, as writeTx retries. It returns the rows
// changed.
func (s *sqlStore) execWrite(ctx context.Context, query string, args ...any) (int64, error) {
	st := s.preparedWrite(ctx, query)
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var (
			r   sql.Result
			err error
		)
		if err = s.enterWriter(ctx); err != nil {
			return 0, err
		}
		if st != nil {
			r, err = st.ExecContext(ctx, args...)
		} else {
			r, err = s.exec(ctx, s.wdb, query, args...)
		}
		s.leaveWriter()
		if err == nil {
			s.writes.all.Add(1)
			if s.wal != nil {
				s.wal.committed() // as tryTx: the checkpointer counts commits
			}
			return r.RowsAffected()
		}
		if attempt == maxAttempts || !s.d.retryable(err) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (after %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}
