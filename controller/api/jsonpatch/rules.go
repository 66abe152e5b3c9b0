package jsonpatch

import (
	"fmt"
	"slices"
	"strings"
)

// Rules are the Ironic-specific limits on a patch of one kind of resource.
type Rules struct {
	// Allowed lists the root fields that may be patched, in the order
	// Ironic prints them in its error ("Only the following can be updated:
	// …"). Nil allows every root field not in ReadOnly.
	Allowed []string
	// ReadOnly lists root fields that are never patched (uuid,
	// driver_internal_info, provision_state, …), whatever Allowed says.
	ReadOnly []string
	// Ops limits the operations; nil allows all six of RFC 6902. Ironic's
	// node API accepts add, replace and remove.
	Ops []string
	// Defaults is the value a root field gets back when a patch removes it
	// (Ironic never drops a field: it resets it). Fields not listed become
	// null.
	Defaults map[string]any
}

// Validate checks ops against r for a resource whose current document is doc,
// without applying them. Every operation must name an allowed operation, a
// path below a root field (not the whole document), a root field that may be
// patched, and, when it adds a field at the root (add, or the destination of
// move and copy), a field the document already has: Ironic refuses to grow
// the root. The source of move and copy must be patchable too, so a patch
// cannot move a read-only field away or copy a hidden one into sight.
func Validate(doc map[string]any, ops []Op, r Rules) error {
	for i, op := range ops {
		if r.Ops != nil && !slices.Contains(r.Ops, op.Op) {
			return ruleErr(i, op, fmt.Sprintf("Operation %q is not supported: use one of %s", op.Op, strings.Join(r.Ops, ", ")))
		}
		path, err := parsePointer(op.Path)
		if err != nil {
			return ruleErr(i, op, fmt.Sprintf("Invalid patch path %q: %v", op.Path, err))
		}
		if err := r.checkRoot(i, op, op.Path, path); err != nil {
			return err
		}
		if op.Op == OpMove || op.Op == OpCopy {
			from, err := parsePointer(op.From)
			if err != nil {
				return ruleErr(i, op, fmt.Sprintf("Invalid patch from %q: %v", op.From, err))
			}
			if err := r.checkRoot(i, op, op.From, from); err != nil {
				return err
			}
		}
		switch op.Op {
		case OpAdd, OpMove, OpCopy:
			if _, ok := doc[path[0]]; len(path) == 1 && !ok {
				return ruleErr(i, op, fmt.Sprintf("Adding a new attribute (%s) to the root of the resource is not allowed", op.Path))
			}
		}
	}
	return nil
}

// checkRoot refuses pointers to the whole document and to root fields that
// may not be patched.
func (r Rules) checkRoot(i int, op Op, raw string, path []string) error {
	if len(path) == 0 {
		return ruleErr(i, op, fmt.Sprintf("Invalid patch path %q: the whole resource cannot be patched", raw))
	}
	root := path[0]
	if slices.Contains(r.ReadOnly, root) {
		return ruleErr(i, op, fmt.Sprintf("Cannot patch %s: '/%s' is read-only", raw, root))
	}
	if r.Allowed != nil && !slices.Contains(r.Allowed, root) {
		return ruleErr(i, op, fmt.Sprintf("Cannot patch %s. Only the following can be updated: %s", raw, strings.Join(r.Allowed, ", ")))
	}
	return nil
}

func ruleErr(i int, op Op, msg string) *Error {
	return &Error{Index: i, Op: op.Op, Path: op.Path, msg: msg}
}

// ApplyRules is Validate, then Apply, then Ironic's reset of removed root
// fields: a root field of doc that the patch removed comes back as its
// default from r.Defaults (deep-copied), or null. doc is never modified.
func ApplyRules(doc map[string]any, ops []Op, r Rules) (map[string]any, error) {
	if err := Validate(doc, ops, r); err != nil {
		return nil, err
	}
	out, err := Apply(doc, ops)
	if err != nil {
		return nil, err
	}
	for k := range doc {
		if _, ok := out[k]; !ok {
			out[k] = deepCopy(r.Defaults[k])
		}
	}
	return out, nil
}

// RootFields returns the root fields ops touch (path, and from of move),
// each once, in order of first appearance: the caller checks per-field
// microversions and permissions with it (a field newer than the request is
// 406 in PATCH).
func RootFields(ops []Op) []string {
	var out []string
	addRoot := func(p string) {
		toks, err := parsePointer(p)
		if err != nil || len(toks) == 0 || slices.Contains(out, toks[0]) {
			return
		}
		out = append(out, toks[0])
	}
	for _, op := range ops {
		addRoot(op.Path)
		if op.Op == OpMove {
			addRoot(op.From)
		}
	}
	return out
}
