package jsonpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ParseOps decodes a PATCH request body. The body must be a JSON array of
// objects; each needs a string "op" among the six of RFC 6902 and a string
// "path" that is a valid JSON pointer; move and copy need a string "from";
// add, replace and test need a "value" (null is a value). Members an
// operation does not use are ignored, as RFC 6902 §4 says, but "from" must
// still be a string if present. Numbers in values are json.Number, so they
// re-encode exactly as sent.
func ParseOps(body []byte) ([]Op, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("patch body is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("patch body has data after the JSON value")
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("patch body must be a JSON array of operations, not %s", kind(raw))
	}
	ops := make([]Op, 0, len(list))
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("patch operation %d must be a JSON object, not %s", i, kind(item))
		}
		op, err := parseOp(obj)
		if err != nil {
			return nil, fmt.Errorf("patch operation %d: %w", i, err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func parseOp(obj map[string]any) (Op, error) {
	var op Op
	var err error
	if op.Op, err = stringMember(obj, "op"); err != nil {
		return op, err
	}
	switch op.Op {
	case OpAdd, OpRemove, OpReplace, OpMove, OpCopy, OpTest:
	default:
		return op, fmt.Errorf("unknown op %q (want add, remove, replace, move, copy or test)", op.Op)
	}
	if op.Path, err = stringMember(obj, "path"); err != nil {
		return op, err
	}
	if _, err := parsePointer(op.Path); err != nil {
		return op, fmt.Errorf("path: %w", err)
	}
	if _, present := obj["from"]; present || op.Op == OpMove || op.Op == OpCopy {
		if op.From, err = stringMember(obj, "from"); err != nil {
			return op, err
		}
		if _, err := parsePointer(op.From); err != nil {
			return op, fmt.Errorf("from: %w", err)
		}
	}
	switch op.Op {
	case OpAdd, OpReplace, OpTest:
		v, ok := obj["value"]
		if !ok {
			return op, fmt.Errorf("op %q needs a \"value\"", op.Op)
		}
		op.Value = v
	}
	return op, nil
}

func stringMember(obj map[string]any, name string) (string, error) {
	v, ok := obj[name]
	if !ok {
		return "", fmt.Errorf("missing %q", name)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%q must be a string, not %s", name, kind(v))
	}
	return s, nil
}

// kind names a decoded JSON value's type for error messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
