package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kilnhq/kiln/controller/jsonscan"
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// NodeView is a node as the API shows it, ready to pass through: Doc is the
// JSON object of the node with every secret masked and last_error
// scrubbed, without reservation and links, in encoding/json's bytes for the
// node decoded from its stored document (so rendering it is byte for byte
// what decoding, masking and encoding the node gives), lined
// (jsonscan.ToLined: a newline before each member). ProvisionState and
// Reservation come from their columns. Doc is read-only: it may share its
// memory with a string.
type NodeView struct {
	UUID           string
	ProvisionState proto.ProvisionState
	Reservation    *string
	Doc            []byte
}

// NodeViews reads nodes as views: one column per node, no decoding.
type NodeViews interface {
	// GetNodeView is GetNode's view (by UUID or name).
	GetNodeView(ctx context.Context, ident string) (NodeView, error)
	// ListNodeViews is ListNodes' views (Summary is ignored).
	ListNodeViews(ctx context.Context, q NodeQuery) ([]NodeView, error)
}

// ViewsOf is st's NodeViews, through wrappers (Unwrapper); false if it has
// none.
func ViewsOf(st Store) (NodeViews, bool) {
	for {
		if v, ok := st.(NodeViews); ok {
			return v, true
		}
		w, ok := st.(Unwrapper)
		if !ok {
			return nil, false
		}
		st = w.Unwrap()
	}
}

// maskedDoc is the masked_doc column for the stored document doc, lined
// (jsonscan.ToLined) so that readers split it with one search per member.
func maskedDoc(doc []byte) ([]byte, error) {
	n, err := decodeNode(doc, nil)
	if err != nil {
		return nil, err
	}
	m := secrets.Node(n)
	b, err := json.Marshal(&m)
	if err != nil {
		return nil, err
	}
	return jsonscan.ToLined(b)
}

// viewCols reads a NodeView: the masked document, or the document when the
// masked one is missing (NULL) and must be derived, and the narrow
// heartbeat stamp to merge into it; from nodesSeen.
const viewCols = "uuid, provision_state, reservation, masked_doc IS NOT NULL, " + seenJoined + ", COALESCE(masked_doc, doc)"

// nodeViewQuery selects a NodeView by col (uuid or name).
func nodeViewQuery(col string) string {
	return "SELECT " + viewCols + " FROM " + nodesSeen + " WHERE " + col + " = ?"
}

// scanView scans viewCols into v, deriving a missing masked document.
func scanView(scan func(dest ...any) error, v *NodeView) error {
	var (
		prov   string
		res    sql.NullString
		masked bool
		seen   sql.NullInt64
		text   string
	)
	// A string, not a []byte: SQLite's driver returns TEXT as a string,
	// which database/sql would copy once more into a []byte (a twentieth
	// of a /detail request, measured). The view shares its memory.
	if err := scan(&v.UUID, &prov, &res, &masked, &seen, &text); err != nil {
		return err
	}
	doc := unsafe.Slice(unsafe.StringData(text), len(text))
	v.ProvisionState = proto.ProvisionState(prov)
	v.Reservation = nil
	if res.Valid {
		v.Reservation = &res.String
	}
	if !masked {
		var err error
		if doc, err = maskedDoc(doc); err != nil {
			return err
		}
	}
	return v.setDoc(doc, seen)
}

// setDoc sets v's masked, lined document with the narrow stamp seen merged
// in.
func (v *NodeView) setDoc(doc []byte, seen sql.NullInt64) error {
	doc, err := mergeSeenDoc(doc, true, seen)
	if err != nil {
		return err
	}
	v.Doc = doc
	return nil
}

func (s *sqlStore) GetNodeView(ctx context.Context, ident string) (NodeView, error) {
	var v NodeView
	err := byUUIDOrName(func(col string) error {
		return scanView(s.queryRow(ctx, s.rdb, nodeViewQuery(col), ident).Scan, &v)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return NodeView{}, fmt.Errorf("node %s: %w", ident, ErrNotFound)
	}
	if err != nil {
		return NodeView{}, fmt.Errorf("get node %s: %w", ident, err)
	}
	return v, nil
}

func (s *sqlStore) ListNodeViews(ctx context.Context, q NodeQuery) ([]NodeView, error) {
	where, args := nodeWhere(q)
	rows, err := s.list(ctx, nodesSeen, viewRow, nodeSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	out := make([]NodeView, 0, min(max(q.Limit, 1), 1000))
	for rows.Next() {
		var row sql.NullString
		if err := rows.Scan(&row); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		var v NodeView
		if !row.Valid {
			rows.Close()
			return s.listNodeViewCols(ctx, where, args, q)
		}
		if err := splitView(row.String, &v); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// viewRow is viewCols as one text value per row (as summaryRow is the
// summary's, for the same reason: the driver's cost per column read):
// uuid, provision_state, "1" when the masked document is there or "0",
// the reservation ("=value" or "" for NULL), the narrow heartbeat stamp
// ("" for none) and the document, joined by
// summarySep. A row whose uuid, state or reservation holds the separator
// is NULL, and the page is read again column by column; the document
// cannot hold it (JSON escapes control characters) and comes last.
const viewRow = "CASE WHEN uuid || provision_state || COALESCE(reservation, '') LIKE '%" + summarySep + "%' THEN NULL ELSE " +
	"uuid || '" + summarySep + "' || provision_state || '" + summarySep +
	"' || CASE WHEN masked_doc IS NULL THEN '0' ELSE '1' END || '" + summarySep +
	"' || COALESCE('=' || reservation, '') || '" + summarySep +
	"' || COALESCE(CAST(" + seenJoined + " AS TEXT), '') || '" + summarySep + "' || COALESCE(masked_doc, doc) END"

// splitView reads row (viewRow) into v, deriving a missing masked
// document.
func splitView(row string, v *NodeView) error {
	var part [5]string
	for i := range part {
		var ok bool
		if part[i], row, ok = strings.Cut(row, summarySep); !ok {
			return errors.New("malformed view row")
		}
	}
	res, ok := nullablePart(part[3])
	if !ok || part[2] != "0" && part[2] != "1" {
		return errors.New("malformed view row")
	}
	var seen sql.NullInt64
	if part[4] != "" {
		n, err := strconv.ParseInt(part[4], 10, 64)
		if err != nil {
			return errors.New("malformed view row")
		}
		seen = sql.NullInt64{Int64: n, Valid: true}
	}
	*v = NodeView{UUID: part[0], ProvisionState: proto.ProvisionState(part[1]), Reservation: res}
	doc := unsafe.Slice(unsafe.StringData(row), len(row))
	if part[2] == "0" {
		var err error
		if doc, err = maskedDoc(doc); err != nil {
			return err
		}
	}
	return v.setDoc(doc, seen)
}

// listNodeViewCols is ListNodeViews reading each column on its own.
func (s *sqlStore) listNodeViewCols(ctx context.Context, where []string, args []any, q NodeQuery) ([]NodeView, error) {
	rows, err := s.list(ctx, nodesSeen, viewCols, nodeSortExprs, where, args, q.SortKey, q.SortDir, q.Marker, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []NodeView
	for rows.Next() {
		var v NodeView
		if err := scanView(rows.Scan, &v); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}
