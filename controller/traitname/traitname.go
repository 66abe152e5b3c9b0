// Package traitname says whether a string is a valid trait name, as
// Ironic's API checks names of traits, deploy templates and runbooks: a
// standard trait of os-traits or a custom one, CUSTOM_ followed by upper
// case letters, digits and underscores, at most 255 characters.
package traitname

import (
	_ "embed"
	"regexp"
	"strings"
	"sync"
)

// MaxLen is Ironic's limit on a trait's length.
const MaxLen = 255

// standard is os-traits' list (os_traits.get_traits(), os-traits commit
// d4ac0c1 of 2026-08-14), one name a line.
//
//go:embed standard.txt
var standard string

var custom = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

var standardSet = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	for _, name := range strings.Fields(standard) {
		set[name] = true
	}
	return set
})

// Valid reports whether name is a standard or custom trait.
func Valid(name string) bool {
	if name == "" || len(name) > MaxLen {
		return false
	}
	return custom.MatchString(name) || standardSet()[name]
}

// IsStandard reports whether name is one of os-traits' standard traits.
func IsStandard(name string) bool { return standardSet()[name] }
