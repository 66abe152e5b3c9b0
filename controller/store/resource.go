package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// ErrInUse: a delete refused because rows of another table still refer to
// the object (a chassis that nodes belong to).
var ErrInUse = errors.New("still referred to")

// ErrMissingReference: a write refused because the object names another
// that does not exist (a node's chassis_uuid, deleted since it was checked).
var ErrMissingReference = errors.New("refers to an object that does not exist")

// Resource describes how one kind of API object is stored, so that
// Resources serves its create/get/list/update/delete without methods of its
// own on Store. A table for it has id (the insertion order), uuid (unique),
// created_at and updated_at (microseconds), doc (the object as JSON) and the
// Columns, which index the document for filters and sorting.
type Resource[T any] struct {
	Kind  string // in errors: "chassis"
	Table string
	// Meta points at the object's UUID and timestamps.
	Meta func(*T) (uuid *string, created, updated **proto.Time)
	// Columns are the table's further columns, each derived from the
	// object: the one place they are computed, so they cannot drift.
	Columns []Column[T]
	// Sort maps extra sort keys to SQL expressions over the columns (id,
	// uuid, created_at, updated_at are always sortable). Each needs an
	// index on (expr, id) in the migration, or lists are not O(page).
	Sort map[string]string
	// Filters maps query filter names to columns, matched exactly.
	Filters map[string]string
	// InFilters maps query filter names to columns matched against a
	// comma-separated list of values (any of them).
	InFilters map[string]string
	// Unique maps unique constraints (as the dialects name them,
	// <table>_<column>_key) to the error a violation returns; a UUID's is
	// ErrDuplicateUUID without saying so.
	Unique map[string]error
	// Bare clears, on a copy about to be stored, what is not stored (the
	// links the API adds); nil keeps everything.
	Bare func(*T)
	// ReferredBy lists the "table.column"s that refer to this resource's
	// uuid through a foreign key: a delete while one does is ErrInUse.
	ReferredBy []string
	// NameColumn is a unique column that also identifies an object (a
	// port group's name): GetByName reads by it. "" for none.
	NameColumn string
}

// Column is one indexed column and how it is derived from the object.
type Column[T any] struct {
	Name  string
	Value func(*T) any
}

// Query filters, sorts and pages Resources.List. Filters are by the names
// of Resource.Filters; a name it lacks is ErrBadQuery.
type Query struct {
	Filters map[string]string
	Limit   int
	Marker  string // UUID of the last object of the previous page
	SortKey string // "" = "id" = insertion order
	SortDir string
}

// Resources stores objects of one kind as its Resource describes.
type Resources[T any] struct {
	s     *sqlStore
	r     Resource[T]
	cols  []string // uuid, created_at, updated_at, the Columns, doc
	exprs map[string]string
}

// Unwrapper is a Store wrapping another (to observe node changes, say):
// NewResources serves resources from the Store it wraps.
type Unwrapper interface {
	Unwrap() Store
}

// NewResources serves r from st: a Store that Open returned, or a wrapper
// of one (Unwrapper).
func NewResources[T any](st Store, r Resource[T]) (*Resources[T], error) {
	for {
		w, ok := st.(Unwrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	s, ok := st.(*sqlStore)
	if !ok {
		return nil, fmt.Errorf("resources %s: store %T is not an SQL store", r.Kind, st)
	}
	cols := []string{"uuid", "created_at", "updated_at"}
	for _, c := range r.Columns {
		cols = append(cols, c.Name)
	}
	exprs := map[string]string{"id": "id", "uuid": "uuid", "created_at": "created_at", "updated_at": "updated_at"}
	maps.Copy(exprs, r.Sort)
	return &Resources[T]{s: s, r: r, cols: append(cols, "doc"), exprs: exprs}, nil
}

// SortKeys are the accepted Query.SortKey values, sorted.
func (rs *Resources[T]) SortKeys() []string {
	return slices.Sorted(maps.Keys(rs.exprs))
}

// Meta points at v's UUID and timestamps.
func (rs *Resources[T]) Meta(v *T) (uuid *string, created, updated **proto.Time) {
	return rs.r.Meta(v)
}

// UUID points at v's UUID.
func (rs *Resources[T]) UUID(v *T) *string {
	u, _, _ := rs.r.Meta(v)
	return u
}

func (rs *Resources[T]) values(v *T) ([]any, error) {
	uuid, created, updated := rs.r.Meta(v)
	bare := *v
	if rs.r.Bare != nil {
		rs.r.Bare(&bare)
	}
	doc, err := json.Marshal(&bare)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", rs.r.Kind, *uuid, err)
	}
	vals := []any{*uuid, micros(*created), micros(*updated)}
	for _, c := range rs.r.Columns {
		vals = append(vals, c.Value(v))
	}
	return append(vals, string(doc)), nil
}

func (rs *Resources[T]) decode(doc []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(doc, v); err != nil {
		return nil, fmt.Errorf("decode stored %s: %w", rs.r.Kind, err)
	}
	return v, nil
}

// writeError maps constraint violations to the Store's errors: a foreign
// key refusing a write is fk (ErrMissingReference on create and update,
// ErrInUse on delete).
func (rs *Resources[T]) writeError(err error, doing string, fk error) error {
	if err == nil {
		return nil
	}
	if c := rs.s.d.uniqueViolation(err); c != "" {
		if e, ok := rs.r.Unique[c]; ok {
			return fmt.Errorf("%s: %w", doing, e)
		}
		if c == rs.r.Table+"_uuid_key" {
			return fmt.Errorf("%s: %w", doing, ErrDuplicateUUID)
		}
	}
	if rs.s.d.foreignKeyViolation(err) && (fk != ErrInUse || len(rs.r.ReferredBy) > 0) {
		return fmt.Errorf("%s: %w", doing, fk)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// Create stores v (its UUID set by the caller) and sets its CreatedAt.
// ErrDuplicateUUID, or the Unique error, when taken.
func (rs *Resources[T]) Create(ctx context.Context, v *T) error {
	uuid, created, _ := rs.r.Meta(v)
	if *uuid == "" {
		return fmt.Errorf("create %s: the UUID is not set", rs.r.Kind)
	}
	prev := *created
	*created = wireTime(rs.s.clock())
	vals, err := rs.values(v)
	if err == nil {
		query := "INSERT INTO " + rs.r.Table + " (" + strings.Join(rs.cols, ", ") + ") VALUES (" + placeholders(len(rs.cols)) + ")"
		err = rs.s.writeTx(ctx, func(tx *sql.Tx) error {
			_, err := rs.s.exec(ctx, tx, query, vals...)
			return err
		})
		err = rs.writeError(err, "create "+rs.r.Kind+" "+*uuid, ErrMissingReference)
	}
	if err != nil {
		*created = prev
	}
	return err
}

func (rs *Resources[T]) get(ctx context.Context, q querier, uuid string, lock bool) (int64, *T, error) {
	query := "SELECT id, doc FROM " + rs.r.Table + " WHERE uuid = ?"
	if lock {
		query += rs.s.d.forUpdate
	}
	var id int64
	var doc []byte
	err := rs.s.queryRow(ctx, q, query, uuid).Scan(&id, &doc)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("%s %s: %w", rs.r.Kind, uuid, ErrNotFound)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("get %s %s: %w", rs.r.Kind, uuid, err)
	}
	v, err := rs.decode(doc)
	return id, v, err
}

// Get reads one object by UUID; ErrNotFound if there is none.
func (rs *Resources[T]) Get(ctx context.Context, uuid string) (*T, error) {
	_, v, err := rs.get(ctx, rs.s.rdb, uuid, false)
	return v, err
}

// Named reports whether objects have a NameColumn (GetByName finds them).
func (rs *Resources[T]) Named() bool { return rs.r.NameColumn != "" }

// GetByName reads one object by its NameColumn; ErrNotFound if there is
// none (or the resource has no names).
func (rs *Resources[T]) GetByName(ctx context.Context, name string) (*T, error) {
	if rs.r.NameColumn == "" {
		return nil, fmt.Errorf("%s %s: %w", rs.r.Kind, name, ErrNotFound)
	}
	var doc []byte
	err := rs.s.queryRow(ctx, rs.s.rdb, "SELECT doc FROM "+rs.r.Table+" WHERE "+rs.r.NameColumn+" = ?", name).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s %s: %w", rs.r.Kind, name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", rs.r.Kind, name, err)
	}
	return rs.decode(doc)
}

// List returns a page of objects in q's order, from indexes (see
// sqlStore.listQuery). ErrNotFound for an unknown marker.
func (rs *Resources[T]) List(ctx context.Context, q Query) ([]*T, error) {
	var where []string
	var args []any
	for _, name := range slices.Sorted(maps.Keys(q.Filters)) {
		if col, ok := rs.r.InFilters[name]; ok {
			vals := strings.Split(q.Filters[name], ",")
			where = append(where, col+" IN ("+placeholders(len(vals))+")")
			for _, v := range vals {
				args = append(args, v)
			}
			continue
		}
		col, ok := rs.r.Filters[name]
		if !ok {
			return nil, fmt.Errorf("list %s: %w: no filter %q", rs.r.Kind, ErrBadQuery, name)
		}
		where = append(where, col+" = ?")
		args = append(args, q.Filters[name])
	}
	rows, err := rs.s.list(ctx, rs.r.Table, "doc", rs.exprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", rs.r.Kind, err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("list %s: %w", rs.r.Kind, err)
		}
		v, err := rs.decode(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", rs.r.Kind, err)
	}
	return out, nil
}

// Update runs fn on the current object inside one transaction holding its
// row lock and stores the result with UpdatedAt set, unless fn returns an
// error: then nothing changes and that error is returned as is. fn must not
// call the store and may run more than once if the database asks for a
// retry; the UUID and CreatedAt it cannot change.
func (rs *Resources[T]) Update(ctx context.Context, uuid string, fn func(v *T) error) (*T, error) {
	var out *T
	err := rs.s.writeTx(ctx, func(tx *sql.Tx) error {
		id, v, err := rs.get(ctx, tx, uuid, true)
		if err != nil {
			return err
		}
		_, created, _ := rs.r.Meta(v)
		keep := *created
		if err := fn(v); err != nil {
			return err
		}
		u, created, updated := rs.r.Meta(v)
		*u, *created, *updated = uuid, keep, wireTime(rs.s.clock())
		vals, err := rs.values(v)
		if err != nil {
			return err
		}
		set := make([]string, len(rs.cols))
		for i, c := range rs.cols {
			set[i] = c + " = ?"
		}
		_, err = rs.s.exec(ctx, tx, "UPDATE "+rs.r.Table+" SET "+strings.Join(set, ", ")+" WHERE id = ?", append(vals, id)...)
		if err != nil {
			return rs.writeError(err, "update "+rs.r.Kind+" "+uuid, ErrMissingReference)
		}
		out = v
		return nil
	})
	return out, err
}

// Delete removes the object: ErrNotFound if there is none, ErrInUse while a
// ReferredBy row names it.
func (rs *Resources[T]) Delete(ctx context.Context, uuid string) error {
	return rs.s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := rs.s.exec(ctx, tx, "DELETE FROM "+rs.r.Table+" WHERE uuid = ?", uuid)
		if err != nil {
			return rs.writeError(err, "delete "+rs.r.Kind+" "+uuid, ErrInUse)
		}
		return affectedOne(r, nil, "delete "+rs.r.Kind+" "+uuid, rs.r.Kind+" "+uuid)
	})
}

// DeleteAll removes every object and returns how many there were (Ironic's
// DELETE of a whole collection, inspection rules').
func (rs *Resources[T]) DeleteAll(ctx context.Context) (int64, error) {
	var n int64
	err := rs.s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := rs.s.exec(ctx, tx, "DELETE FROM "+rs.r.Table)
		if err != nil {
			return rs.writeError(err, "delete every "+rs.r.Kind, ErrInUse)
		}
		n, err = r.RowsAffected()
		return err
	})
	return n, err
}
