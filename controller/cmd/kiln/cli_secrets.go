package main

import (
	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// safeView is what the CLI prints of v: nodes and ports masked and history
// scrubbed here too, so that a controller that returned a secret (an older
// one, or a bug) still never gets it onto a terminal or into a script's log.
func safeView(v any) any {
	switch x := v.(type) {
	case *proto.Node:
		if x == nil {
			return v
		}
		m := secrets.Node(x)
		return &m
	case proto.Node:
		return secrets.Node(&x)
	case []proto.Node:
		out := make([]proto.Node, len(x))
		for i := range x {
			out[i] = secrets.Node(&x[i])
		}
		return out
	case *proto.Port:
		if x == nil {
			return v
		}
		m := secrets.Port(x)
		return &m
	case []proto.Port:
		out := make([]proto.Port, len(x))
		for i := range x {
			out[i] = secrets.Port(&x[i])
		}
		return out
	case []proto.HistoryEvent:
		out := make([]proto.HistoryEvent, len(x))
		for i, e := range x {
			e.Event = secrets.Scrub(e.Event)
			out[i] = e
		}
		return out
	case map[string]any, []any:
		return secrets.Mask(x)
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, m := range x {
			out[i] = secrets.MaskDict(m)
		}
		return out
	}
	return v
}
