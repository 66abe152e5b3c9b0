// Package hints parses Ironic root device hints and picks the disk an image
// is written to. Hints arrive as the JSON object Ironic stores in
// instance_info.root_device (or properties.root_device) and Metal3's
// baremetal-operator fills in, e.g.
//
//	{"serial": "s== S3Z9NB0K", "model": "<in> samsung", "size": ">= 100", "rotational": false}
//
// The grammar and normalisation follow ironic-lib (oslo specs_matcher
// operators; strings lower-cased and URL-quoted on both sides; sizes in
// GiB), so a hint set selects the same disk under Kiln as under IPA. This
// package is pure: it matches disk.Device values and never touches hardware.
package hints

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
)

// Op is a specs_matcher operator.
type Op string

// The operators of oslo specs_matcher that root device hints may use.
const (
	OpNumEq   Op = "=="
	OpNumNe   Op = "!="
	OpNumGe   Op = ">="
	OpNumLe   Op = "<="
	OpAtLeast Op = "=" // numeric "at least", like >=
	OpStrEq   Op = "s=="
	OpStrNe   Op = "s!="
	OpStrLt   Op = "s<"
	OpStrLe   Op = "s<="
	OpStrGt   Op = "s>"
	OpStrGe   Op = "s>="
	OpIn      Op = "<in>"     // the hint value is a substring of the device's
	OpAllIn   Op = "<all-in>" // every value is a substring of the device's
	OpOr      Op = "<or>"     // the device's value equals one of the values
)

// operators in the order they must be tried when reading an expression:
// longer tokens before their prefixes.
var operators = []Op{OpAllIn, OpIn, OpOr, OpStrLe, OpStrGe, OpStrEq, OpStrNe, OpStrLt, OpStrGt, OpNumEq, OpNumNe, OpNumGe, OpNumLe, OpAtLeast}

var numericOps = []Op{OpNumEq, OpNumNe, OpNumGe, OpNumLe, OpAtLeast, OpOr}
var stringOps = []Op{OpStrEq, OpStrNe, OpStrLt, OpStrLe, OpStrGt, OpStrGe, OpIn, OpAllIn, OpOr}

type kind int

const (
	kindString kind = iota
	kindSize
	kindBool
)

// Keys lists every hint name Ironic accepts, with its type.
var keys = map[string]kind{
	"size": kindSize, "model": kindString, "vendor": kindString, "serial": kindString,
	"wwn": kindString, "wwn_with_extension": kindString, "wwn_vendor_extension": kindString,
	"name": kindString, "hctl": kindString, "by_path": kindString, "tran": kindString,
	"rotational": kindBool,
}

// Hint is one parsed hint: a key, an operator and normalised values
// (lower-cased and URL-quoted strings, or decimal GiB for size). For
// rotational, Op is empty and Bool holds the wanted value.
type Hint struct {
	Key    string
	Op     Op
	Values []string
	Bool   bool
}

// Hints is a parsed hint set, sorted by key; a device must match all.
// A nil or empty Hints means "no hints".
type Hints []Hint

// ParseHints validates and normalises a root_device object as decoded from
// JSON (string, float64, json.Number, int and bool values). Unknown keys,
// operators that do not fit the key's type, empty expressions and sizes
// that are not positive integers are errors naming the hint.
func ParseHints(m map[string]any) (Hints, error) {
	var hs Hints
	for key, raw := range m {
		k, ok := keys[key]
		if !ok {
			valid := make([]string, 0, len(keys))
			for v := range keys {
				valid = append(valid, v)
			}
			slices.Sort(valid)
			return nil, fmt.Errorf("parse root device hints: unknown hint %q (valid: %s)", key, strings.Join(valid, ", "))
		}
		var h Hint
		var err error
		switch k {
		case kindBool:
			h, err = parseBool(raw)
		case kindSize:
			h, err = parseSize(raw)
		default:
			h, err = parseString(key, raw)
		}
		if err != nil {
			return nil, fmt.Errorf("parse root device hint %q (%v): %w", key, raw, err)
		}
		h.Key = key
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b Hint) int { return strings.Compare(a.Key, b.Key) })
	return hs, nil
}

func parseBool(raw any) (Hint, error) {
	switch v := raw.(type) {
	case bool:
		return Hint{Bool: v}, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "t", "true", "on", "y", "yes":
			return Hint{Bool: true}, nil
		case "0", "f", "false", "off", "n", "no":
			return Hint{Bool: false}, nil
		}
	case float64, int, int64, json.Number:
		n, err := integer(v)
		if err == nil && (n == 0 || n == 1) {
			return Hint{Bool: n == 1}, nil
		}
	}
	return Hint{}, fmt.Errorf("not a boolean")
}

// integer converts the numeric JSON shapes to an int64, refusing fractions.
func integer(raw any) (int64, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case float64:
		if v != math.Trunc(v) || math.IsInf(v, 0) || math.IsNaN(v) || math.Abs(v) > 1<<53 {
			return 0, fmt.Errorf("%v is not an integer", v)
		}
		return int64(v), nil
	case json.Number:
		return strconv.ParseInt(v.String(), 10, 64)
	case string:
		return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	}
	return 0, fmt.Errorf("%T is not a number", raw)
}

func parseSize(raw any) (Hint, error) {
	expr, isString := raw.(string)
	if !isString {
		n, err := integer(raw)
		if err != nil {
			return Hint{}, err
		}
		expr = strconv.FormatInt(n, 10)
	}
	op, values, err := split(expr)
	if err != nil {
		return Hint{}, err
	}
	if op == "" {
		op = OpNumEq
	}
	if !slices.Contains(numericOps, op) {
		return Hint{}, fmt.Errorf("operator %s does not apply to size (use one of %s)", op, joinOps(numericOps))
	}
	for i, v := range values {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return Hint{}, fmt.Errorf("size %q is not a positive integer (GiB)", v)
		}
		values[i] = strconv.FormatInt(n, 10)
	}
	return Hint{Op: op, Values: values}, nil
}

func parseString(key string, raw any) (Hint, error) {
	var expr string
	switch v := raw.(type) {
	case string:
		expr = v
	case float64, int, int64, json.Number:
		// A serial or hctl may arrive as a bare JSON number.
		n, err := integer(v)
		if err != nil {
			return Hint{}, err
		}
		expr = strconv.FormatInt(n, 10)
	default:
		return Hint{}, fmt.Errorf("%T is not a string", raw)
	}
	op, values, err := split(strings.ToLower(expr))
	if err != nil {
		return Hint{}, err
	}
	if op == "" {
		op = OpStrEq
	}
	if !slices.Contains(stringOps, op) {
		return Hint{}, fmt.Errorf("operator %s does not apply to strings (use one of %s)", op, joinOps(stringOps))
	}
	for i, v := range values {
		if key == "name" && !strings.HasPrefix(v, "/dev/") && op != OpIn && op != OpAllIn {
			v = "/dev/" + v
		}
		values[i] = quote(v)
	}
	return Hint{Op: op, Values: values}, nil
}

// split reads "[op] value [op value…]" the way ironic-lib does: the
// operator, if any, leads, and the values are what lies between its
// repetitions. Only <or> and <all-in> take more than one value.
func split(expr string) (Op, []string, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return "", nil, fmt.Errorf("expression is empty")
	}
	var op Op
	for _, o := range operators {
		if strings.HasPrefix(expr, string(o)) {
			op = o
			break
		}
	}
	if op == "" {
		return "", []string{expr}, nil
	}
	var values []string
	for _, v := range strings.Split(expr, string(op)) {
		if v = strings.TrimSpace(v); v != "" {
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return "", nil, fmt.Errorf("operator %s without a value", op)
	}
	if len(values) > 1 && op != OpOr && op != OpAllIn {
		return "", nil, fmt.Errorf("operator %s takes one value, got %q", op, values)
	}
	return op, values, nil
}

func joinOps(ops []Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, " ")
}

// quote is Python's urllib.parse.quote with its default safe "/": what
// ironic-lib applies to both hint values and device values.
func quote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("_.-~/", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// String renders the hint back in Ironic's normalised form, e.g.
// "model: <in> samsung%20ssd".
func (h Hint) String() string {
	if h.Key == "rotational" {
		return fmt.Sprintf("rotational: %t", h.Bool)
	}
	if h.Op == OpOr || h.Op == OpAllIn {
		return fmt.Sprintf("%s: %s %s", h.Key, h.Op, strings.Join(h.Values, " "+string(h.Op)+" "))
	}
	return fmt.Sprintf("%s: %s %s", h.Key, h.Op, strings.Join(h.Values, " "))
}

// String renders the set as "{key: op value, …}".
func (hs Hints) String() string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	return "{" + strings.Join(s, ", ") + "}"
}

// Match reports whether d satisfies every hint.
func (hs Hints) Match(d disk.Device) bool {
	for _, h := range hs {
		if !h.Match(d) {
			return false
		}
	}
	return true
}

// Match reports whether d satisfies this hint. A device that lacks the
// hinted property (no serial, no by-path link) never matches it.
func (h Hint) Match(d disk.Device) bool {
	switch h.Key {
	case "rotational":
		return d.Rotational == h.Bool
	case "size":
		return matchSize(d.Size>>30, h)
	}
	v := deviceString(d, h.Key)
	if v == "" || len(h.Values) == 0 {
		return false
	}
	v = quote(strings.ToLower(v))
	want := h.Values[0]
	switch h.Op {
	case OpStrEq:
		return v == want
	case OpStrNe:
		return v != want
	case OpStrLt:
		return v < want
	case OpStrLe:
		return v <= want
	case OpStrGt:
		return v > want
	case OpStrGe:
		return v >= want
	case OpIn:
		return strings.Contains(v, want)
	case OpAllIn:
		for _, w := range h.Values {
			if !strings.Contains(v, w) {
				return false
			}
		}
		return true
	case OpOr:
		return slices.Contains(h.Values, v)
	}
	return false
}

func matchSize(gib int64, h Hint) bool {
	if len(h.Values) == 0 {
		return false
	}
	if h.Op == OpOr {
		return slices.Contains(h.Values, strconv.FormatInt(gib, 10))
	}
	want, _ := strconv.ParseInt(h.Values[0], 10, 64)
	switch h.Op {
	case OpNumEq:
		return gib == want
	case OpNumNe:
		return gib != want
	case OpNumGe, OpAtLeast:
		return gib >= want
	case OpNumLe:
		return gib <= want
	}
	return false
}

func deviceString(d disk.Device, key string) string {
	switch key {
	case "model":
		return d.Model
	case "vendor":
		return d.Vendor
	case "serial":
		return d.Serial
	case "wwn":
		return d.WWN
	case "wwn_with_extension":
		return d.WWNWithExtension
	case "wwn_vendor_extension":
		return d.WWNVendorExtension
	case "name":
		return d.Name
	case "hctl":
		return d.HCTL
	case "by_path":
		return d.ByPath
	case "tran":
		return d.Tran
	}
	return ""
}

// MinDefaultSize is the smallest disk chosen when there are no hints,
// as in IPA.
const MinDefaultSize = 4 << 30

// SelectRoot picks the disk to deploy to. Devices named in skip (Ironic's
// properties.skip_block_devices) are never chosen. With hints, the first
// device in name order that matches all of them wins; without, the
// smallest device of at least 4 GiB (ties broken by name). The error when
// nothing qualifies names the hints and every candidate with the reason it
// was passed over.
func SelectRoot(devices []disk.Device, hs Hints, skip []string) (disk.Device, error) {
	devs := slices.Clone(devices)
	slices.SortFunc(devs, func(a, b disk.Device) int { return strings.Compare(a.Name, b.Name) })
	var why []string
	var best *disk.Device
	for i := range devs {
		d := &devs[i]
		if slices.Contains(skip, d.Name) || slices.Contains(skip, strings.TrimPrefix(d.Name, "/dev/")) {
			why = append(why, fmt.Sprintf("%s: in skip_block_devices", d.Name))
			continue
		}
		if len(hs) > 0 {
			if failed := firstFailing(hs, *d); failed != nil {
				why = append(why, fmt.Sprintf("%s (%s): fails %s", d.Name, describe(*d, failed.Key), failed))
				continue
			}
			return *d, nil
		}
		if d.Size < MinDefaultSize {
			why = append(why, fmt.Sprintf("%s: %d bytes is smaller than 4 GiB", d.Name, d.Size))
			continue
		}
		if best == nil || d.Size < best.Size {
			best = d
		}
	}
	if best != nil {
		return *best, nil
	}
	if len(devs) == 0 {
		return disk.Device{}, fmt.Errorf("select root device with hints %s: no block devices found", hs)
	}
	return disk.Device{}, fmt.Errorf("select root device with hints %s: no device qualifies; candidates: %s", hs, strings.Join(why, "; "))
}

func firstFailing(hs Hints, d disk.Device) *Hint {
	for i := range hs {
		if !hs[i].Match(d) {
			return &hs[i]
		}
	}
	return nil
}

func describe(d disk.Device, key string) string {
	switch key {
	case "size":
		return fmt.Sprintf("size %d GiB", d.Size>>30)
	case "rotational":
		return fmt.Sprintf("rotational %t", d.Rotational)
	}
	v := deviceString(d, key)
	if v == "" {
		return key + " unknown"
	}
	return fmt.Sprintf("%s %q", key, v)
}
