package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/kilnhq/kiln/controller/jsonscan"
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
	// What the agent's last recorded heartbeat said: a heartbeat that
	// repeats it soon after changes nothing worth a write.
	Version       string    // driver_internal_info.agent_version
	VerifyCA      string    // driver_internal_info.agent_verify_ca
	LastHeartbeat time.Time // driver_internal_info.agent_last_heartbeat; zero if none or unreadable

	id           int64
	rowVersion   int64     // the row's version (RecordSeen applies at it)
	docHeartbeat time.Time // the document's agent_last_heartbeat, before the narrow stamp
	hasDocStamp  bool      // the document holds that key (docHeartbeat may still be zero: unreadable)
	doc          string    // the stored document read; "" for a kept view (agentcache.go)
	masked       *string   // its masked copy; nil when the row has none
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

// agentViewQuery selects an AgentView by col (uuid or name): the columns
// and the document, whose agent keys agentKeys reads in Go (SQLite's
// json_extract parsed the whole document for them, a fifth of a
// heartbeat), and the masked document RecordAgent keeps in step. Most
// heartbeats write nothing and need no masked copy, but reading it here
// costs them little, while a second query for it cost each written
// heartbeat a quarter more (BenchmarkHeartbeatWritten).
func agentViewQuery(col string) string {
	return "SELECT id, row_version, " + seenCol + ", uuid, provision_state, maintenance, reservation, doc, masked_doc FROM nodes WHERE " + col + " = ?"
}

// AgentOf reads the node's AgentView by UUID or name: the view kept from
// an earlier read when the row has not changed since (agentcache.go), else
// with one indexed read of the row (two when ident is a name: agents send
// UUIDs). Neither read is interrupted when ctx ends: each is a point read
// far shorter than the goroutines that would watch for it.
func (s *sqlStore) AgentOf(ctx context.Context, ident string) (AgentView, error) {
	ctx = context.WithoutCancel(ctx)
	if v, ok, err := s.keptAgentOf(ctx, ident); ok || err != nil {
		return v, err
	}
	var (
		v      AgentView
		prov   string
		res    sql.NullString
		masked sql.NullString
		seen   sql.NullInt64
	)
	// Strings, not []byte: SQLite's driver returns TEXT as a string, which
	// database/sql would copy again into a []byte.
	err := byUUIDOrName(func(col string) error {
		return s.queryRow(ctx, s.rdb, agentViewQuery(col), ident).
			Scan(&v.id, &v.rowVersion, &seen, &v.UUID, &prov, &v.Maintenance, &res, &v.doc, &masked)
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
	if masked.Valid {
		v.masked = &masked.String
	}
	k, err := agentKeys(unsafe.Slice(unsafe.StringData(v.doc), len(v.doc)))
	if err != nil {
		return AgentView{}, fmt.Errorf("read agent of node %s: %w", ident, err)
	}
	v.Token, v.URL, v.HasURL, v.Version, v.VerifyCA = k.token, k.url, k.hasURL, k.version, k.verifyCA
	v.docHeartbeat = parseStamp(k.lastHeartbeat)
	v.hasDocStamp = k.lastHeartbeat != ""
	s.agents.put(v)
	v.LastHeartbeat = v.docHeartbeat
	applySeen(&v, seen)
	return v, nil
}

// applySeen sets v's last heartbeat to the narrow stamp seen when that is
// newer than the document's (agentseen.go). RecordAgent's splice still
// edits the document read: its stamp is replaced anyway.
func applySeen(v *AgentView, seen sql.NullInt64) {
	// newerSeen on the document's stamp, without parsing it again.
	if seen.Valid && v.hasDocStamp && (v.docHeartbeat.IsZero() || v.docHeartbeat.UnixMicro() < seen.Int64) {
		v.LastHeartbeat = time.UnixMicro(seen.Int64).UTC()
	}
}

// parseStamp reads a stored timestamp as flowstate does; zero when it is
// none or unreadable.
func parseStamp(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, proto.TimeLayout} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// agentInfo is what AgentOf reads of driver_internal_info, each value as
// json_extract gives it ("" when absent or null).
type agentInfo struct {
	token, url, version, verifyCA, lastHeartbeat string
	hasURL                                       bool
}

// set records the key k's raw value, if it is one agentInfo holds.
func (a *agentInfo) set(k string, raw []byte) (err error) {
	switch k {
	case proto.InfoAgentToken:
		a.token, _, err = jsonText(raw)
	case proto.InfoAgentURL:
		a.url, a.hasURL, err = jsonText(raw)
	case proto.InfoAgentVersion:
		a.version, _, err = jsonText(raw)
	case proto.InfoAgentVerifyCA:
		a.verifyCA, _, err = jsonText(raw)
	case proto.InfoAgentLastHeartbeat:
		a.lastHeartbeat, _, err = jsonText(raw)
	}
	return err
}

// agentKeys reads driver_internal_info's agent keys from a stored
// document as json_extract would: "" and not present for an absent key or
// a null, a string's value, any other value's JSON text. A document that
// is not compact (PostgreSQL's jsonb text after a jsonb_set) is decoded.
func agentKeys(doc []byte) (agentInfo, error) {
	var (
		a   agentInfo
		dii []byte
	)
	if jsonscan.Members(doc, func(k, v []byte) {
		if string(k) == "driver_internal_info" {
			dii = v
		}
	}) == nil {
		if len(dii) == 0 || dii[0] != '{' {
			return agentInfo{}, nil
		}
		var err error
		if jsonscan.Members(dii, func(k, v []byte) {
			if e := a.set(string(k), v); e != nil && err == nil {
				err = e
			}
		}) == nil {
			if err != nil {
				return agentInfo{}, err
			}
			return a, nil
		}
		a = agentInfo{}
	}
	var d struct {
		DII map[string]json.RawMessage `json:"driver_internal_info"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return agentInfo{}, fmt.Errorf("decode stored node: %w", err)
	}
	for k, raw := range d.DII {
		if err := a.set(k, raw); err != nil {
			return agentInfo{}, err
		}
	}
	return a, nil
}

// jsonText is json_extract's text of a JSON value; present is false for
// none or null.
func jsonText(raw []byte) (text string, present bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false, nil
	case raw[0] == '"' && len(raw) >= 2 && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0:
		// No escape: the text between the quotes, without decoding (a
		// stored document is valid JSON; decoding each agent key was a
		// tenth of a heartbeat).
		return string(raw[1 : len(raw)-1]), true, nil
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", false, fmt.Errorf("decode stored node: %w", err)
		}
		return text, true, nil
	}
	return string(raw), true, nil
}

// RecordAgent sets keys of driver_internal_info, and provision_updated_at
// when touchProvision, with one UPDATE of the doc and updated_at columns
// that applies only if the node still matches seen (state, maintenance,
// reservation, token, agent URL). When the document already holds every
// key and is still the one read, the UPDATE writes the document and masked
// copy spliced in Go (agentdoc.go) and SQL parses no JSON; otherwise it
// applies json_set to the current document. ok is false when the node no
// longer matches: the caller decides again on the current node
// (UpdateNode).
func (s *sqlStore) RecordAgent(ctx context.Context, seen AgentView, set []KeyValue, touchProvision bool) (bool, error) {
	if seen.id == 0 {
		return false, errors.New("record agent: the view was not read by AgentOf")
	}
	if seen.doc == "" {
		// A kept view: the splice below needs the document it was read
		// with.
		if ok, err := s.agentDocs(ctx, &seen); err != nil || !ok {
			return false, err
		}
	}
	now := wireTime(s.clock())
	stamp := now.UTC().Format(proto.TimeLayout)
	paths := make([][]string, 0, len(set)+2)
	setArgs := make([]any, 0, len(set)+2)
	for _, kv := range set {
		paths = append(paths, []string{"driver_internal_info", kv.Key})
		setArgs = append(setArgs, kv.Value)
	}
	paths = append(paths, []string{"updated_at"})
	setArgs = append(setArgs, stamp)
	if touchProvision {
		paths = append(paths, []string{"provision_updated_at"})
		setArgs = append(setArgs, stamp)
	}
	args := make([]any, 0, len(set)+20)
	// masked_doc is cleared here rather than by the trigger on doc, which
	// would update the row a second time: the next read derives it.
	docSet, maskedSet := s.d.jsonSet(paths), "NULL"
	args = append(args, setArgs...)
	docCond := ""
	if doc, masked, ok := spliceAgent(seen, set, now, touchProvision); ok {
		// The spliced copies when the row holds the document read, which
		// the comparison tells without parsing it; json_set otherwise.
		docSet = "CASE WHEN doc = ? THEN CAST(? AS TEXT) ELSE " + docSet + " END"
		maskedSet = "CASE WHEN doc = ? THEN CAST(? AS TEXT) END"
		args = append([]any{seen.doc, doc}, args...)
		args = append(args, seen.doc, masked)
		docCond = "doc = ? OR "
	}
	cols := ""
	if touchProvision {
		cols = ", provision_updated_at = ?"
		args = append(args, now.UnixMicro())
	}
	workCols, workArgs := agentWork(seen, set)
	cols += workCols
	args = append(args, workArgs...)
	args = append(args, now.UnixMicro(), seen.id, string(seen.ProvisionState), seen.Maintenance, deref(seen.Reservation))
	if docCond != "" {
		args = append(args, seen.doc)
	}
	args = append(args, seen.Token, seen.URL)
	urlCond := "COALESCE(" + s.d.jsonText("driver_internal_info", proto.InfoAgentURL) + ", '') = ?"
	if !seen.HasURL {
		urlCond = "(" + s.d.jsonText("driver_internal_info", proto.InfoAgentURL) + " IS NULL AND ? = '')"
	}
	query := "UPDATE nodes SET doc = " + docSet + ", masked_doc = " + maskedSet + cols + ", updated_at = ?, " + bumpRowVersion +
		" WHERE id = ? AND provision_state = ? AND maintenance = ? AND COALESCE(reservation, '') = ?" +
		" AND (" + docCond + "(COALESCE(" + s.d.jsonText("driver_internal_info", proto.InfoAgentToken) + ", '') = ? AND " + urlCond + "))"
	changed, err := s.execWrite(ctx, query, args...)
	if err != nil {
		return false, fmt.Errorf("record agent of node %s: %w", seen.UUID, err)
	}
	s.wrote(writeRecordAgent)
	if changed == 1 {
		s.agents.drop(seen.UUID)
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
