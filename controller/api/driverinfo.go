package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/raid"
	"github.com/kilnhq/kiln/controller/store"
	"github.com/kilnhq/kiln/proto"
)

// Driver and conductor endpoints beyond the lists: a driver's properties
// (1.14), RAID logical disk properties (1.12) and vendor passthru, and one
// conductor (1.49).

// driverOr404 is the hardware type named in the URL, or Ironic's 404.
func driverOr404(c echo.Context) (driver.HardwareType, error) {
	name := c.Param("driver")
	hw, ok := driver.Lookup(name)
	if !ok {
		return hw, notFound("Driver %s could not be found.", name)
	}
	return hw, nil
}

// driverProperties is GET /v1/drivers/{name}/properties: the driver_info
// keys the hardware type reads, with their meaning.
func (s *Server) driverProperties(c echo.Context) error {
	hw, err := driverOr404(c)
	if err != nil {
		return err
	}
	props, _ := driver.Properties(hw.Name)
	return c.JSON(http.StatusOK, props)
}

// raidProperties is GET /v1/drivers/{name}/raid/logical_disk_properties
// (1.12): the keys a logical disk of target_raid_config may have; 404
// when the type's default RAID interface offers no RAID, as Ironic.
func (s *Server) raidProperties(c echo.Context) error {
	if minor(c) < 12 {
		return notAcceptable()
	}
	hw, err := driverOr404(c)
	if err != nil {
		return err
	}
	if d := hw.Default("raid"); d == "" || d == "no-raid" {
		e := unsupported(hw.Name, "raid")
		e.Code = http.StatusNotFound
		return e
	}
	return c.JSON(http.StatusOK, raid.LogicalDiskProperties)
}

// driverVendorMethods is GET /v1/drivers/{name}/vendor_passthru/methods:
// no driver-level vendor methods exist in Kiln.
func (s *Server) driverVendorMethods(c echo.Context) error {
	hw, err := driverOr404(c)
	if err != nil {
		return err
	}
	if d := hw.Default("vendor"); d == "" || d == "no-vendor" {
		return unsupported(hw.Name, "vendor")
	}
	return c.JSON(http.StatusOK, map[string]any{})
}

// driverVendorPassthru is <verb> /v1/drivers/{name}/vendor_passthru?method=X.
func (s *Server) driverVendorPassthru(c echo.Context) error {
	hw, err := driverOr404(c)
	if err != nil {
		return err
	}
	method := passthruMethod(c)
	if method == "" {
		return badRequest("Method not specified")
	}
	if d := hw.Default("vendor"); d == "" || d == "no-vendor" {
		return unsupported(hw.Name, "vendor")
	}
	return badRequest("No handler for method %s", truncate(method, 100))
}

// conductorView is one conductor as the API shows it: hostname, group,
// alive and links, and with detail its timestamps and hardware types.
func conductorView(c echo.Context, cd store.Conductor, detail bool) map[string]any {
	out := map[string]any{
		"hostname": cd.Hostname, "conductor_group": cd.Group, "alive": cd.Alive,
		"links": links(c, "conductors/"+cd.Hostname),
	}
	if detail {
		// Every conductor serves every registered hardware type.
		drivers := slices.Clone(cd.Drivers)
		if len(drivers) == 0 {
			drivers = driver.Names()
		}
		out["created_at"], out["updated_at"], out["drivers"] = isoTime(cd.CreatedAt), isoTime(cd.UpdatedAt), drivers
	}
	return out
}

// isoTime renders a time as Ironic does (null when unset).
func isoTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(proto.TimeLayout)
}

// getConductor is GET /v1/conductors/{hostname} (1.49), always in detail.
func (s *Server) getConductor(c echo.Context) error {
	if minor(c) < 49 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	conductors, err := s.store.ListConductors(c.Request().Context(), false)
	if err != nil {
		return err
	}
	for _, cd := range conductors {
		if cd.Hostname == c.Param("hostname") {
			return c.JSON(http.StatusOK, conductorView(c, cd, true))
		}
	}
	return notFound("Conductor %s could not be found.", c.Param("hostname"))
}

// driverListParams reads GET /v1/drivers's ?detail= and ?type= (1.30;
// type is dynamic or classic, and Kiln has no classic drivers).
func driverListParams(c echo.Context) (detail bool, kind string, err error) {
	d, err := parseBool(c, "detail")
	if err != nil {
		return false, "", err
	}
	kind = c.QueryParam("type")
	if (d != nil || kind != "") && minor(c) < 30 {
		return false, "", notAcceptable()
	}
	if kind != "" && kind != "dynamic" && kind != "classic" {
		return false, "", badRequest("Invalid value for type: %s (dynamic or classic)", truncate(kind, 50))
	}
	return d != nil && *d, kind, nil
}
