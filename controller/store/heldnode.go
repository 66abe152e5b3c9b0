package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// A conductor pass holds its node: it reserved it, and each commit of
// the pass gets the node back as written. UpdateNode read the row again
// through the reader pool and decoded its document for every commit all
// the same, to run fn on the current node and compare its columns (a
// quarter of a pass's CPU on SQLite, BenchmarkConductorPass). A HeldNode
// is the version the store last read or wrote for the holder: the row's
// id and row_version, its columns as stored, and the node decoded, kept
// by the store. UpdateHeldNode runs fn on a copy of that node and sends
// the same conditional UPDATE as UpdateNode (… WHERE id = ? AND
// row_version = ?), with no read at all; when another write came in
// between (the API, another conductor breaking the reservation), nothing
// is written and the update runs as UpdateNode does, on the row read
// again.
//
// The narrow heartbeat stamp (agentseen.go) is not read either: a
// heartbeat recorded there does not bump row_version, so the held commit
// may write the document's older agent_last_heartbeat. Readers take the
// newer of the two (mergeSeen*, and the work scan's NOT EXISTS), and the
// stamp row is kept, so no reader sees the heartbeat go backwards; a
// document that drops the key drops the stamp with it, as UpdateNode's
// does.

// HeldNode is a version of a node row as this store read or wrote it,
// opaque to its holder. It is never changed: each write gives a new one.
type HeldNode struct {
	id, version int64
	// stored are the row's nodeColumns values at version, as nodeValues
	// gives them or the driver scanned them.
	stored []any
	// n is the node at version; fn runs on copies of it.
	n *proto.Node
}

// HeldNodeWriter is a Store whose holder of a node commits to it without
// the store reading the node again.
type HeldNodeWriter interface {
	// ReserveHeld is Reserve, also giving the version reserved.
	ReserveHeld(ctx context.Context, ident, conductor string) (*proto.Node, *HeldNode, error)
	// UpdateHeldNode is UpdateNodeWithHistory (events may be empty) on
	// held, the version the holder last got from this store (nil: none,
	// the node is read), and gives the version written (nil when the
	// update had to take the row lock: the next one reads again). fn may
	// run several times, on a node that is not the caller's.
	UpdateHeldNode(ctx context.Context, ident string, held *HeldNode, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, *HeldNode, error)
}

var _ HeldNodeWriter = (*sqlStore)(nil)

func (s *sqlStore) UpdateHeldNode(ctx context.Context, ident string, held *HeldNode, fn func(n *proto.Node) error, events []proto.HistoryEvent) (*proto.Node, *HeldNode, error) {
	if held != nil {
		n, h, done, err := s.writeNodeVersion(ctx, ident, held.id, held.version, held.stored, cloneNode(held.n), fn, events, true)
		if done {
			return n, h, err
		}
	}
	return s.updateNodeKept(ctx, ident, fn, events, true)
}

// nodeSelectHeld is nodeSelectForUpdate with the row's version after its
// id.
func (s *sqlStore) nodeSelectHeld() string {
	return strings.Replace(s.nodeSelectForUpdate(), "SELECT id, ", "SELECT id, row_version, ", 1)
}

// ReserveHeld reserves as Reserve does, reading in the same transaction
// the columns a held commit compares. The version reserved is the one
// read plus one (reserveQuery bumps it); should the row have changed in
// between (PostgreSQL without the row lock; it is taken), the next held
// commit finds another version and reads again, as row versions never go
// back.
func (s *sqlStore) ReserveHeld(ctx context.Context, ident, conductor string) (*proto.Node, *HeldNode, error) {
	if conductor == "" {
		return nil, nil, errors.New("reserve node: no conductor named")
	}
	var (
		id, version int64
		stored      = make([]any, len(nodeColumns))
	)
	selectQuery := s.nodeSelectHeld()
	get, reserve := s.preparedWrite(ctx, selectQuery), s.preparedWrite(ctx, reserveQuery)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		dest := make([]any, len(nodeColumns)+2)
		dest[0], dest[1] = &id, &version
		for i := range stored {
			dest[i+2] = &stored[i]
		}
		err := s.txQueryRow(ctx, tx, get, selectQuery, ident, ident, ident).Scan(dest...)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %s: %w", ident, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("get node %s: %w", ident, err)
		}
		holder := "?"
		switch r := stored[nodeColumnIndex["reservation"]].(type) {
		case string:
			holder = r
		case []byte:
			holder = string(r)
		}
		return s.reserveRow(ctx, tx, reserve, ident, conductor, id, holder)
	})
	if err != nil {
		return nil, nil, err
	}
	s.wrote(writeReserve)
	stored[nodeColumnIndex["reservation"]] = conductor
	n, err := storedNode(ident, stored)
	if err != nil {
		return nil, nil, err
	}
	if err := s.mergeSeen(ctx, s.rdb, id, n); err != nil {
		return nil, nil, err
	}
	return n, &HeldNode{id: id, version: version + 1, stored: stored, n: cloneNode(n)}, nil
}

// cloneNode is a deep copy of n: maps, slices and pointers are copied, so
// that changing the copy, down to the values of its dictionaries, leaves
// n as it was.
func cloneNode(n *proto.Node) *proto.Node {
	return deepCopy(reflect.ValueOf(n)).Interface().(*proto.Node)
}

// deepCopy copies v, recursively for maps, slices, pointers, interfaces
// and the exported fields of structs. A struct is first copied whole, so
// unexported fields (time.Time's) are kept as values.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(deepCopy(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(deepCopy(v.Elem()))
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		if m, ok := v.Interface().(map[string]any); ok { // proto.Dict
			return reflect.ValueOf(copyDict(m))
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	}
	return v
}

// copyDict is deepCopy of a JSON object as encoding/json decodes one,
// without reflection for its usual members (most of a node's size).
func copyDict(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyJSON(v)
	}
	return out
}

func copyJSON(v any) any {
	switch v := v.(type) {
	case nil, string, bool, float64, int, int64, json.Number:
		return v
	case map[string]any:
		if v == nil {
			return v
		}
		return copyDict(v)
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyJSON(e)
		}
		return out
	}
	return deepCopy(reflect.ValueOf(v)).Interface()
}
