package jsonpatch

// Tokens splits an RFC 6901 pointer into its unescaped reference tokens
// ("" is the whole document: no tokens).
func Tokens(pointer string) ([]string, error) { return parsePointer(pointer) }

// Get returns the value pointer addresses in doc, without copying it.
func Get(doc map[string]any, pointer string) (any, error) {
	path, err := parsePointer(pointer)
	if err != nil {
		return nil, err
	}
	return get(doc, path, "")
}
