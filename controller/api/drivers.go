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
	hosts := s.driverHosts(c)
	out := []proto.Driver{}
	for _, name := range driver.Names() {
		out = append(out, s.renderDriver(c, name, hosts))
	}
	return c.JSON(http.StatusOK, map[string]any{"drivers": out})
}

func (s *Server) getDriver(c echo.Context) error {
	name := c.Param("driver")
	if _, ok := driver.Lookup(name); !ok {
		return notFound("Driver %s could not be found.", name)
	}
	hw, _ := driver.Lookup(name)
	doc, err := toDoc(s.renderDriver(c, name, s.driverHosts(c)))
	if err != nil {
		return err
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
	return c.JSON(http.StatusOK, doc)
}

func (s *Server) listConductors(c echo.Context) error {
	if minor(c) < 49 {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	conductors, err := s.store.ListConductors(c.Request().Context(), false)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(conductors))
	for _, cd := range conductors {
		out = append(out, map[string]any{
			"hostname": cd.Hostname, "conductor_group": cd.Group, "alive": cd.Alive,
			"links": links(c, "conductors/"+cd.Hostname),
		})
	}
	return c.JSON(http.StatusOK, map[string]any{"conductors": out})
}
