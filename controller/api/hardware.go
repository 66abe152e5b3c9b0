package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// A node's hardware configuration as its BMC last reported it: BIOS
// settings (microversion 1.40; registry fields, ?detail and ?fields from
// 1.74) and firmware components (1.86). Read-only, as in Ironic: changes
// go through clean and service steps.

const (
	minorBIOS         = 40
	minorBIOSRegistry = 74
	minorFirmware     = 86
	minorFirmwareID   = 114
)

// firmwareFields are the fields of a firmware component a request may
// name (?fields), and firmwareIdentity those that appeared at 1.114.
var (
	firmwareFields   = []string{"component", "initial_version", "current_version", "last_version_flashed"}
	firmwareIdentity = []string{"vendor", "model", "serial_number"}
	firmwareKnown    = func() map[string]bool {
		m := map[string]bool{"created_at": true, "updated_at": true}
		for _, f := range slices.Concat(firmwareFields, firmwareIdentity) {
			m[f] = true
		}
		return m
	}()
)

// biosFieldNames are the fields ?fields may name on a BIOS list.
var biosFieldNames = func() map[string]bool {
	m := map[string]bool{"name": true, "value": true}
	for _, f := range proto.BIOSRegistryFields {
		m[f] = true
	}
	return m
}()

// mountHardware adds the /bios and /firmware routes of nodes.
func (s *Server) mountHardware(e *echo.Echo) {
	s.hardware, s.hardwareErr = store.NewNodeHardware(s.store)
	e.GET("/v1/nodes/:node/bios", s.listBIOS)
	e.GET("/v1/nodes/:node/bios/:name", s.getBIOS)
	e.GET("/v1/nodes/:node/firmware", s.listFirmware)
}

// biosView renders one setting with the given fields (name and value at
// least), the timestamps and links, as Ironic's object_to_dict does.
func biosView(c echo.Context, nodeIdent string, b proto.BIOSSetting, fields []string) map[string]any {
	doc, _ := toDoc(b)
	out := map[string]any{
		"created_at": doc["created_at"],
		"updated_at": doc["updated_at"],
		"links":      links(c, "nodes/"+nodeIdent+"/bios/"+b.Name),
	}
	for _, f := range fields {
		out[f] = doc[f]
	}
	return out
}

func (s *Server) listBIOS(c echo.Context) error {
	if minor(c) < minorBIOS {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	detail, err := parseBool(c, "detail")
	if err != nil {
		return err
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	fields := []string{"name", "value"}
	if c.QueryParam("fields") != "" || detail != nil {
		if minor(c) < minorBIOSRegistry {
			return notAcceptable()
		}
		if c.QueryParam("fields") != "" && detail != nil && *detail {
			return badRequest("Can not specify ?detail=True and fields in the same request.")
		}
	}
	if detail != nil && *detail {
		fields = append(fields, proto.BIOSRegistryFields...)
	}
	if c.QueryParam("fields") != "" {
		if fields, err = parseFields(c, biosFieldNames, nil); err != nil {
			return err
		}
	}
	if s.hardwareErr != nil {
		return &Error{Code: http.StatusServiceUnavailable, Msg: s.hardwareErr.Error()}
	}
	settings, err := s.hardware.ListBIOS(c.Request().Context(), n.UUID)
	if err != nil {
		return s.storeError(err, "Node", c.Param("node"))
	}
	out := make([]map[string]any, 0, len(settings))
	for _, b := range settings {
		out = append(out, biosView(c, c.Param("node"), b, fields))
	}
	return c.JSON(http.StatusOK, map[string]any{"bios": out})
}

func (s *Server) getBIOS(c echo.Context) error {
	if minor(c) < minorBIOS {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	if s.hardwareErr != nil {
		return &Error{Code: http.StatusServiceUnavailable, Msg: s.hardwareErr.Error()}
	}
	name := c.Param("name")
	b, err := s.hardware.GetBIOS(c.Request().Context(), n.UUID, name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("Node %s doesn't have a BIOS setting '%s'", n.UUID, name)
	}
	if err != nil {
		return err
	}
	fields := []string{"name", "value"}
	if minor(c) >= minorBIOSRegistry {
		fields = slices.Concat(fields, proto.BIOSRegistryFields)
	}
	return c.JSON(http.StatusOK, map[string]any{name: biosView(c, n.UUID, *b, fields)})
}

func (s *Server) listFirmware(c echo.Context) error {
	if minor(c) < minorFirmware {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	n, err := s.getNodeOr404(c)
	if err != nil {
		return err
	}
	fields, err := firmwareReturnFields(c)
	if err != nil {
		return err
	}
	if s.hardwareErr != nil {
		return &Error{Code: http.StatusServiceUnavailable, Msg: s.hardwareErr.Error()}
	}
	comps, err := s.hardware.ListFirmware(c.Request().Context(), n.UUID)
	if err != nil {
		return s.storeError(err, "Node", c.Param("node"))
	}
	out := make([]map[string]any, 0, len(comps))
	for _, fc := range comps {
		doc, err := toDoc(fc)
		if err != nil {
			return err
		}
		v := map[string]any{"created_at": doc["created_at"], "updated_at": doc["updated_at"]}
		for _, f := range fields {
			v[f] = doc[f]
		}
		out = append(out, v)
	}
	return c.JSON(http.StatusOK, map[string]any{"firmware": out})
}

// firmwareReturnFields is what a firmware list shows besides the
// timestamps: ?fields, or every field of the request's version (vendor,
// model and serial_number from 1.114; naming them below it is 400, as in
// Ironic). ?detail=true shows every field too; Ironic's answer to it holds
// only the timestamps, which no client can want.
func firmwareReturnFields(c echo.Context) ([]string, error) {
	detail, err := parseBool(c, "detail")
	if err != nil {
		return nil, err
	}
	all := firmwareFields
	if minor(c) >= minorFirmwareID {
		all = slices.Concat(firmwareFields, firmwareIdentity)
	}
	if c.QueryParam("fields") == "" {
		return all, nil
	}
	if detail != nil && *detail {
		return nil, badRequest("Can not specify ?detail=True and fields in the same request.")
	}
	fields, err := parseFields(c, firmwareKnown, nil)
	if err != nil {
		return nil, err
	}
	if minor(c) < minorFirmwareID {
		var early []string
		for _, f := range fields {
			if slices.Contains(firmwareIdentity, f) {
				early = append(early, f)
			}
		}
		if len(early) > 0 {
			slices.Sort(early)
			return nil, badRequest("Fields %s are not allowed in this API version. They require at least API version 1.%d.", strings.Join(slices.Compact(early), ", "), minorFirmwareID)
		}
	}
	return fields, nil
}
