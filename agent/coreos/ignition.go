package coreos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/coreos/ignition/v2/config"
)

// IgnitionError is an Ignition config that CoreOS would refuse at first
// boot. Line and Column (1-based) locate JSON syntax errors; they are 0 when
// the problem is not tied to one place.
type IgnitionError struct {
	Line, Column int
	Msg          string
}

func (e *IgnitionError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("invalid Ignition config at line %d, column %d: %s", e.Line, e.Column, e.Msg)
	}
	return "invalid Ignition config: " + e.Msg
}

// specVersion is the spec versions CoreOS's Ignition (v2.x of the program)
// accepts: 3.0.0 to 3.5.0 and the next one's -experimental.
var specVersion = regexp.MustCompile(`^3\.[0-9]+\.[0-9]+(-experimental)?$`)

// topLevel is the 3.x spec's top-level keys and their JSON kinds.
var topLevel = map[string]string{
	"ignition": "object", "kernelArguments": "object", "passwd": "object",
	"storage": "object", "systemd": "object",
}

// ValidateIgnition checks an Ignition config before anything is written to
// disk, so that a mistake fails the deploy step instead of leaving a node
// stuck in emergency mode at first boot. Two stages:
//
//   - Kiln's own pre-checks, whose messages are the clearest for the common
//     mistakes: well-formed JSON (the error names the line and column), an
//     object whose ignition.version is a 3.x spec version, only the 3.x
//     top-level keys, absolute paths for files, directories and links,
//     names for users, groups and units.
//   - Ignition's own parser and validator (github.com/coreos/ignition/v2
//     config.Parse, the code CoreOS runs at first boot, v2.24.0: specs 3.0
//     to 3.6-experimental), which checks every field. Its errors come back
//     with their JSON path, line and column; its warnings (unused keys, …)
//     are returned for the step log.
//
// Only Ignition's config packages are imported (their module graph adds
// vcontext, go-semver, go-systemd, dataurl and aws-sdk-go-v2's core module
// for one ARN parser), never its providers.
func ValidateIgnition(b []byte) (warnings []string, err error) {
	if err := precheckIgnition(b); err != nil {
		return nil, err
	}
	_, rpt, perr := config.Parse(b)
	for _, e := range rpt.Entries {
		msg := e.Message
		if e.Context.Len() > 0 {
			msg = e.Context.String() + ": " + msg
		}
		if !e.Kind.IsFatal() {
			warnings = append(warnings, e.String())
			continue
		}
		if err == nil {
			ie := &IgnitionError{Msg: msg}
			if p := e.Marker.StartP; p != nil {
				ie.Line, ie.Column = int(p.Line), int(p.Column)
			}
			err = ie
		}
	}
	if err == nil && perr != nil {
		err = &IgnitionError{Msg: perr.Error()}
	}
	return warnings, err
}

func precheckIgnition(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return &IgnitionError{Msg: "empty config"}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return jsonError(b, err)
	}
	if _, err := dec.Token(); err == nil {
		line, col := position(b, int(dec.InputOffset()))
		return &IgnitionError{Line: line, Column: col, Msg: "data after the top-level object"}
	}
	top, ok := v.(map[string]any)
	if !ok {
		return &IgnitionError{Msg: fmt.Sprintf("the config must be a JSON object, not %s", kind(v))}
	}
	for k, val := range top {
		want, known := topLevel[k]
		if !known {
			return &IgnitionError{Msg: fmt.Sprintf("unknown top-level key %q (spec 3.x has ignition, kernelArguments, passwd, storage, systemd)", k)}
		}
		if kind(val) != want {
			return &IgnitionError{Msg: fmt.Sprintf("%s must be an %s, not %s", k, want, kind(val))}
		}
	}
	ign, ok := top["ignition"].(map[string]any)
	if !ok {
		return &IgnitionError{Msg: "missing the ignition section (ignition.version)"}
	}
	ver, ok := ign["version"].(string)
	if !ok {
		return &IgnitionError{Msg: "ignition.version must be a string such as \"3.4.0\""}
	}
	if !specVersion.MatchString(ver) {
		if strings.HasPrefix(ver, "2.") || strings.HasPrefix(ver, "1.") {
			return &IgnitionError{Msg: fmt.Sprintf("ignition.version %q is a spec 2.x/1.x config; CoreOS needs spec 3.x", ver)}
		}
		return &IgnitionError{Msg: fmt.Sprintf("ignition.version %q is not a 3.x spec version", ver)}
	}
	return checkShape(top)
}

// checkShape checks the parts of storage, passwd and systemd whose mistakes
// are the most common.
func checkShape(top map[string]any) error {
	if st, ok := top["storage"].(map[string]any); ok {
		for _, sec := range []string{"files", "directories", "links"} {
			items, err := list(st, "storage."+sec)
			if err != nil {
				return err
			}
			for i, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return &IgnitionError{Msg: fmt.Sprintf("storage.%s[%d] must be an object", sec, i)}
				}
				p, _ := m["path"].(string)
				if !strings.HasPrefix(p, "/") {
					return &IgnitionError{Msg: fmt.Sprintf("storage.%s[%d].path must be an absolute path, got %q", sec, i, p)}
				}
			}
		}
	}
	named := []struct{ section, key string }{{"passwd", "users"}, {"passwd", "groups"}, {"systemd", "units"}}
	for _, n := range named {
		sec, ok := top[n.section].(map[string]any)
		if !ok {
			continue
		}
		items, err := list(sec, n.section+"."+n.key)
		if err != nil {
			return err
		}
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return &IgnitionError{Msg: fmt.Sprintf("%s.%s[%d] must be an object", n.section, n.key, i)}
			}
			if name, _ := m["name"].(string); name == "" {
				return &IgnitionError{Msg: fmt.Sprintf("%s.%s[%d] has no name", n.section, n.key, i)}
			}
		}
	}
	return nil
}

func list(m map[string]any, path string) ([]any, error) {
	key := path[strings.LastIndexByte(path, '.')+1:]
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, &IgnitionError{Msg: fmt.Sprintf("%s must be a list, not %s", path, kind(v))}
	}
	return l, nil
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// jsonError turns a decoder error into an IgnitionError with a position.
func jsonError(b []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(b, int(se.Offset))
		return &IgnitionError{Line: line, Column: col, Msg: se.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		line, col := position(b, len(b))
		return &IgnitionError{Line: line, Column: col, Msg: "unexpected end of JSON input"}
	}
	return &IgnitionError{Msg: err.Error()}
}

// position converts a byte offset into a 1-based line and column. The
// decoder's offsets point just past the offending byte.
func position(b []byte, off int) (line, col int) {
	if off > len(b) {
		off = len(b)
	}
	if off > 0 {
		off-- // the offending byte itself
	}
	line = 1 + bytes.Count(b[:off], []byte("\n"))
	col = off - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}
