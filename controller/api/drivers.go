package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// driverHosts lists the live conductors; every conductor serves every
// registered hardware type.
func (s *Server) driverHosts(c echo.Context) []string {
	hosts := []string{}
	conductors, err := s.store.ListConductors(c.Request().Context(), true)
	if err != nil {
		s.log.Warn("list conductors", "err", err)
	}
	for _, cd := range conductors {
		hosts = append(hosts, cd.Hostname)
	}
	if len(hosts) == 0 && s.conductor != "" {
		hosts = append(hosts, s.conductor)
	}
	return hosts
}

func (s *Server) renderDriver(c echo.Context, name string, hosts []string) proto.Driver {
	d := proto.Driver{Name: name, Hosts: hosts, Type: "dynamic", Links: links(c, "drivers/"+name)}
	if minor(c) >= 14 {
		d.Properties = links(c, "drivers/"+name+"/properties")
	}
	return d
}

func (s *Server) listDrivers(c echo.Context) error {
	detail, kind, err := driverListParams(c)
	if err != nil {
		return err
	}
	fields, err := driverFields(c, detail)
	if err != nil {
		return err
	}
	hosts := s.driverHosts(c)
	out := []any{}
	if kind == "classic" {
		return c.JSON(http.StatusOK, map[string]any{"drivers": out}) // Kiln's are all dynamic
	}
	for _, name := range driver.Names() {
		if !detail && fields == nil {
			out = append(out, s.renderDriver(c, name, hosts))
			continue
		}
		var doc map[string]any
		if detail {
			doc, err = s.driverDetail(c, name, hosts)
		} else {
			doc, err = driverDoc(s.renderDriver(c, name, hosts))
		}
		if err != nil {
			return err
		}
		if err := selectDriverFields(doc, fields); err != nil {
			return err
		}
		out = append(out, doc)
	}
	return c.JSON(http.StatusOK, map[string]any{"drivers": out})
}

func (s *Server) getDriver(c echo.Context) error {
	name := c.Param("driver")
	fields, err := driverFields(c, false)
	if err != nil {
		return err
	}
	if _, ok := driver.Lookup(name); !ok {
		return notFound("Driver %s could not be found.", name)
	}
	doc, err := s.driverDetail(c, name, s.driverHosts(c))
	if err != nil {
		return err
	}
	if err := selectDriverFields(doc, fields); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, doc)
}

// driverDetail is a driver with its interfaces (from 1.30).
func (s *Server) driverDetail(c echo.Context, name string, hosts []string) (map[string]any, error) {
	hw, _ := driver.Lookup(name)
	doc, err := toDoc(s.renderDriver(c, name, hosts))
	if err != nil {
		return nil, err
	}
	if minor(c) >= 30 {
		for _, iface := range driver.Interfaces {
			if v, ok := proto.NodeFieldMinVersion[iface+"_interface"]; ok && v > minor(c) {
				continue
			}
			doc["default_"+iface+"_interface"] = hw.Default(iface)
			doc["enabled_"+iface+"_interfaces"] = hw.Supported[iface]
		}
	}
	return doc, nil
}

func (s *Server) listConductors(c echo.Context) error {
	if minor(c) < 49 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	conductors, err := s.store.ListConductors(c.Request().Context(), false)
	if err != nil {
		return err
	}
	detail, err := parseBool(c, "detail")
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(conductors))
	for _, cd := range conductors {
		out = append(out, conductorView(c, cd, detail != nil && *detail))
	}
	return c.JSON(http.StatusOK, map[string]any{"conductors": out})
}
