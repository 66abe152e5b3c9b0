package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// readJSONObject reads the body as a JSON object, keyed by field. Malformed JSON
// is a 400 (Ironic answers 500 here, which makes clients retry a request that
// can never succeed).
func readJSONObject(c echo.Context, what string) (map[string]json.RawMessage, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	return jsonObject(body, what)
}

// jsonObject decodes body, a request body, as a JSON object.
func jsonObject(body []byte, what string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, badRequest("Invalid JSON in %s request body: %s", what, jsonErrorText(err))
	}
	if obj == nil {
		return nil, badRequest("Invalid %s request body: expected a JSON object", what)
	}
	return obj, nil
}

func readBody(c echo.Context) ([]byte, error) {
	// screenRequest bounds the body to the route's limit.
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, bodyReadError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest(msgMissingBody)
	}
	if err := checkUTF8("request body", body); err != nil {
		return nil, err
	}
	return body, nil
}

// jsonErrorText describes a decoding failure the way a person can act on it.
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case asErr(err, &se):
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	case asErr(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("field %q must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "a list"
	case "ptr":
		return "a value of the right type"
	}
	return "a number"
}

// checkFields refuses keys outside allowed (400, as Ironic's schema check does)
// and keys newer than the request's microversion (406).
func checkFields(c echo.Context, what string, obj map[string]json.RawMessage, allowed []string, minVersion map[string]int) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return badRequest("Schema error for %s: Additional properties are not allowed ('%s' was unexpected)", what, k)
		}
	}
	for _, k := range keys {
		if v, ok := minVersion[k]; ok && v > minor(c) {
			return notAcceptable()
		}
	}
	return nil
}

// decodeInto decodes obj into v, with clear type errors.
func decodeInto(obj map[string]json.RawMessage, v any, what string) error {
	obj, err := coerceBools(obj, v)
	if err != nil {
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return badRequest("Invalid %s: %v", what, err)
	}
	if err := checkNumbers(b); err != nil {
		return badRequest("Invalid %s: %v", what, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return badRequest("Invalid %s: %s", what, jsonErrorText(err))
	}
	return nil
}

// nameRE matches node names: RFC 3986 unreserved characters (Metal3 uses
// "namespace~name").
var nameRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

func validateName(name string) error {
	if len(name) > 255 || !nameRE.MatchString(name) {
		return badRequest("Expected a logical name but received %s.", name)
	}
	if _, err := uuid.Parse(name); err == nil {
		return badRequest("Expected a logical name but received a UUID: %s.", name)
	}
	return nil
}

// listParams are the paging and sorting parameters every collection takes.
type listParams struct {
	limit   int
	marker  string
	sortKey string
	sortDir string
}

// maxLimit caps page sizes, as Ironic's max_limit does.
const maxLimit = 1000

func parseListParams(c echo.Context, sortable map[string]bool) (listParams, error) {
	p := listParams{limit: maxLimit, marker: c.QueryParam("marker"), sortKey: c.QueryParam("sort_key"), sortDir: c.QueryParam("sort_dir")}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return p, badRequest("Expected an integer for limit: %s", s)
		}
		if n < 0 {
			return p, badRequest("Limit must be positive")
		}
		if n > 0 && n < maxLimit {
			p.limit = n
		}
	}
	switch strings.ToLower(p.sortDir) {
	case "", "asc":
		p.sortDir = "asc"
	case "desc":
		p.sortDir = "desc"
	default:
		return p, badRequest("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", p.sortDir)
	}
	// "id" (insertion order) is the default, and the key every "next" link
	// carries when the client named none, as Ironic's do.
	if p.sortKey == "" {
		p.sortKey = "id"
	} else if p.sortKey != "id" && !sortable[p.sortKey] {
		return p, badRequest("The sort_key value \"%s\" is an invalid field for sorting", p.sortKey)
	}
	return p, nil
}

// parseBool reads a boolean query parameter the way oslo does.
func parseBool(c echo.Context, name string) (*bool, error) {
	s := c.QueryParam(name)
	if s == "" {
		return nil, nil
	}
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on", "t", "y":
		v := true
		return &v, nil
	case "false", "0", "no", "off", "f", "n":
		v := false
		return &v, nil
	}
	return nil, badRequest("Invalid value for %s: %q is not a boolean", name, s)
}

// nextLink builds the "next" URL for a full page: the same query with the
// marker moved to the last item.
func nextLink(c echo.Context, path string, p listParams, count int, lastUUID string) string {
	if count == 0 || count < p.limit {
		return ""
	}
	q := c.QueryParams()
	q.Set("limit", strconv.Itoa(p.limit))
	q.Set("marker", lastUUID)
	q.Set("sort_key", p.sortKey)
	q.Set("sort_dir", p.sortDir)
	return baseURL(c) + path + "?" + q.Encode()
}

// sortKeys turns the store's list of sortable keys into a set, so that the API
// never accepts a key the store would refuse.
func sortKeys(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
