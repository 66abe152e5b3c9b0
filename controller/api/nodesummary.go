package api

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// The default node list (GET /v1/nodes without fields or detail) written
// from the store's summaries (store.NodeSummary): no node is built and no
// field is reached through reflection. The bytes are those
// (*objectWriter).node writes for the node the summary stands for; the
// golden and summary tests hold both paths to that.

// summaryField says how nodeSummary writes a field of the default list.
type summaryField uint8

const (
	sumUnknown summaryField = iota
	sumUUID
	sumName
	sumInstanceUUID
	sumPowerState
	sumProvisionState
	sumMaintenance
	sumLinks
)

var summaryFields = map[string]summaryField{
	"uuid": sumUUID, "name": sumName, "instance_uuid": sumInstanceUUID, "power_state": sumPowerState,
	"provision_state": sumProvisionState, "maintenance": sumMaintenance, "links": sumLinks,
}

// summaryPlan is p's fields as summaryFields, or false when p shows a field
// a summary lacks or one left out when empty, as links never are (then the
// generic path renders).
func summaryPlan(p fieldPlan) ([]summaryField, bool) {
	out := make([]summaryField, len(p.fields))
	for i, f := range p.fields {
		k := summaryFields[f.name]
		if k == sumUnknown || f.omitEmpty && !f.link {
			return nil, false
		}
		out[i] = k
	}
	return out, true
}

// nodeSummary writes s with the fields of plan (p's, as summaryPlan gives
// them): the bytes node writes for s.Node(). mv is the request's minor
// version, base its base URL.
func (w *objectWriter) nodeSummary(base string, mv int, s *store.NodeSummary, plan []summaryField, p fieldPlan) error {
	w.buf.WriteByte('{')
	for i, k := range plan {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		w.buf.Write(p.fields[i].key)
		var err error
		switch k {
		case sumUUID:
			err = w.stringValue(s.UUID)
		case sumName:
			if s.Name == nil {
				w.buf.WriteString("null")
			} else {
				err = w.stringValue(*s.Name)
			}
		case sumInstanceUUID:
			err = w.optionalString(s.InstanceUUID)
		case sumPowerState:
			err = w.optionalString(s.PowerState)
		case sumProvisionState:
			switch {
			case s.ProvisionState == proto.StateAvailable && mv < 2:
				w.buf.WriteString("null")
			case s.ProvisionState == proto.StateInspectWait && mv < 39:
				err = w.stringValue(string(proto.StateInspecting))
			default:
				err = w.stringValue(string(s.ProvisionState))
			}
		case sumMaintenance:
			if s.Maintenance {
				w.buf.WriteString("true")
			} else {
				w.buf.WriteString("false")
			}
		case sumLinks:
			self := "nodes/" + s.UUID
			err = w.linksPlain(base, self, "", w.plainBase(base) && isPlainString(self))
		}
		if err != nil {
			return err
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// stringValue writes str as encoding/json does.
func (w *objectWriter) stringValue(str string) error {
	if w.plainString(str) {
		return nil
	}
	return w.value(str)
}

// optionalString writes str, or null for "" (a nil pointer in the node).
func (w *objectWriter) optionalString(str string) error {
	if str == "" {
		w.buf.WriteString("null")
		return nil
	}
	return w.stringValue(str)
}

// listNodeSummaries answers the default node list from the store's
// summaries; false when the store has none or the plan shows a field they
// lack (the caller then lists nodes).
func (s *Server) listNodeSummaries(c echo.Context, q store.NodeQuery, p listParams, path string, plan fieldPlan) (bool, error) {
	sums, ok := store.SummariesOf(s.store)
	if !ok {
		return false, nil
	}
	fields, ok := summaryPlan(plan)
	if !ok {
		return false, nil
	}
	if vv, ok := store.VersionedViewsOf(s.store); ok && q.Summary {
		// The default list, polled as /detail is: kept renderings by row
		// version, and the views of the nodes not kept.
		if done, err := s.listKeptViews(c, vv, q, p, path, plan, keptSummary); done {
			return true, err
		}
	}
	list, err := sums.ListNodeSummaries(c.Request().Context(), q)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && p.marker != "" {
			return true, badRequest("Marker %s could not be found.", p.marker)
		}
		return true, err
	}
	next := ""
	if len(list) > 0 {
		next = nextLink(c, path, p, len(list), list[len(list)-1].UUID)
	}
	base, mv := baseURL(c), minor(c)
	return true, sendList(c, "nodes", len(list), next, func(w *objectWriter, i int) error {
		return w.nodeSummary(base, mv, &list[i], fields, plan)
	})
}
