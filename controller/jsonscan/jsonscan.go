// Package jsonscan splits a compact JSON object — as encoding/json writes
// one: no whitespace, keys without escapes — into its top-level members
// without decoding it, so that stored documents can be passed through or
// read a key at a time for a fraction of what decoding costs. Anything else
// is reported (ErrNotCompact) for the caller to decode instead.
package jsonscan

import (
	"bytes"
	"errors"
)

// ErrNotCompact: the document is not a compact JSON object as
// encoding/json writes one.
var ErrNotCompact = errors.New("not a compact JSON object")

// Members calls fn with each member of the JSON object doc, as
// encoding/json writes one (compact, keys without escapes). Values are
// skipped, not decoded: strings by their closing quote, objects and arrays
// by depth.
func Members(doc []byte, fn func(key, val []byte)) error {
	if len(doc) < 2 || doc[0] != '{' {
		return ErrNotCompact
	}
	if len(doc) == 2 && doc[1] == '}' {
		return nil
	}
	i := 1
	for {
		if i >= len(doc) || doc[i] != '"' {
			return ErrNotCompact
		}
		j := bytes.IndexByte(doc[i+1:], '"')
		if j < 0 {
			return ErrNotCompact
		}
		key := doc[i+1 : i+1+j]
		if bytes.IndexByte(key, '\\') >= 0 {
			return ErrNotCompact
		}
		i += j + 2
		if i >= len(doc) || doc[i] != ':' {
			return ErrNotCompact
		}
		i++
		end, err := skipValue(doc, i)
		if err != nil {
			return err
		}
		fn(key, doc[i:end])
		i = end
		switch {
		case i >= len(doc):
			return ErrNotCompact
		case doc[i] == ',':
			i++
		case doc[i] == '}' && i == len(doc)-1:
			return nil
		default:
			return ErrNotCompact
		}
	}
}

// skipValue returns the end of the compact JSON value at doc[i].
func skipValue(doc []byte, i int) (int, error) {
	if i >= len(doc) {
		return 0, ErrNotCompact
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				end, err := skipString(doc, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			case ' ', '\t', '\n', '\r':
				return 0, ErrNotCompact
			}
			i++
		}
		return 0, ErrNotCompact
	}
	// A number, true, false or null: up to the delimiter that follows.
	if c := doc[i]; c != '-' && (c < '0' || c > '9') && c != 't' && c != 'f' && c != 'n' {
		return 0, ErrNotCompact
	}
	j := i
	for j < len(doc) && doc[j] != ',' && doc[j] != '}' && doc[j] != ']' {
		if c := doc[j]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return 0, ErrNotCompact
		}
		j++
	}
	return j, nil
}

// skipString returns the end of the string whose opening quote is at
// doc[i]: after the first quote not escaped by an odd run of backslashes.
func skipString(doc []byte, i int) (int, error) {
	start := i + 1
	for k := start; ; {
		j := bytes.IndexByte(doc[k:], '"')
		if j < 0 {
			return 0, ErrNotCompact
		}
		q := k + j
		n := 0
		for m := q - 1; m >= start && doc[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		k = q + 1
	}
}

// Lined is a compact object with a newline before each member: still JSON,
// and split by Lines with one IndexByte per member, since compact values
// never hold a raw newline (encoding/json escapes it in strings).
//
// ToLined turns a compact object into its lined form.
func ToLined(compact []byte) ([]byte, error) {
	out := make([]byte, 0, len(compact)+64)
	out = append(out, '{')
	first := true
	err := Members(compact, func(key, val []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '\n', '"')
		out = append(out, key...)
		out = append(out, '"', ':')
		out = append(out, val...)
	})
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// ErrNotLined: the document is not an object ToLined wrote.
var ErrNotLined = errors.New("not a lined JSON object")

// Lines is Members for a lined object.
func Lines(doc []byte, fn func(key, val []byte)) error {
	if len(doc) < 2 || doc[0] != '{' {
		return ErrNotLined
	}
	if len(doc) == 2 && doc[1] == '}' {
		return nil
	}
	if doc[1] != '\n' {
		return ErrNotLined
	}
	i := 2
	for {
		j := bytes.IndexByte(doc[i:], '\n')
		last := j < 0
		end := i + j // the member's end: its comma, or the closing brace
		if last {
			end = len(doc) - 1
			if doc[end] != '}' {
				return ErrNotLined
			}
		} else if end-1 < i || doc[end-1] != ',' {
			return ErrNotLined
		} else {
			end--
		}
		m := doc[i:end]
		if len(m) < 4 || m[0] != '"' {
			return ErrNotLined
		}
		k := bytes.IndexByte(m[1:], '"')
		if k < 0 || 2+k >= len(m) || m[2+k] != ':' || 3+k >= len(m) {
			return ErrNotLined
		}
		fn(m[1:1+k], m[3+k:])
		if last {
			return nil
		}
		i += j + 1
	}
}
