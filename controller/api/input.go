package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Ironic's limits on the free-text fields of nodes and ports: the API
// schema's maxLength where it has one (resource_class, description), else the
// width of the database column (String(255), String(64)) or, for Text
// columns, MySQL's TEXT size. Lengths count characters, as Python's len does.
const (
	maxNameLen            = 255 // node and port names (a hostname)
	maxResourceClassLen   = 80
	maxConductorGroupLen  = 255
	maxDescriptionLen     = 4096
	maxOwnerLen           = 255 // owner, lessee
	maxShardLen           = 255
	maxReasonLen          = 65535 // retired_reason, protected_reason, maintenance_reason: TEXT
	maxPhysicalNetworkLen = 64
	// maxPowerTimeout is the longest power-request timeout the drivers honour
	// (driver.Seconds treats anything longer as unset); a longer one is refused
	// rather than silently replaced by the default.
	maxPowerTimeout = 3600
)

// conductorGroupRE is Ironic's conductor group charset.
var conductorGroupRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]*$`)

// checkLen refuses a value longer than max characters, with the schema
// error Ironic's jsonschema check gives.
func checkLen(what, field string, v *string, max int) error {
	if v == nil {
		return nil
	}
	if n := utf8.RuneCountInString(*v); n > max {
		return badRequest("Schema error for %s: '%s' is too long (%d characters, at most %d)", what, field, n, max)
	}
	return nil
}

// validateNodeStrings enforces Ironic's lengths and charsets on a node's
// client-settable text fields.
func validateNodeStrings(n *proto.Node) error {
	cg := n.ConductorGroup
	for _, f := range []struct {
		name string
		v    *string
		max  int
	}{
		{"name", n.Name, maxNameLen},
		{"resource_class", n.ResourceClass, maxResourceClassLen},
		{"conductor_group", &cg, maxConductorGroupLen},
		{"description", n.Description, maxDescriptionLen},
		{"owner", n.Owner, maxOwnerLen},
		{"lessee", n.Lessee, maxOwnerLen},
		{"shard", n.Shard, maxShardLen},
		{"retired_reason", n.RetiredReason, maxReasonLen},
		{"protected_reason", n.ProtectedReason, maxReasonLen},
		{"maintenance_reason", n.MaintenanceReason, maxReasonLen},
		{"instance_name", n.InstanceName, maxInstanceNameLen},
	} {
		if err := checkLen("node", f.name, f.v, f.max); err != nil {
			return err
		}
	}
	if !conductorGroupRE.MatchString(cg) {
		return badRequest("Invalid conductor group %s. Conductor group should contain only letters, numbers, dashes, underscores and dots.", cg)
	}
	if n.Shard != nil && *n.Shard == "" {
		return badRequest("Schema error for node: 'shard' must not be an empty string")
	}
	if n.InstanceName != nil && *n.InstanceName == "" {
		return badRequest("Schema error for node: 'instance_name' should be non-empty")
	}
	return nil
}

// validatePortStrings enforces Ironic's lengths on a port's text fields.
func validatePortStrings(p *proto.Port) error {
	if err := checkLen("port", "name", p.Name, maxNameLen); err != nil {
		return err
	}
	if err := validatePortTexts(p); err != nil {
		return err
	}
	return checkLen("port", "physical_network", p.PhysicalNetwork, maxPhysicalNetworkLen)
}

// resolveParentNode checks that parent_node names an existing node other than
// n itself and stores it as that node's UUID, as Ironic does.
func (s *Server) resolveParentNode(ctx context.Context, n *proto.Node) error {
	if n.ParentNode == nil {
		return nil
	}
	if *n.ParentNode == "" {
		n.ParentNode = nil
		return nil
	}
	parent, err := s.store.GetNode(ctx, *n.ParentNode)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("Node %s could not be found.", *n.ParentNode)
	}
	if err != nil {
		return err
	}
	if parent.UUID == n.UUID {
		return badRequest("Node %s cannot be its own parent_node.", n.UUID)
	}
	n.ParentNode = &parent.UUID
	return nil
}

// portNodeUUID checks a port's node_uuid: it must be a UUID (a node name is
// refused, as Ironic's schema does) of an existing node.
func (s *Server) portNodeUUID(ctx context.Context, ident string) (string, error) {
	u, err := uuid.Parse(ident)
	if err != nil || len(ident) != 36 && len(ident) != 32 {
		return "", badRequest("Expected a UUID for node_uuid but received %s.", ident)
	}
	n, err := s.store.GetNode(ctx, u.String())
	if errors.Is(err, store.ErrNotFound) {
		return "", badRequest("Node %s could not be found.", ident)
	}
	if err != nil {
		return "", err
	}
	return n.UUID, nil
}

// mandatoryFields are the root fields a JSON patch may not remove.
var (
	nodeMandatory = []string{"driver"}
	portMandatory = []string{"address", "node_uuid"}
)

// checkMandatoryRemovals refuses a patch that removes a mandatory field.
func checkMandatoryRemovals(ops []jsonpatch.Op, mandatory []string) error {
	for _, op := range ops {
		if op.Op != "remove" && op.Op != "move" {
			continue
		}
		path := op.Path
		if op.Op == "move" {
			path = op.From
		}
		for _, m := range mandatory {
			if path == "/"+m {
				return badRequest("'/%s' is a mandatory attribute and can not be removed", m)
			}
		}
	}
	return nil
}

// portIdent resolves a port identifier from the URL to a UUID: a UUID as is,
// a name (from 1.88) through the store. Anything else — a MAC address, a
// malformed UUID — is a 400, as in Ironic, not a 404.
func (s *Server) portIdent(c echo.Context) (string, error) {
	ident := c.Param("port")
	if u, err := uuid.Parse(ident); err == nil && (len(ident) == 36 || len(ident) == 32) {
		return u.String(), nil
	}
	if minor(c) < proto.PortFieldMinVersion["name"] || !nameRE.MatchString(ident) || len(ident) > maxNameLen {
		return "", badRequest("Expected a UUID but received %s.", ident)
	}
	ports, err := s.store.ListPorts(c.Request().Context(), store.PortQuery{Name: ident, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(ports) == 0 {
		return "", notFound("Port %s could not be found.", ident)
	}
	return ports[0].UUID, nil
}

// checkUTF8 refuses text that is not valid UTF-8, and JSON \u escapes of
// unpaired surrogates: Go's decoder would silently store either as U+FFFD.
func checkUTF8(what string, b []byte) error {
	if !utf8.Valid(b) {
		return badRequest("Invalid %s: not valid UTF-8", what)
	}
	if i := loneSurrogate(b); i >= 0 {
		return badRequest("Invalid %s: \\u escape of an unpaired UTF-16 surrogate at byte %d", what, i)
	}
	return nil
}

// loneSurrogate returns the offset of the first \uD800–\uDFFF escape that is
// not a high surrogate followed by a low one, or -1.
func loneSurrogate(b []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range b[i+2 : i+6] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // skip the escaped character (\\, \", …)
			continue
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(i + 6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			return i
		case r >= 0xDC00 && r <= 0xDFFF:
			return i
		}
		i += 5
	}
	return -1
}

// checkRequestText refuses a URL whose path or query is not valid UTF-8 once
// percent-decoded.
func checkRequestText(c echo.Context) error {
	r := c.Request()
	if !utf8.ValidString(r.URL.Path) {
		return badRequest("Invalid request path: not valid UTF-8")
	}
	for k, vs := range r.URL.Query() {
		if !utf8.ValidString(k) {
			return badRequest("Invalid query parameter name: not valid UTF-8")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return badRequest("Invalid value for query parameter %s: not valid UTF-8", k)
			}
		}
	}
	if strings.ContainsRune(r.URL.RawQuery, 0) {
		return badRequest("Invalid query: NUL byte")
	}
	return nil
}

// errPortNameTaken is the 409 for a duplicate port name.
func errPortNameTaken(name *string) error {
	n := ""
	if name != nil {
		n = *name
	}
	return conflict("%s", fmt.Sprintf("A port with name %s already exists.", n))
}

// patchedName is the name a port patch sets, for the 409 message.
func patchedName(ops []jsonpatch.Op) *string {
	for _, op := range ops {
		if op.Path == "/name" {
			if s, ok := op.Value.(string); ok {
				return &s
			}
		}
	}
	return nil
}

// validFaults are Ironic's node faults, the values ?fault= may filter on.
var validFaults = []string{"power failure", "clean failure", "rescue abort failure", "service failure"}

func checkFault(f string) error {
	if f == "" || slices.Contains(validFaults, f) {
		return nil
	}
	return badRequest("Unknown fault: %s. Valid faults are: %s", f, strings.Join(validFaults, ", "))
}

// checkProtected applies Ironic's rules on protection to a patched node:
// protection may be turned on only in the active state (409), and
// protected_reason needs protection (400) and goes when protection goes.
func checkProtected(old, updated *proto.Node) error {
	if updated.Protected && !old.Protected && old.ProvisionState != proto.StateActive {
		return conflict("Node %s can not be protected in provision state \"%s\"; protected can only be set on an active node.", old.UUID, old.ProvisionState)
	}
	if !updated.Protected {
		if old.Protected || updated.ProtectedReason == nil {
			updated.ProtectedReason = nil
			return nil
		}
		return badRequest("Cannot set protected_reason without protected.")
	}
	return nil
}

const msgMissingBody = "Missing request body"

// isMissingBody reports whether err is readBody's answer to an empty body,
// which routes with an optional body accept.
func isMissingBody(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Msg == msgMissingBody
}

// checkNumbers refuses a JSON document holding a number no float64 can
// hold (1e999, a 400-digit integer): stored, it could never be read back.
func checkNumbers(doc []byte) error {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // the decoder that follows reports syntax errors
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return fmt.Errorf("number %.40s is out of range", n)
			}
		}
	}
}
