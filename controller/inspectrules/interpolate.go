package inspectrules

import (
	"strconv"
	"strings"
)

// interpolate fills the replacement fields of every string in v (nested in
// lists and mappings too), as Ironic formats rule arguments with Python's
// str.format: "{node.driver}", "{inventory[bmc_address]}",
// "{plugin_data[auto_discovered]}", "{item[path]}". A string that is exactly
// one field takes the field's value itself (so numbers and booleans compare
// as such); otherwise values are rendered into the string. A field that
// does not resolve leaves the whole string as written, as in Ironic.
func interpolate(v any, vars map[string]any) any {
	switch t := v.(type) {
	case string:
		return format(t, vars)
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = interpolate(t[i], vars)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = interpolate(x, vars)
		}
		return out
	}
	return v
}

func format(s string, vars map[string]any) any {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	var b strings.Builder
	fields := 0
	var only any
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte('{')
			i += 2
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte('}')
			i += 2
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return s
			}
			val, ok := resolve(s[i+1:i+end], vars)
			if !ok {
				return s
			}
			fields++
			only = val
			b.WriteString(pyString(val))
			i += end + 1
		case c == '}':
			return s // a lone '}' is an error in Python's format
		default:
			b.WriteByte(c)
			i++
		}
	}
	if fields == 1 && strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") && strings.Count(s, "{") == 1 {
		return only
	}
	return b.String()
}

// resolve evaluates one field: a variable name, then attribute (".name",
// on the node only, which Ironic passes as an object) and index ("[key]",
// on dictionaries and lists) steps.
func resolve(field string, vars map[string]any) (any, bool) {
	// Conversions and format specs ("!r", ":>10") are not supported: the
	// values are rendered plainly.
	if i := strings.IndexAny(field, "!:"); i >= 0 {
		field = field[:i]
	}
	name := field
	if i := strings.IndexAny(field, ".["); i >= 0 {
		name = field[:i]
	}
	cur, ok := vars[name]
	if !ok {
		return nil, false
	}
	isObject := name == "node"
	rest := field[len(name):]
	for rest != "" {
		switch rest[0] {
		case '.':
			if !isObject {
				return nil, false
			}
			isObject = false
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			key := rest[1 : 1+end]
			m, isMap := cur.(map[string]any)
			if !isMap {
				return nil, false
			}
			if cur, ok = m[key]; !ok {
				return nil, false
			}
			rest = rest[1+end:]
		case '[':
			isObject = false
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, false
			}
			key := rest[1:end]
			rest = rest[end+1:]
			switch c := cur.(type) {
			case map[string]any:
				if cur, ok = c[key]; !ok {
					return nil, false
				}
			case []any:
				n, err := strconv.Atoi(key)
				if err != nil || n < 0 || n >= len(c) {
					return nil, false
				}
				cur = c[n]
			default:
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return cur, true
}
