package store

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/controller/secrets"
)

// UpdateNode writes only the columns whose value changed, besides the two
// documents. Writing every column made SQLite delete and re-insert the
// node's entry in each of the nodes table's ~27 indexes on every write,
// changed or not: each touched index page was copied to the statement
// journal (which then outgrew memory and spilled to a temporary file,
// opened and written per write) and again to the WAL at commit. A
// conductor pass changes the documents, updated_at and a work column or
// two.

// docColumns are the columns UpdateNode always writes: a write changes
// the document (its updated_at at least) and so its masked copy.
var docColumns = map[string]bool{"doc": true, "masked_doc": true}

// columnMask is a set of nodeColumns, bit i for nodeColumns[i].
type columnMask uint64

// nodeColumnIndex is each of nodeColumns' bit in a columnMask.
var nodeColumnIndex = func() map[string]int {
	m := make(map[string]int, len(nodeColumns))
	for i, c := range nodeColumns {
		m[c] = i
	}
	return m
}()

// nodeSelectForUpdate reads, locking, what UpdateNode compares: the row's
// id and every column of nodeColumns in order, masked_doc excepted (always
// rewritten, so its old value is not read: NULL stands in its place).
func (s *sqlStore) nodeSelectForUpdate() string {
	cols := make([]string, len(nodeColumns))
	for i, c := range nodeColumns {
		if c == "masked_doc" {
			c = "NULL"
		}
		cols[i] = c
	}
	return "SELECT id, " + strings.Join(cols, ", ") + " FROM nodes WHERE uuid = ? OR name = ? " +
		"ORDER BY CASE WHEN uuid = ? THEN 0 ELSE 1 END LIMIT 1" + s.d.forUpdate
}

// changedColumns is the mask of the columns of vals (nodeValues' order)
// that differ from stored (the same columns as read back by the driver),
// with the document columns always in it.
func changedColumns(stored, vals []any) columnMask {
	var m columnMask
	for i, c := range nodeColumns {
		if docColumns[c] || !sameColumn(stored[i], vals[i]) {
			m |= 1 << i
		}
	}
	return m
}

// sameColumn reports whether stored, a value as the driver scanned it,
// holds v, a value as nodeValues gives it. When unsure it answers false:
// the column is then written, as before.
func sameColumn(stored, v any) bool {
	switch v := v.(type) {
	case nil:
		return stored == nil
	case string:
		switch s := stored.(type) {
		case string:
			return s == v
		case []byte:
			return string(s) == v
		}
	case bool:
		switch s := stored.(type) {
		case bool:
			return s == v
		case int64: // SQLite keeps booleans as integers
			return (s != 0) == v && (s == 0 || s == 1)
		}
	case int64:
		s, ok := stored.(int64)
		return ok && s == v
	case []byte:
		switch s := stored.(type) {
		case string:
			return s == string(v)
		case []byte:
			return bytes.Equal(s, v)
		}
	}
	return false
}

// updateQueries caches the UPDATE text of each column set met: a handful
// in practice (the documents with updated_at, plus a state or work column
// or a reservation), at most maxUpdateQueries.
var updateQueries struct {
	sync.RWMutex
	m map[columnMask]string
}

const maxUpdateQueries = 256

// updateNodeColumns is the UPDATE of the columns in m, by id; its
// arguments are those columns' values in nodeColumns' order, then the id.
func updateNodeColumns(m columnMask) string {
	updateQueries.RLock()
	q, ok := updateQueries.m[m]
	updateQueries.RUnlock()
	if ok {
		return q
	}
	var set []string
	for i, c := range nodeColumns {
		if m&(1<<i) != 0 {
			set = append(set, c+" = ?")
		}
	}
	q = "UPDATE nodes SET " + strings.Join(set, ", ") + ", " + bumpRowVersion + " WHERE id = ?"
	updateQueries.Lock()
	if updateQueries.m == nil {
		updateQueries.m = map[columnMask]string{}
	}
	if len(updateQueries.m) < maxUpdateQueries {
		updateQueries.m[m] = q
	}
	updateQueries.Unlock()
	return q
}

// maskedArgs is the values of vals in m, then id.
func maskedArgs(m columnMask, vals []any, id int64) []any {
	args := make([]any, 0, len(vals)+1)
	for i, v := range vals {
		if m&(1<<i) != 0 {
			args = append(args, v)
		}
	}
	return append(args, id)
}

// maskedFields are the members of a node's document that masking can
// change: the free-form objects (secrets.NodeFields) and last_error.
var maskedFields = func() map[string]bool {
	m := map[string]bool{"last_error": true}
	for _, f := range secrets.NodeFields {
		m[f] = true
	}
	return m
}()

// maskedDocOf is maskedDoc(doc) for doc as nodeValues encodes it, without
// decoding the whole node: only the members masking can change are decoded,
// masked and encoded again; every other member is encoding/json's own
// output for a value that decodes and encodes to the same bytes (strings,
// numbers, booleans, timestamps in one layout, lists of strings), so it is
// copied (a string that held invalid UTF-8 excepted). Decoding the whole document to mask it was three fifths of
// nodeValues' cost, which every node write pays. A document it cannot
// split goes the long way.
func maskedDocOf(doc []byte) ([]byte, error) {
	if bytes.Contains(doc, []byte(`\ufffd`)) {
		// encoding/json writes invalid UTF-8 so, and a valid U+FFFD
		// raw: that member would not encode to its own bytes.
		return maskedDoc(doc)
	}
	out := make([]byte, 0, len(doc)+64)
	out = append(out, '{')
	first := true
	var ferr error
	err := jsonscan.Members(doc, func(key, val []byte) {
		if ferr != nil {
			return
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '\n', '"')
		out = append(out, key...)
		out = append(out, '"', ':')
		if !maskedFields[string(key)] || string(val) == "null" {
			out = append(out, val...)
			return
		}
		var b []byte
		if string(key) == "last_error" {
			var s string
			if ferr = json.Unmarshal(val, &s); ferr != nil {
				return
			}
			b, ferr = json.Marshal(secrets.Scrub(s))
		} else {
			var d map[string]any
			if ferr = json.Unmarshal(val, &d); ferr != nil {
				return
			}
			b, ferr = json.Marshal(secrets.MaskDict(d))
		}
		out = append(out, b...)
	})
	if err != nil || ferr != nil {
		return maskedDoc(doc)
	}
	return append(out, '}'), nil
}
