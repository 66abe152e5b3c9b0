// Package traits validates and combines node traits as Ironic does: a trait
// is one of os-traits' standard names or CUSTOM_ followed by upper-case
// letters, digits and underscores, at most 255 characters, and a node has at
// most 50. The standard names are generated from Debian's python3-os-traits
// (go generate; see gen_standard.py) and committed.
package traits

//go:generate /usr/bin/python3 gen_standard.py

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// MaxPerNode is Ironic's limit of traits on one node (placement's limit of
// traits per resource provider).
const MaxPerNode = 50

// MaxLen is the longest trait name.
const MaxLen = 255

var custom = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

// IsStandard reports whether t is one of os-traits' standard names.
func IsStandard(t string) bool {
	_, ok := slices.BinarySearch(standard, t)
	return ok
}

// Check says why t is not a valid trait, in the words of Ironic's schema
// validation (jsonschema's messages); nil when it is valid.
func Check(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%s is too short", pyRepr(t))
	case len(t) > MaxLen:
		return fmt.Errorf("%s is too long", pyRepr(t))
	case custom.MatchString(t), IsStandard(t):
		return nil
	}
	return fmt.Errorf("%s is not valid under any of the given schemas", pyRepr(t))
}

// pyRepr quotes s as Python's repr does for plain strings, since Ironic's
// messages show values that way.
func pyRepr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

// Normalize returns ts sorted without duplicates, never nil: how a node's
// traits are stored and shown.
func Normalize(ts []string) []string {
	out := slices.Clone(ts)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// HasAll reports whether have holds every trait of want.
func HasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
