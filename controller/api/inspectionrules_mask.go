package api

import (
	"slices"
	"strings"

	"github.com/kilnhq/kiln/controller/secrets"
	"github.com/kilnhq/kiln/proto"
)

// Rules often write BMC credentials (Ironic's own example sets
// driver_info/redfish_password). A sensitive rule hides its conditions and
// actions whole, as Ironic's does; in any other rule Kiln still masks, in
// answers, the values it writes to secret attributes and the values of
// secret keys, so that no secret leaves the API.

// maskRule is the rule as answers show it.
func maskRule(r *proto.InspectionRule) proto.InspectionRule {
	m := *r
	if m.Sensitive {
		m.Conditions, m.Actions = nil, nil
		return m
	}
	m.Conditions = slices.Clone(r.Conditions)
	for i := range m.Conditions {
		m.Conditions[i].Args = secrets.Mask(m.Conditions[i].Args)
		m.Conditions[i].Loop = secrets.Mask(m.Conditions[i].Loop)
	}
	m.Actions = slices.Clone(r.Actions)
	for i := range m.Actions {
		m.Actions[i].Args = maskWrite(m.Actions[i].Args)
		if l, ok := m.Actions[i].Loop.([]any); ok {
			out := make([]any, len(l))
			for j, item := range l {
				out[j] = maskWrite(item)
			}
			m.Actions[i].Loop = out
		}
	}
	return m
}

// maskWrite masks an action's arguments (or a loop item): secret keys, and
// the value written to a secret path or capability, given by name
// ({"path": …, "value": …}) or by position ([path, value]).
func maskWrite(args any) any {
	switch a := args.(type) {
	case map[string]any:
		m := secrets.MaskDict(a)
		_, hasValue := m["value"]
		if hasValue && (secretPath(m["path"]) || secretPath(m["name"])) {
			m = cloneMap(m)
			m["value"] = secrets.Masked
		}
		return m
	case []any:
		m, _ := secrets.Mask(a).([]any)
		if len(m) >= 2 && secretPath(m[0]) {
			m = slices.Clone(m)
			m[1] = secrets.Masked
		}
		return m
	}
	return args
}

// secretPath reports whether p is a path ("/driver_info/ipmi_password",
// "driver_info.ipmi_password") or name whose last part is a secret key.
func secretPath(p any) bool {
	s, ok := p.(string)
	if !ok {
		return false
	}
	s = strings.TrimRight(s, "/.")
	if i := strings.LastIndexAny(s, "/."); i >= 0 {
		s = s[i+1:]
	}
	return s != "" && secrets.IsSecretKey(s)
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// keepMaskedRule puts back, in a patched rule, the stored value wherever
// the patch left the masked one at the same place (a client that read the
// rule and wrote its actions back).
func keepMaskedRule(from, to *proto.InspectionRule) {
	for i := range to.Conditions {
		if i < len(from.Conditions) && to.Conditions[i].Op == from.Conditions[i].Op {
			to.Conditions[i].Args = restoreMasked(from.Conditions[i].Args, to.Conditions[i].Args)
			to.Conditions[i].Loop = restoreMasked(from.Conditions[i].Loop, to.Conditions[i].Loop)
		}
	}
	for i := range to.Actions {
		if i < len(from.Actions) && to.Actions[i].Op == from.Actions[i].Op {
			to.Actions[i].Args = restoreMasked(from.Actions[i].Args, to.Actions[i].Args)
			to.Actions[i].Loop = restoreMasked(from.Actions[i].Loop, to.Actions[i].Loop)
		}
	}
}

func restoreMasked(stored, updated any) any {
	switch u := updated.(type) {
	case string:
		if s, ok := stored.(string); ok && u == secrets.Masked {
			return s
		}
	case map[string]any:
		s, _ := stored.(map[string]any)
		out := make(map[string]any, len(u))
		for k, v := range u {
			out[k] = restoreMasked(s[k], v)
		}
		return out
	case []any:
		s, _ := stored.([]any)
		out := make([]any, len(u))
		for i, v := range u {
			var sv any
			if i < len(s) {
				sv = s[i]
			}
			out[i] = restoreMasked(sv, v)
		}
		return out
	}
	return updated
}
