package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// AgentView is what an agent's heartbeat is judged on: a few columns and two
// keys of driver_internal_info, read without decoding the node's document.
// RecordAgent applies only while the node still looks like this.
type AgentView struct {
	UUID           string
	ProvisionState proto.ProvisionState
	Maintenance    bool
	Reservation    *string
	Token          string // driver_internal_info.agent_secret_token ("" if none)
	URL            string // driver_internal_info.agent_url ("" if none)
	HasURL         bool   // agent_url is present (even if empty)

	id int64
}

// KeyValue is one string key of driver_internal_info to set.
type KeyValue struct{ Key, Value string }

// jsonText is a SQL expression reading a string at a path of the JSON
// document column doc; NULL when absent. Paths are Kiln's constants.
func (d *dialect) jsonText(path ...string) string {
	if d.numbered {
		return "(doc::jsonb #>> '{" + strings.Join(path, ",") + "}')"
	}
	return "json_extract(doc, '$." + strings.Join(path, ".") + "')"
}

// jsonSet is a SQL expression: doc with each path set to a string
// placeholder, in order.
func (d *dialect) jsonSet(paths [][]string) string {
	if d.numbered {
		e := "doc::jsonb"
		for _, p := range paths {
			e = "jsonb_set(" + e + ", '{" + strings.Join(p, ",") + "}', to_jsonb(?::text))"
		}
		return e + "::text"
	}
	var b strings.Builder
	b.WriteString("json_set(doc")
	for _, p := range paths {
		b.WriteString(", '$." + strings.Join(p, ".") + "', ?")
	}
	b.WriteString(")")
	return b.String()
}

// agentViewQuery selects an AgentView by col (uuid or name).
func (s *sqlStore) agentViewQuery(col string) string {
	return "SELECT id, uuid, provision_state, maintenance, reservation, " +
		s.d.jsonText("driver_internal_info", proto.InfoAgentToken) + ", " +
		s.d.jsonText("driver_internal_info", proto.InfoAgentURL) +
		" FROM nodes WHERE " + col + " = ?"
}

// AgentOf reads the node's AgentView by UUID or name with one indexed read
// (two when ident is a name: agents send UUIDs).
func (s *sqlStore) AgentOf(ctx context.Context, ident string) (AgentView, error) {
	var (
		v                  AgentView
		prov               string
		res, tok, agentURL sql.NullString
	)
	err := byUUIDOrName(func(col string) error {
		return s.queryRow(ctx, s.rdb, s.agentViewQuery(col), ident).
			Scan(&v.id, &v.UUID, &prov, &v.Maintenance, &res, &tok, &agentURL)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return AgentView{}, fmt.Errorf("node %s: %w", ident, ErrNotFound)
	}
	if err != nil {
		return AgentView{}, fmt.Errorf("read agent of node %s: %w", ident, err)
	}
	v.ProvisionState = proto.ProvisionState(prov)
	if res.Valid {
		v.Reservation = &res.String
	}
	v.Token, v.URL, v.HasURL = tok.String, agentURL.String, agentURL.Valid
	return v, nil
}

// RecordAgent sets keys of driver_internal_info, and provision_updated_at
// when touchProvision, with one UPDATE of the doc and updated_at columns
// that applies only if the node still matches seen (state, maintenance,
// reservation, token, agent URL). ok is false when it no longer does: the
// caller decides again on the current node (UpdateNode).
func (s *sqlStore) RecordAgent(ctx context.Context, seen AgentView, set []KeyValue, touchProvision bool) (bool, error) {
	if seen.id == 0 {
		return false, errors.New("record agent: the view was not read by AgentOf")
	}
	now := wireTime(s.clock())
	stamp := now.UTC().Format(proto.TimeLayout)
	paths := make([][]string, 0, len(set)+2)
	args := make([]any, 0, len(set)+12)
	for _, kv := range set {
		paths = append(paths, []string{"driver_internal_info", kv.Key})
		args = append(args, kv.Value)
	}
	paths = append(paths, []string{"updated_at"})
	args = append(args, stamp)
	if touchProvision {
		paths = append(paths, []string{"provision_updated_at"})
		args = append(args, stamp)
	}
	provCol := ""
	if touchProvision {
		provCol = ", provision_updated_at = ?"
		args = append(args, now.UnixMicro())
	}
	args = append(args, now.UnixMicro(), seen.id, string(seen.ProvisionState), seen.Maintenance,
		deref(seen.Reservation), seen.Token, seen.URL)
	urlCond := "COALESCE(" + s.d.jsonText("driver_internal_info", proto.InfoAgentURL) + ", '') = ?"
	if !seen.HasURL {
		urlCond = "(" + s.d.jsonText("driver_internal_info", proto.InfoAgentURL) + " IS NULL AND ? = '')"
	}
	// masked_doc is cleared here rather than by the trigger on doc, which
	// would update the row a second time: the next read derives it.
	query := "UPDATE nodes SET doc = " + s.d.jsonSet(paths) + provCol + ", updated_at = ?, masked_doc = NULL" +
		" WHERE id = ? AND provision_state = ? AND maintenance = ? AND COALESCE(reservation, '') = ?" +
		" AND COALESCE(" + s.d.jsonText("driver_internal_info", proto.InfoAgentToken) + ", '') = ? AND " + urlCond
	var changed int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		r, err := s.exec(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		changed, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record agent of node %s: %w", seen.UUID, err)
	}
	return changed == 1, nil
}

// byUUIDOrName runs read with "uuid" and, if that finds no row, with
// "name": a UUID match wins, as Ironic's lookup by identity does. Names
// are never UUIDs, so the two cannot both match different nodes for a
// valid name; two point reads on unique indexes cost less than one OR
// query with its sort.
func byUUIDOrName(read func(col string) error) error {
	err := read("uuid")
	if errors.Is(err, sql.ErrNoRows) {
		err = read("name")
	}
	return err
}
