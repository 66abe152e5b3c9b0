package bmcsim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// versionInImage finds a version number in an image URI's file name
// ("bios-2.19.1.exe" → "2.19.1"), so a test chooses the version it installs.
var versionInImage = regexp.MustCompile(`\d+(\.\d+)+`)

// nextVersion is the version an image installs: the one in its file name, or
// the current one with its last component incremented.
func nextVersion(image, current string) string {
	name := image[strings.LastIndex(image, "/")+1:]
	if v := versionInImage.FindString(name); v != "" {
		return v
	}
	parts := strings.Split(current, ".")
	n, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		return current + ".1"
	}
	parts[len(parts)-1] = strconv.Itoa(n + 1)
	return strings.Join(parts, ".")
}

// firmwareComponent is one FirmwareInventory member.
type firmwareComponent struct {
	id  string
	sys *system // nil for the BMC itself
}

// firmwareComponents lists the BMC and each system's BIOS ("BIOS" when the
// service has one system, "BIOS-<system>" otherwise).
func (s *Service) firmwareComponents() []firmwareComponent {
	c := []firmwareComponent{{id: "BMC"}}
	for _, sys := range s.systems {
		id := "BIOS"
		if len(s.systems) > 1 {
			id = "BIOS-" + sys.id
		}
		c = append(c, firmwareComponent{id: id, sys: sys})
	}
	return c
}

const updatePath = root + "/UpdateService"

// routeUpdate serves UpdateService, SimpleUpdate and FirmwareInventory. An
// update is a task; when it completes the new version is staged and becomes
// the component's Version at the next power-on of the system (BIOS) or the
// next manager reset (BMC).
func (s *Service) routeUpdate(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	s.syncAllBoots()
	s.advanceTasks()
	ipath := updatePath + "/FirmwareInventory"
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			m := odata(updatePath, "#UpdateService.v1_11_0.UpdateService")
			m["Id"] = "UpdateService"
			m["Name"] = "Update Service"
			m["ServiceEnabled"] = true
			m["Status"] = status()
			m["FirmwareInventory"] = link(ipath)
			m["Actions"] = map[string]any{"#UpdateService.SimpleUpdate": map[string]any{
				"target": updatePath + "/Actions/UpdateService.SimpleUpdate",
				"TransferProtocol@Redfish.AllowableValues": []string{"HTTP", "HTTPS"},
			}}
			writeResource(w, r, m)
			return nil
		})
	case len(seg) == 2 && seg[0] == "Actions" && seg[1] == "UpdateService.SimpleUpdate":
		return only(r, "POST", func() *apiError { return s.simpleUpdate(w, r, ipath) })
	case seg[0] == "FirmwareInventory" && len(seg) == 1:
		return only(r, "GET", func() *apiError {
			var ids []string
			for _, c := range s.firmwareComponents() {
				ids = append(ids, ipath+"/"+c.id)
			}
			writeResource(w, r, collection(ipath, "#SoftwareInventoryCollection.SoftwareInventoryCollection",
				"Firmware Inventory Collection", ids))
			return nil
		})
	case seg[0] == "FirmwareInventory" && len(seg) == 2:
		for _, c := range s.firmwareComponents() {
			if c.id == seg[1] {
				return only(r, "GET", func() *apiError {
					writeResource(w, r, s.firmwareResource(ipath, c))
					return nil
				})
			}
		}
	}
	return errNotFound(r.URL.Path)
}

func (s *Service) firmwareResource(ipath string, c firmwareComponent) map[string]any {
	m := odata(ipath+"/"+c.id, "#SoftwareInventory.v1_10_0.SoftwareInventory")
	m["Id"] = c.id
	m["Updateable"] = true
	m["Manufacturer"] = s.p.Vendor
	m["Status"] = status()
	if c.sys == nil {
		s.fwMu.Lock()
		m["Name"] = "BMC Firmware"
		m["Version"] = s.bmcVersion
		m["SoftwareId"] = "BMC"
		s.fwMu.Unlock()
		m["RelatedItem"] = []any{link(root + "/Managers/" + s.p.ManagerID)}
		return m
	}
	c.sys.hw.mu.Lock()
	m["Name"] = "System BIOS"
	m["Version"] = c.sys.hw.biosVersion
	m["SoftwareId"] = "BIOS"
	c.sys.hw.mu.Unlock()
	m["RelatedItem"] = []any{link(s.SystemPath(c.sys.id))}
	return m
}

// simpleUpdate starts a firmware update from ImageURI for Targets (default:
// every BIOS).
func (s *Service) simpleUpdate(w http.ResponseWriter, r *http.Request, ipath string) *apiError {
	const action = "UpdateService.SimpleUpdate"
	body, e := readBody(r)
	if e != nil {
		return e
	}
	image, ok, e := stringField(body, "ImageURI", "ImageURI")
	if e != nil {
		return e
	}
	if !ok {
		return errActionParamMissing(action, "ImageURI")
	}
	if !strings.HasPrefix(image, "http://") && !strings.HasPrefix(image, "https://") {
		return baseError(http.StatusBadRequest, "ActionParameterValueFormatError",
			"The value '"+image+"' for the parameter ImageURI in the action "+action+" is of a different format than the parameter can accept.",
			"Correct the value for the parameter in the request body and resubmit the request if the operation failed.",
			[]string{"#/ImageURI"}, image, "ImageURI", action)
	}
	if tp, ok, e := stringField(body, "TransferProtocol", "TransferProtocol"); e != nil {
		return e
	} else if ok && tp != "HTTP" && tp != "HTTPS" {
		return errActionParamNotSupported(action, "TransferProtocol", tp)
	}
	var targets []firmwareComponent
	if raw, ok := body["Targets"]; ok {
		var uris []string
		if err := json.Unmarshal(raw, &uris); err != nil {
			return errValueType("Targets", string(raw))
		}
	next:
		for _, u := range uris {
			for _, c := range s.firmwareComponents() {
				if u == ipath+"/"+c.id {
					targets = append(targets, c)
					continue next
				}
			}
			return errActionParamNotSupported(action, "Targets", u)
		}
	}
	if len(targets) == 0 {
		for _, c := range s.firmwareComponents() {
			if c.sys != nil {
				targets = append(targets, c)
			}
		}
	}
	for k := range body {
		if k != "ImageURI" && k != "TransferProtocol" && k != "Targets" && !strings.HasPrefix(k, "@") {
			return errPropertyUnknown(k)
		}
	}
	t := s.newTask("Firmware update from "+image, "FirmwareUpdate", func() {
		for _, c := range targets {
			if c.sys == nil {
				s.fwMu.Lock()
				s.bmcStaged = nextVersion(image, s.bmcVersion)
				s.fwMu.Unlock()
				continue
			}
			h := c.sys.hw
			h.mu.Lock()
			h.biosStaged = nextVersion(image, h.biosVersion)
			h.mu.Unlock()
		}
	})
	s.writeAccepted(w, t)
	return nil
}
