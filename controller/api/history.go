package api

import (
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// historyView is one node history event as GET …/history shows it: the
// standard fields, or with detail every field of the request's
// microversion (project from 1.113; state, target_provision_state and
// duration_seconds from 1.115), null where unknown, as Ironic.
func historyView(c echo.Context, nodeUUID string, ev proto.HistoryEvent, detail bool) map[string]any {
	out := map[string]any{
		"uuid": ev.UUID, "created_at": ev.CreatedAt, "severity": ev.Severity,
		"event": secrets.Scrub(ev.Event), "links": links(c, "nodes/"+nodeUUID+"/history/"+ev.UUID),
	}
	if !detail {
		if e := out["event"].(string); len(e) > 255 {
			out["event"] = e[:251] + "..." // Ironic truncates in the list
		}
		return out
	}
	out["event_type"], out["conductor"], out["user"] = nullIfEmpty(ev.EventType), nullIfEmpty(ev.Conductor), nullIfEmpty(ev.User)
	if minor(c) >= 113 {
		out["project"] = ev.Project
	}
	if minor(c) >= 115 {
		out["state"], out["target_provision_state"], out["duration_seconds"] = nullIfEmpty(ev.State), ev.TargetProvisionState, ev.DurationSeconds
	}
	return out
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
