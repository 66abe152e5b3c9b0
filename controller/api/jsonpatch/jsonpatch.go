// Package jsonpatch applies RFC 6902 JSON patches to a node (or port…)
// rendered as a generic JSON document, for PATCH /v1/nodes/{id} and friends.
//
// It exists because Ironic's PATCH is JSON patch plus a few rules of its own,
// and both halves must be exact for clients that edit nested fields such as
// /driver_info/redfish_address or /properties/capabilities:
//
//   - Apply is plain RFC 6902 (add, remove, replace, move, copy, test) with
//     RFC 6901 pointers (~0 and ~1 escapes, array indices, "-" to append).
//   - Validate and ApplyRules add Ironic's rules: only some root fields may
//     be patched, a new root field cannot be added, and a removed root field
//     goes back to its default (null unless the caller says otherwise).
//
// Documents are the generic shapes encoding/json produces: map[string]any,
// []any, string, bool, nil and numbers. Numbers may be json.Number (what
// ParseOps produces, and what callers should decode with
// json.Decoder.UseNumber so that integers like memory_mb survive unchanged)
// or float64; the test operation compares them by numeric value.
//
// Apply never modifies its input: it works on a deep copy, so a patch that
// fails half-way changes nothing and the caller can report the error and keep
// the stored node.
package jsonpatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Op is one operation of a JSON patch.
type Op struct {
	Op   string `json:"op"`             // add, remove, replace, move, copy or test
	Path string `json:"path"`           // RFC 6901 pointer
	From string `json:"from,omitempty"` // source pointer of move and copy
	// Value is the value of add, replace and test; nil stands for JSON null.
	Value any `json:"value"`
}

// MarshalJSON encodes the op with exactly the members its operation uses, so
// that a move or copy from "" keeps its "from" and a remove has no "value".
func (o Op) MarshalJSON() ([]byte, error) {
	m := map[string]any{"op": o.Op, "path": o.Path}
	switch o.Op {
	case OpMove, OpCopy:
		m["from"] = o.From
	case OpAdd, OpReplace, OpTest:
		m["value"] = o.Value
	default:
		if o.From != "" {
			m["from"] = o.From
		}
		if o.Value != nil {
			m["value"] = o.Value
		}
	}
	return json.Marshal(m)
}

// Operation names.
const (
	OpAdd     = "add"
	OpRemove  = "remove"
	OpReplace = "replace"
	OpMove    = "move"
	OpCopy    = "copy"
	OpTest    = "test"
)

// Error is a patch that cannot be applied or is not allowed. Its message is
// meant for the faultstring of a 400 answer.
type Error struct {
	Index int    // position of the operation in the patch
	Op    string // the operation's op, as sent
	Path  string // the operation's path, as sent
	msg   string
}

func (e *Error) Error() string { return e.msg }

func opErr(i int, op Op, format string, args ...any) *Error {
	return &Error{Index: i, Op: op.Op, Path: op.Path,
		msg: fmt.Sprintf("Couldn't apply patch operation %d (%s %q): %s", i, op.Op, op.Path, fmt.Sprintf(format, args...))}
}

// Apply applies ops in order to a deep copy of doc and returns the copy. On
// error doc is untouched and nothing is returned. The result must still be an
// object: replacing the whole document ("" path) with a non-object fails.
func Apply(doc map[string]any, ops []Op) (map[string]any, error) {
	var root any = deepCopy(doc)
	for i, op := range ops {
		var err error
		root, err = applyOne(root, op)
		if err != nil {
			return nil, opErr(i, op, "%v", err)
		}
	}
	out, ok := root.(map[string]any)
	if !ok {
		// Unreachable: applyOne refuses a non-object root. Kept as a guard.
		return nil, errors.New("patch result is not an object")
	}
	return out, nil
}

func applyOne(root any, op Op) (any, error) {
	path, err := parsePointer(op.Path)
	if err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	var out any
	switch op.Op {
	case OpAdd:
		out, err = add(root, path, deepCopy(op.Value), "")
	case OpRemove:
		if len(path) == 0 {
			return nil, errors.New("cannot remove the whole document")
		}
		out, _, err = remove(root, path, "")
	case OpReplace:
		out, err = replace(root, path, deepCopy(op.Value), "")
	case OpMove:
		from, ferr := parsePointer(op.From)
		if ferr != nil {
			return nil, fmt.Errorf("from: %w", ferr)
		}
		if isPrefix(from, path) && len(from) < len(path) {
			return nil, fmt.Errorf("cannot move %q into its own child %q", op.From, op.Path)
		}
		var v any
		if v, err = get(root, from, ""); err != nil {
			return nil, err
		}
		if len(from) == len(path) && isPrefix(from, path) {
			return root, nil // moving a value onto itself changes nothing
		}
		if out, _, err = remove(root, from, ""); err != nil {
			return nil, err
		}
		out, err = add(out, path, v, "")
	case OpCopy:
		from, ferr := parsePointer(op.From)
		if ferr != nil {
			return nil, fmt.Errorf("from: %w", ferr)
		}
		var v any
		if v, err = get(root, from, ""); err != nil {
			return nil, err
		}
		out, err = add(root, path, deepCopy(v), "")
	case OpTest:
		var v any
		if v, err = get(root, path, ""); err != nil {
			return nil, err
		}
		if !equal(v, op.Value) {
			return nil, fmt.Errorf("test failed: value at %q differs", op.Path)
		}
		out = root
	default:
		return nil, fmt.Errorf("unknown operation %q", op.Op)
	}
	if err != nil {
		return nil, err
	}
	if _, ok := out.(map[string]any); !ok {
		return nil, errors.New("the document must remain a JSON object")
	}
	return out, nil
}

// parsePointer splits an RFC 6901 pointer into unescaped reference tokens.
// "" is the whole document.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("JSON pointer %q has a bad escape (only ~0 and ~1 are allowed)", p)
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		toks[i] = b.String()
	}
	return toks, nil
}

// escapeToken is the inverse of one step of parsePointer.
func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

func isPrefix(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// index parses an array index token: decimal digits without leading zeros,
// or "-" (one past the end) when dash is allowed. n is the array length and
// limit the largest index allowed (n for add, n-1 otherwise).
func index(tok string, n int, dash bool, at string) (int, error) {
	if tok == "-" {
		if dash {
			return n, nil
		}
		return 0, fmt.Errorf("%q: \"-\" only appends (add)", at)
	}
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("%q: bad array index %q", at, tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, fmt.Errorf("%q: bad array index %q", at, tok)
		}
	}
	i, err := strconv.Atoi(tok)
	limit := n - 1
	if dash {
		limit = n
	}
	if err != nil || i > limit {
		return 0, fmt.Errorf("%q: array index %s out of range (length %d)", at, tok, n)
	}
	return i, nil
}

// get returns the value at path below node; at is the pointer of node.
func get(node any, path []string, at string) (any, error) {
	for _, tok := range path {
		here := at + "/" + escapeToken(tok)
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[tok]
			if !ok {
				return nil, fmt.Errorf("no value at %q", here)
			}
			node = v
		case []any:
			i, err := index(tok, len(n), false, here)
			if err != nil {
				return nil, err
			}
			node = n[i]
		default:
			return nil, fmt.Errorf("no value at %q: %q is not an object or array", here, at)
		}
		at = here
	}
	return node, nil
}

// add adds v at path below node and returns the new node (arrays may be
// reallocated, so parents store what comes back).
func add(node any, path []string, v any, at string) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	tok := path[0]
	here := at + "/" + escapeToken(tok)
	switch n := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			n[tok] = v
			return n, nil
		}
		child, ok := n[tok]
		if !ok {
			return nil, fmt.Errorf("no value at %q", here)
		}
		c, err := add(child, path[1:], v, here)
		if err != nil {
			return nil, err
		}
		n[tok] = c
		return n, nil
	case []any:
		if len(path) == 1 {
			i, err := index(tok, len(n), true, here)
			if err != nil {
				return nil, err
			}
			n = append(n, nil)
			copy(n[i+1:], n[i:])
			n[i] = v
			return n, nil
		}
		i, err := index(tok, len(n), false, here)
		if err != nil {
			return nil, err
		}
		c, err := add(n[i], path[1:], v, here)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, fmt.Errorf("cannot add at %q: %q is not an object or array", here, at)
}

// remove deletes the value at path below node (which must exist) and returns
// the new node and the removed value.
func remove(node any, path []string, at string) (any, any, error) {
	tok := path[0]
	here := at + "/" + escapeToken(tok)
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		if !ok {
			return nil, nil, fmt.Errorf("no value at %q", here)
		}
		if len(path) == 1 {
			delete(n, tok)
			return n, child, nil
		}
		c, old, err := remove(child, path[1:], here)
		if err != nil {
			return nil, nil, err
		}
		n[tok] = c
		return n, old, nil
	case []any:
		i, err := index(tok, len(n), false, here)
		if err != nil {
			return nil, nil, err
		}
		if len(path) == 1 {
			old := n[i]
			return append(n[:i:i], n[i+1:]...), old, nil
		}
		c, old, err := remove(n[i], path[1:], here)
		if err != nil {
			return nil, nil, err
		}
		n[i] = c
		return n, old, nil
	}
	return nil, nil, fmt.Errorf("no value at %q: %q is not an object or array", here, at)
}

// replace sets the value at path below node, which must already exist.
func replace(node any, path []string, v any, at string) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	tok := path[0]
	here := at + "/" + escapeToken(tok)
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		if !ok {
			return nil, fmt.Errorf("no value at %q to replace", here)
		}
		c, err := replace(child, path[1:], v, here)
		if err != nil {
			return nil, err
		}
		n[tok] = c
		return n, nil
	case []any:
		i, err := index(tok, len(n), false, here)
		if err != nil {
			return nil, err
		}
		c, err := replace(n[i], path[1:], v, here)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, fmt.Errorf("no value at %q to replace: %q is not an object or array", here, at)
}

// deepCopy copies the containers of a generic JSON value; leaves (strings,
// numbers, bools, nil) are immutable and shared. Values of other types are
// shared as they are: Apply never looks inside them.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if t == nil {
			return t
		}
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		if t == nil {
			return t
		}
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	}
	return v
}

// equal is RFC 6902 §4.6 equality: same type, numbers by value, objects by
// members regardless of order, arrays element by element.
func equal(a, b any) bool {
	if ra, ok := number(a); ok {
		rb, ok := number(b)
		return ok && ra != nil && rb != nil && ra.Cmp(rb) == 0
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// number converts the numeric types a generic document can hold to an exact
// rational; ok is false for non-numbers, r is nil for NaN, Inf or a malformed
// json.Number.
func number(v any) (r *big.Rat, ok bool) {
	switch n := v.(type) {
	case json.Number:
		s := string(n)
		if e := strings.IndexAny(s, "eE"); e >= 0 {
			// big.Rat would expand 1e999999999 digit by digit: beyond any
			// float64 exponent compare as float64 instead (±Inf never equals).
			exp, err := strconv.Atoi(strings.TrimPrefix(s[e+1:], "+"))
			if err != nil || exp > 400 || exp < -400 {
				f, err := strconv.ParseFloat(s, 64)
				if err != nil && !errors.Is(err, strconv.ErrRange) {
					return nil, true
				}
				return ratFromFloat(f), true
			}
		}
		r, good := new(big.Rat).SetString(s)
		if !good {
			return nil, true
		}
		return r, true
	case float64:
		return ratFromFloat(n), true
	case float32:
		return ratFromFloat(float64(n)), true
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case int64:
		return new(big.Rat).SetInt64(n), true
	case int32:
		return new(big.Rat).SetInt64(int64(n)), true
	case uint64:
		return new(big.Rat).SetFrac(new(big.Int).SetUint64(n), big.NewInt(1)), true
	}
	return nil, false
}

// ratFromFloat is nil for NaN and ±Inf, which equal nothing.
func ratFromFloat(f float64) *big.Rat {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return new(big.Rat).SetFloat64(f)
}
