// Package secrets decides which values are secret and hides them: every view
// of a node (API answers of any shape, history, events, logs, CLI output)
// goes through Mask, and every string that may carry a URL or an error
// message goes through Scrub before it is stored or logged.
//
// It is pure (no I/O) so that every layer can call it without dragging in
// dependencies, and so that its rules are table-tested in one place.
package secrets

import (
	"strings"
	"unicode"
)

// Masked is what a secret value is shown as, as Ironic does.
const Masked = "******"

// containsWords are matched anywhere in a lower-cased key: Ironic's
// sanitize list (oslo strutils) and a few more, so that "bmc_passwd",
// "ipmi_password", "snmp_community_read" and "agent_secret_token" are all
// secret.
var containsWords = []string{
	"password", "passwd", "passphrase", "pswd", "adminpass", "admin_pass", "new_pass",
	"secret", "token", "community", "configdrive",
}

// fusedKeys are names that end in "key" without a separator, as Ironic's
// list has them (sslkey, fernetkey, cephxkey).
var fusedKeys = []string{"sslkey", "fernetkey", "cephxkey", "privatekey", "apikey"}

// IsSecretKey reports whether a value stored under key k is secret.
//
// The rule, on the key lower-cased: it contains one of containsWords; or its
// last word is "key", words being split at any character that is not a
// letter or digit and at a lower-to-upper case change ("ssh_key",
// "private-key", "apiKey" are secret; "keyboard", "monkey_business",
// "key_id" are not); or it ends with one of fusedKeys.
func IsSecretKey(k string) bool {
	lk := strings.ToLower(k)
	for _, w := range containsWords {
		if strings.Contains(lk, w) {
			return true
		}
	}
	if endsInKeyWord(k) {
		return true
	}
	for _, f := range fusedKeys {
		if strings.HasSuffix(lk, f) {
			return true
		}
	}
	return false
}

// endsInKeyWord reports whether the last word of k is "key". Most keys end
// in a letter or digit other than "key" and are settled without allocating.
func endsInKeyWord(k string) bool {
	n := len(k)
	if n == 0 {
		return false
	}
	if c := k[n-1]; (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
		if n < 3 || !strings.EqualFold(k[n-3:], "key") {
			return false
		}
	}
	return lastWord(k) == "key"
}

// lastWord is the last word of k, lower-cased (see IsSecretKey).
func lastWord(k string) string {
	rs := []rune(k)
	end := len(rs)
	for end > 0 && !isWordRune(rs[end-1]) {
		end--
	}
	start := end
	for start > 0 && isWordRune(rs[start-1]) {
		if start < end && unicode.IsUpper(rs[start]) && unicode.IsLower(rs[start-1]) {
			break
		}
		start--
	}
	return strings.ToLower(string(rs[start:end]))
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// hides reports whether v, stored under a secret key, is replaced by Masked.
// Booleans are kept (a flag such as agent_secret_token_pregenerated reveals
// nothing), and so is null.
func hides(v any) bool {
	switch v.(type) {
	case nil, bool:
		return false
	}
	return true
}

// Mask returns v with the value of every secret key, at any depth of maps
// and lists, replaced by Masked. v is not changed: what holds a secret is
// copied, the rest shared.
func Mask(v any) any {
	out, _ := mask(v)
	return out
}

// MaskDict is Mask for a map, the shape of driver_info and friends.
func MaskDict(d map[string]any) map[string]any {
	if d == nil {
		return nil
	}
	return Mask(d).(map[string]any)
}

// mask returns v masked and whether anything changed.
func mask(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, e := range t {
			var m any
			changed := false
			if IsSecretKey(k) && hides(e) {
				if s, ok := e.(string); !ok || s != Masked {
					m, changed = Masked, true
				}
			} else {
				m, changed = mask(e)
			}
			if changed {
				if out == nil {
					out = make(map[string]any, len(t))
					for k2, e2 := range t {
						out[k2] = e2
					}
				}
				out[k] = m
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range t {
			if m, changed := mask(e); changed {
				if out == nil {
					out = append([]any(nil), t...)
				}
				out[i] = m
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}

// HoldsSecret reports whether v has a secret key with a hidden value at any
// depth: a JSON-patch copy, move or test of v would reveal it.
func HoldsSecret(v any) bool {
	_, changed := mask(v)
	return changed
}

// KeepMasked returns updated with every Masked value under a secret key put
// back to what stored holds at the same place, at any depth: a client that
// reads a node (secrets masked) and writes it back keeps the stored secrets.
// A Masked value with nothing stored at its place stays as written.
func KeepMasked(stored, updated any) any {
	switch u := updated.(type) {
	case map[string]any:
		s, _ := stored.(map[string]any)
		if s == nil {
			return updated
		}
		out := make(map[string]any, len(u))
		for k, e := range u {
			old, had := s[k]
			switch {
			case !had:
				out[k] = e
			case IsSecretKey(k) && e == Masked:
				out[k] = old
			default:
				out[k] = KeepMasked(old, e)
			}
		}
		return out
	case []any:
		s, _ := stored.([]any)
		if s == nil {
			return updated
		}
		out := make([]any, len(u))
		for i, e := range u {
			if i < len(s) {
				out[i] = KeepMasked(s[i], e)
			} else {
				out[i] = e
			}
		}
		return out
	}
	return updated
}
