package api

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kilnhq/kiln/proto"
)

// Virtual media (/v1/nodes/{id}/vmedia): attach and detach from 1.89, read
// from 1.93. Like boot-device requests they are BMC calls the node's
// conductor makes under the node's reservation (managementCall), and they
// answer once the BMC did it: Ironic answers 204 before its conductor
// acts and records a failure in the node's history; Kiln answers with it.
const (
	vmediaSince    = 89
	vmediaGetSince = 93
	// maxImageURL bounds image_url (Ironic has no limit).
	maxImageURL = 2048
)

// vmediaSchemes are the image URL schemes Ironic accepts
// (image_publisher.VMEDIA_SUPPORTED_URL_SCHEMES).
var vmediaSchemes = []string{"http", "https", "nfs", "cifs", "smb"}

func (s *Server) mountVirtualMedia(e *echo.Echo) {
	e.GET("/v1/nodes/:node/vmedia", s.getVirtualMedia)
	e.POST("/v1/nodes/:node/vmedia", s.attachVirtualMedia)
	e.DELETE("/v1/nodes/:node/vmedia", s.detachVirtualMedia)
}

// vmediaGate answers requests older than since as Ironic does: the route
// does not exist for them.
func vmediaGate(c echo.Context, since int) error {
	if minor(c) < since {
		return &Error{Code: http.StatusNotFound, bare: true}
	}
	return nil
}

func (s *Server) attachVirtualMedia(c echo.Context) error {
	if err := vmediaGate(c, vmediaSince); err != nil {
		return err
	}
	obj, err := readJSONObject(c, "vmedia")
	if err != nil {
		return err
	}
	if err := checkFields(c, "vmedia", obj, []string{"device_type", "image_url", "image_download_source"}, nil); err != nil {
		return err
	}
	for _, k := range []string{"device_type", "image_url"} {
		if _, ok := obj[k]; !ok {
			return badRequest("Schema error for vmedia: '%s' is a required property", k)
		}
	}
	var req proto.VirtualMediaAttach
	if err := decodeInto(obj, &req, "vmedia"); err != nil {
		return err
	}
	if !slices.Contains(proto.VirtualMediaDeviceTypes, req.DeviceType) {
		return badRequest("Schema error for vmedia: device_type: '%s' is not one of %s", req.DeviceType, quoteList(proto.VirtualMediaDeviceTypes))
	}
	switch req.ImageDownloadSource {
	case "", "http", "local":
	case "swift":
		return badRequest("image_download_source swift is not supported: Kiln has no Swift; use http")
	default:
		return badRequest("Schema error for vmedia: image_download_source: '%s' is not one of ['http', 'local', 'swift']", req.ImageDownloadSource)
	}
	if len(req.ImageURL) > maxImageURL {
		return badRequest("Schema error for vmedia: image_url is longer than %d characters", maxImageURL)
	}
	u, err := url.Parse(req.ImageURL)
	scheme := ""
	if err == nil {
		scheme = u.Scheme
	}
	if !slices.Contains(vmediaSchemes, scheme) || err != nil || u.Host == "" {
		return badRequest("Unsupported or missing URL scheme: %s", scheme)
	}
	res, err := s.managementCall(c, proto.ManagementRequest{Op: proto.OpAttachVirtualMedia, VirtualMedia: &req}, nil)
	if err != nil {
		return err
	}
	if err := managementError(res); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) detachVirtualMedia(c echo.Context) error {
	if err := vmediaGate(c, vmediaSince); err != nil {
		return err
	}
	var types []string
	if q := c.QueryParam("device_types"); q != "" {
		var invalid []string
		for _, t := range strings.Split(q, ",") {
			t = strings.TrimSpace(t)
			if !slices.Contains(proto.VirtualMediaDeviceTypes, t) {
				invalid = append(invalid, t)
				continue
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
		if len(invalid) > 0 {
			return badRequest("Invalid device type(s) %s (valid are %s)", strings.Join(invalid, ", "), strings.Join(proto.VirtualMediaDeviceTypes, ", "))
		}
	}
	res, err := s.managementCall(c, proto.ManagementRequest{Op: proto.OpDetachVirtualMedia, DeviceTypes: types}, nil)
	if err != nil {
		return err
	}
	if err := managementError(res); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) getVirtualMedia(c echo.Context) error {
	if err := vmediaGate(c, vmediaGetSince); err != nil {
		return err
	}
	res, err := s.managementCall(c, proto.ManagementRequest{Op: proto.OpGetVirtualMedia}, nil)
	if err != nil {
		return err
	}
	if err := managementError(res); err != nil {
		return err
	}
	media := res.VirtualMedia
	if media == nil {
		media = []proto.VirtualMedia{}
	}
	return c.JSON(http.StatusOK, media)
}
