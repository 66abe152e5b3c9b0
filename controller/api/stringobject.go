package api

import "encoding/json"

// An agent's heartbeat body is a flat JSON object of a few short strings.
// stringObject reads that shape without encoding/json, whose decoding into
// a map and then of each value was a tenth of a heartbeat; any other body,
// valid or not, takes jsonObject, which decodes it or says what is wrong.

// stringObject splits body into its members when it is a JSON object
// whose every value is a plain string (see plainString), with any JSON
// whitespace between tokens; ok is false otherwise. For such a body the
// members are exactly what jsonObject gives: keys hold no escapes, a
// repeated key keeps its last value. body is valid UTF-8 (readBody).
func stringObject(body []byte) (obj map[string]json.RawMessage, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	obj = make(map[string]json.RawMessage, 4)
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return obj, skipSpace(body, i+1) == len(body)
	}
	for {
		key, end := plainStringAt(body, i)
		if end < 0 {
			return nil, false
		}
		i = skipSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return nil, false
		}
		i = skipSpace(body, i+1)
		val, end := plainStringAt(body, i)
		if end < 0 {
			return nil, false
		}
		obj[string(key[1:len(key)-1])] = val
		i = skipSpace(body, end)
		switch {
		case i >= len(body):
			return nil, false
		case body[i] == ',':
			i = skipSpace(body, i+1)
		case body[i] == '}':
			return obj, skipSpace(body, i+1) == len(body)
		default:
			return nil, false
		}
	}
}

// plainStringAt is the plain string starting at body[i], quotes included,
// and the index after it; end is -1 when there is none.
func plainStringAt(body []byte, i int) (s []byte, end int) {
	if i >= len(body) || body[i] != '"' {
		return nil, -1
	}
	for j := i + 1; j < len(body); j++ {
		switch c := body[j]; {
		case c == '"':
			return body[i : j+1], j + 1
		case c == '\\' || c < 0x20:
			return nil, -1
		}
	}
	return nil, -1
}

// plainString reports whether raw is a JSON string with no escape and no
// control character: its text is what lies between the quotes.
func plainString(raw []byte) bool {
	s, end := plainStringAt(raw, 0)
	return end == len(raw) && s != nil
}

// skipSpace is the index of the first byte at or after i that is not JSON
// whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
