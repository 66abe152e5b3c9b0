package bmcsim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

func (s *Service) routeSystems(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			var ids []string
			for _, sys := range s.systems {
				ids = append(ids, s.SystemPath(sys.id))
			}
			writeResource(w, r, collection(root+"/Systems", "#ComputerSystemCollection.ComputerSystemCollection",
				"Computer System Collection", ids))
			return nil
		})
	}
	sys := s.byID[seg[0]]
	if sys == nil {
		return errNotFound(r.URL.Path)
	}
	sys.requests.Add(1)
	s.syncBoots(sys)
	spath := s.SystemPath(sys.id)
	rest := seg[1:]
	switch {
	case len(rest) == 0:
		return only(r, "GET,PATCH", func() *apiError {
			if r.Method == http.MethodPatch {
				return s.patchSystem(w, r, sys)
			}
			m, e := s.systemResource(r, sys)
			if e != nil {
				return e
			}
			writeResource(w, r, m)
			return nil
		})
	case len(rest) == 2 && rest[0] == "Actions" && rest[1] == "ComputerSystem.Reset":
		return only(r, "POST", func() *apiError { return s.reset(w, r, sys) })
	case rest[0] == "Processors":
		return s.processors(w, r, sys, spath, rest[1:])
	case rest[0] == "EthernetInterfaces":
		return s.ethernet(w, r, sys, spath, rest[1:])
	case rest[0] == "SimpleStorage":
		return s.simpleStorage(w, r, sys, spath, rest[1:])
	case rest[0] == "VirtualMedia" && !s.p.VirtualMediaOnManager:
		return s.routeVirtualMedia(w, r, s.systemMedia(sys), spath+"/VirtualMedia", rest[1:])
	case rest[0] == "Memory":
		return s.memory(w, r, sys, spath, rest[1:])
	case rest[0] == "SecureBoot":
		return s.secureBoot(w, r, sys, spath, rest[1:])
	case rest[0] == "Bios":
		return s.routeBios(w, r, sys, spath, rest[1:])
	case rest[0] == "Storage":
		return s.routeStorage(w, r, sys, spath, rest[1:])
	}
	return errNotFound(r.URL.Path)
}

func (s *Service) systemResource(r *http.Request, sys *system) (map[string]any, *apiError) {
	ctx := r.Context()
	inv := sys.backend.Inventory()
	ps, err := sys.backend.PowerState(ctx)
	if err != nil {
		return nil, errGeneral(http.StatusInternalServerError)
	}
	boot, err := sys.backend.BootOverride(ctx)
	if err != nil {
		return nil, errGeneral(http.StatusInternalServerError)
	}
	spath := s.SystemPath(sys.id)
	m := odata(spath, "#ComputerSystem.v1_20_0.ComputerSystem")
	m["Id"] = sys.id
	m["Name"] = "System"
	m["SystemType"] = "Physical"
	m["Manufacturer"] = inv.Manufacturer
	m["Model"] = inv.Model
	m["SerialNumber"] = inv.SerialNumber
	m["UUID"] = inv.UUID
	sys.mu.Lock()
	m["AssetTag"] = sys.asset
	sys.mu.Unlock()
	sys.hw.mu.Lock()
	m["BiosVersion"] = sys.hw.biosVersion
	m["IndicatorLED"] = sys.hw.led
	m["LocationIndicatorActive"] = sys.hw.led != LEDOff
	sys.hw.mu.Unlock()
	m["IndicatorLED@Redfish.AllowableValues"] = []string{LEDLit, LEDBlinking, LEDOff}
	m["PowerState"] = ps
	m["Status"] = status()
	m["Boot"] = map[string]any{
		"BootSourceOverrideEnabled":                         boot.Enabled,
		"BootSourceOverrideTarget":                          boot.Target,
		"BootSourceOverrideMode":                            boot.Mode,
		"BootSourceOverrideEnabled@Redfish.AllowableValues": []string{OverrideDisabled, OverrideOnce, OverrideContinuous},
		"BootSourceOverrideTarget@Redfish.AllowableValues":  s.p.BootTargets,
		"BootSourceOverrideMode@Redfish.AllowableValues":    []string{ModeLegacy, ModeUEFI},
	}
	m["ProcessorSummary"] = map[string]any{"Count": inv.CPUCount, "Model": inv.CPUModel, "Status": status()}
	m["MemorySummary"] = map[string]any{"TotalSystemMemoryGiB": inv.MemoryGiB, "Status": status()}
	m["Processors"] = link(spath + "/Processors")
	m["EthernetInterfaces"] = link(spath + "/EthernetInterfaces")
	m["SimpleStorage"] = link(spath + "/SimpleStorage")
	m["Memory"] = link(spath + "/Memory")
	m["SecureBoot"] = link(spath + "/SecureBoot")
	m["Bios"] = link(spath + "/Bios")
	m["Storage"] = link(spath + "/Storage")
	if !s.p.VirtualMediaOnManager {
		m["VirtualMedia"] = link(spath + "/VirtualMedia")
	}
	m["Links"] = map[string]any{
		"Chassis":   []any{link(root + "/Chassis/" + sys.id)},
		"ManagedBy": []any{link(root + "/Managers/" + s.p.ManagerID)},
	}
	m["Actions"] = map[string]any{"#ComputerSystem.Reset": map[string]any{
		"target":                            spath + "/Actions/ComputerSystem.Reset",
		"ResetType@Redfish.AllowableValues": s.p.ResetTypes,
	}}
	if o := s.oem("System"); o != nil {
		m["Oem"] = o
	}
	return m, nil
}

// Properties of ComputerSystem (and of its Boot object) that exist in the
// schema but are read-only here; PATCHing them is PropertyNotWritable rather
// than PropertyUnknown.
var (
	systemReadOnly = []string{"Id", "Name", "SystemType", "Manufacturer", "Model", "SerialNumber", "UUID",
		"BiosVersion", "PowerState", "Status", "ProcessorSummary", "MemorySummary", "Processors",
		"EthernetInterfaces", "SimpleStorage", "VirtualMedia", "Links", "Actions", "Oem", "HostName",
		"PowerRestorePolicy", "Description", "Memory", "SecureBoot", "Bios", "Storage"}
	bootReadOnly = []string{"BootOrder", "BootNext", "UefiTargetBootSourceOverride", "AliasBootOrder",
		"HttpBootUri", "BootOptions", "Certificates", "AutomaticRetryConfig", "AutomaticRetryAttempts",
		"RemainingAutomaticRetryAttempts", "StopBootOnFault", "TrustedModuleRequiredToBoot", "BootOrderPropertySelection"}
)

func (s *Service) patchSystem(w http.ResponseWriter, r *http.Request, sys *system) *apiError {
	cur, e := s.systemResource(r, sys)
	if e != nil {
		return e
	}
	if e := checkIfMatch(r, cur); e != nil {
		return e
	}
	body, e := readBody(r)
	if e != nil {
		return e
	}
	var (
		asset    *string
		led      *string
		bootRaw  json.RawMessage
		haveBoot bool
	)
	for k, raw := range body {
		switch {
		case strings.Contains(k, "@"):
			// annotations (@odata.etag, ...) are ignored in requests
		case k == "AssetTag":
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				return errValueType("AssetTag", string(raw))
			}
			asset = &v
		case k == "Boot":
			bootRaw, haveBoot = raw, true
		case k == "IndicatorLED":
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				return errValueType(k, string(raw))
			}
			if v != LEDLit && v != LEDBlinking && v != LEDOff {
				return errValueNotInList(k, v)
			}
			led = &v
		case k == "LocationIndicatorActive":
			var v bool
			if err := json.Unmarshal(raw, &v); err != nil {
				return errValueType(k, string(raw))
			}
			if led == nil {
				st := LEDOff
				if v {
					st = LEDLit
				}
				led = &st
			}
		case contains(systemReadOnly, k):
			return errPropertyNotWritable(k)
		default:
			return errPropertyUnknown(k)
		}
	}
	if haveBoot {
		p, e := s.parseBootPatch(bootRaw)
		if e != nil {
			return e
		}
		if e := s.applyBootPatch(r, sys, p); e != nil {
			return e
		}
	}
	if asset != nil {
		sys.mu.Lock()
		sys.asset = *asset
		sys.mu.Unlock()
	}
	if led != nil {
		sys.hw.mu.Lock()
		sys.hw.led = *led
		sys.hw.mu.Unlock()
	}
	s.p.ok(w)
	return nil
}

// parseBootPatch validates the Boot object of a PATCH against the allowable values.
func (s *Service) parseBootPatch(raw json.RawMessage) (bootPatch, *apiError) {
	var p bootPatch
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return p, errValueType("Boot", string(raw))
	}
	for k, raw := range m {
		var v string
		var list []string
		var dst **string
		switch {
		case strings.Contains(k, "@"):
			continue
		case k == "BootSourceOverrideEnabled":
			dst, list = &p.Enabled, []string{OverrideDisabled, OverrideOnce, OverrideContinuous}
		case k == "BootSourceOverrideTarget":
			dst, list = &p.Target, s.p.BootTargets
		case k == "BootSourceOverrideMode":
			dst, list = &p.Mode, []string{ModeLegacy, ModeUEFI}
		case contains(bootReadOnly, k):
			return p, errPropertyNotWritable("Boot/" + k)
		default:
			return p, errPropertyUnknown("Boot/" + k)
		}
		if err := json.Unmarshal(raw, &v); err != nil || string(raw) == "null" {
			return p, errValueType("Boot/"+k, strings.Trim(string(raw), `"`))
		}
		if !contains(list, v) {
			return p, errValueNotInList("Boot/"+k, v)
		}
		*dst = &v
	}
	return p, nil
}

func (s *Service) applyBootPatch(r *http.Request, sys *system, p bootPatch) *apiError {
	ctx := r.Context()
	sys.mu.Lock() // serialise read-modify-write of the override
	defer sys.mu.Unlock()
	cur, err := sys.backend.BootOverride(ctx)
	if err != nil {
		return errGeneral(http.StatusInternalServerError)
	}
	for _, check := range s.p.checkBoot {
		if e := check(cur, p); e != nil {
			return e
		}
	}
	next := cur
	if p.Enabled != nil {
		next.Enabled = *p.Enabled
	}
	if p.Target != nil {
		next.Target = *p.Target
	}
	if p.Mode != nil {
		next.Mode = *p.Mode
	}
	if s.p.adjustBoot != nil {
		next = s.p.adjustBoot(next, p)
	}
	if err := sys.backend.SetBootOverride(ctx, next); err != nil {
		return errGeneral(http.StatusInternalServerError)
	}
	return nil
}

func (s *Service) reset(w http.ResponseWriter, r *http.Request, sys *system) *apiError {
	const action = "ComputerSystem.Reset"
	body, e := readBody(r)
	if e != nil {
		return e
	}
	v, ok, e := stringField(body, "ResetType", "ResetType")
	if e != nil {
		return e
	}
	if !ok {
		return errActionParamMissing(action, "ResetType")
	}
	if !contains(s.p.ResetTypes, ResetType(v)) {
		return errActionParamNotSupported(action, "ResetType", v)
	}
	if err := sys.backend.Reset(r.Context(), ResetType(v)); err != nil {
		if errors.Is(err, ErrPoweredOff) {
			return errNotPoweredOn()
		}
		s.log.Error("reset failed", "system", sys.id, "type", v, "err", err)
		return errGeneral(http.StatusInternalServerError)
	}
	s.p.ok(w)
	return nil
}

// --- inventory sub-resources ---

func (s *Service) processors(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	inv := sys.backend.Inventory()
	cpath := spath + "/Processors"
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(cpath, "#ProcessorCollection.ProcessorCollection", "Processors Collection",
				[]string{cpath + "/CPU1"}))
			return nil
		})
	case len(seg) == 1 && seg[0] == "CPU1":
		return only(r, "GET", func() *apiError {
			m := odata(cpath+"/CPU1", "#Processor.v1_18_0.Processor")
			m["Id"] = "CPU1"
			m["Name"] = "Processor"
			m["Socket"] = "CPU 1"
			m["ProcessorType"] = "CPU"
			m["ProcessorArchitecture"] = inv.CPUArch
			m["InstructionSet"] = instructionSet(inv.CPUArch)
			m["Model"] = inv.CPUModel
			m["TotalCores"] = inv.CPUCount
			m["TotalThreads"] = inv.CPUCount
			m["Status"] = status()
			writeResource(w, r, m)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

func instructionSet(arch string) string {
	switch arch {
	case "ARM":
		return "ARM-A64"
	case "x86":
		return "x86-64"
	}
	return "OEM"
}

func (s *Service) ethernet(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	inv := sys.backend.Inventory()
	cpath := spath + "/EthernetInterfaces"
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			var ids []string
			for i := range inv.NICs {
				ids = append(ids, cpath+"/NIC"+strconv.Itoa(i+1))
			}
			writeResource(w, r, collection(cpath, "#EthernetInterfaceCollection.EthernetInterfaceCollection",
				"Ethernet Interface Collection", ids))
			return nil
		})
	}
	n, err := strconv.Atoi(strings.TrimPrefix(seg[0], "NIC"))
	if len(seg) != 1 || !strings.HasPrefix(seg[0], "NIC") || err != nil || n < 1 || n > len(inv.NICs) {
		return errNotFound(r.URL.Path)
	}
	return only(r, "GET", func() *apiError {
		m := odata(cpath+"/"+seg[0], "#EthernetInterface.v1_12_0.EthernetInterface")
		m["Id"] = seg[0]
		m["Name"] = "Ethernet Interface"
		m["MACAddress"] = inv.NICs[n-1].MAC
		m["PermanentMACAddress"] = inv.NICs[n-1].MAC
		m["LinkStatus"] = "LinkUp"
		m["SpeedMbps"] = 10000
		m["Status"] = status()
		writeResource(w, r, m)
		return nil
	})
}

func (s *Service) simpleStorage(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	inv := sys.backend.Inventory()
	cpath := spath + "/SimpleStorage"
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(cpath, "#SimpleStorageCollection.SimpleStorageCollection",
				"Simple Storage Collection", []string{cpath + "/1"}))
			return nil
		})
	case len(seg) == 1 && seg[0] == "1":
		return only(r, "GET", func() *apiError {
			m := odata(cpath+"/1", "#SimpleStorage.v1_3_1.SimpleStorage")
			m["Id"] = "1"
			m["Name"] = "Storage Controller"
			var devs []any
			for _, d := range inv.Disks {
				devs = append(devs, map[string]any{"Name": d.Name, "CapacityBytes": d.SizeBytes, "Status": status()})
			}
			m["Devices"] = devs
			m["Status"] = status()
			writeResource(w, r, m)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

// --- virtual media ---

// mediaDevice is one virtual CD of a VirtualMedia collection and the system
// it is attached to.
type mediaDevice struct {
	id  string
	sys *system
}

// systemMedia is the virtual CD under Systems/<id>/VirtualMedia.
func (s *Service) systemMedia(sys *system) []mediaDevice {
	return []mediaDevice{{id: s.p.VirtualMediaID, sys: sys}}
}

// managerMedia lists the virtual CDs under the manager: the personality's
// device ID for a one-system BMC, one "<ID>-<system>" device per system when
// a generic service holds several.
func (s *Service) managerMedia() []mediaDevice {
	if len(s.systems) == 1 {
		return s.systemMedia(s.systems[0])
	}
	var d []mediaDevice
	for _, sys := range s.systems {
		d = append(d, mediaDevice{id: s.p.VirtualMediaID + "-" + sys.id, sys: sys})
	}
	return d
}

func (s *Service) routeVirtualMedia(w http.ResponseWriter, r *http.Request, devs []mediaDevice, cpath string, seg []string) *apiError {
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			var ids []string
			for _, d := range devs {
				ids = append(ids, cpath+"/"+d.id)
			}
			writeResource(w, r, collection(cpath, "#VirtualMediaCollection.VirtualMediaCollection",
				"Virtual Media Services", ids))
			return nil
		})
	}
	var sys *system
	for _, d := range devs {
		if d.id == seg[0] {
			sys = d.sys
		}
	}
	id := seg[0]
	vpath := cpath + "/" + id
	switch {
	case sys == nil:
		return errNotFound(r.URL.Path)
	case len(seg) == 1:
		return only(r, "GET", func() *apiError {
			med, err := sys.backend.Media(r.Context())
			if err != nil {
				return errGeneral(http.StatusInternalServerError)
			}
			m := odata(vpath, "#VirtualMedia.v1_6_0.VirtualMedia")
			m["Id"] = id
			m["Name"] = "Virtual CD"
			m["MediaTypes"] = []string{"CD", "DVD"}
			m["Inserted"] = med.Inserted
			m["WriteProtected"] = med.WriteProtected || !med.Inserted
			if med.Inserted {
				m["Image"] = med.Image
				m["ImageName"] = med.Image[strings.LastIndex(med.Image, "/")+1:]
				m["ConnectedVia"] = "URI"
			} else {
				m["Image"] = nil
				m["ImageName"] = nil
				m["ConnectedVia"] = "NotConnected"
			}
			m["TransferMethod"] = "Stream"
			m["Actions"] = map[string]any{
				"#VirtualMedia.InsertMedia": map[string]any{
					"target": vpath + "/Actions/VirtualMedia.InsertMedia",
					"TransferProtocolType@Redfish.AllowableValues": []string{"HTTP", "HTTPS"},
				},
				"#VirtualMedia.EjectMedia": map[string]any{"target": vpath + "/Actions/VirtualMedia.EjectMedia"},
			}
			if o := s.oem("VirtualMedia"); o != nil {
				m["Oem"] = o
			}
			writeResource(w, r, m)
			return nil
		})
	case len(seg) == 3 && seg[1] == "Actions" && seg[2] == "VirtualMedia.InsertMedia":
		return only(r, "POST", func() *apiError { return s.insertMedia(w, r, sys) })
	case len(seg) == 3 && seg[1] == "Actions" && seg[2] == "VirtualMedia.EjectMedia":
		return only(r, "POST", func() *apiError {
			if _, e := readBody(r); e != nil {
				return e
			}
			if err := sys.backend.EjectMedia(r.Context()); err != nil {
				if errors.Is(err, ErrMediaNotInserted) {
					return errResourceInUseNoMedia()
				}
				return errGeneral(http.StatusInternalServerError)
			}
			s.p.ok(w)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

func errResourceInUseNoMedia() *apiError {
	e := errResourceInUse()
	e.Text = "The virtual media device has no media inserted."
	e.Info[0].Message = e.Text
	return e
}

func (s *Service) insertMedia(w http.ResponseWriter, r *http.Request, sys *system) *apiError {
	const action = "VirtualMedia.InsertMedia"
	body, e := readBody(r)
	if e != nil {
		return e
	}
	image, ok, e := stringField(body, "Image", "Image")
	if e != nil {
		return e
	}
	if !ok {
		return errActionParamMissing(action, "Image")
	}
	for _, check := range s.p.checkInsert {
		if e := check(body); e != nil {
			return e
		}
	}
	if !strings.HasPrefix(image, "http://") && !strings.HasPrefix(image, "https://") {
		return baseError(http.StatusBadRequest, "ActionParameterValueFormatError",
			"The value '"+image+"' for the parameter Image in the action "+action+" is of a different format than the parameter can accept.",
			"Correct the value for the parameter in the request body and resubmit the request if the operation failed.",
			[]string{"#/Image"}, image, "Image", action)
	}
	if tp, ok, e := stringField(body, "TransferProtocolType", "TransferProtocolType"); e != nil {
		return e
	} else if ok && tp != "HTTP" && tp != "HTTPS" {
		return errActionParamNotSupported(action, "TransferProtocolType", tp)
	}
	wp := true
	if raw, ok := body["WriteProtected"]; ok {
		if err := json.Unmarshal(raw, &wp); err != nil {
			return errValueType("WriteProtected", string(raw))
		}
	}
	if raw, ok := body["Inserted"]; ok {
		var ins bool
		if err := json.Unmarshal(raw, &ins); err != nil {
			return errValueType("Inserted", string(raw))
		}
	}
	if err := sys.backend.InsertMedia(r.Context(), image, wp); err != nil {
		if errors.Is(err, ErrMediaInserted) {
			return errResourceInUse()
		}
		if errors.Is(err, ErrMediaUnreachable) {
			return baseError(http.StatusBadRequest, "CouldNotEstablishConnection",
				"The service failed to establish a connection with the URI '"+image+"'.",
				"Ensure that the URI contains a valid and reachable node name, protocol information and other URI components.",
				[]string{"#/Image"}, image)
		}
		s.log.Error("insert media failed", "system", sys.id, "err", err)
		return errGeneral(http.StatusInternalServerError)
	}
	s.p.ok(w)
	return nil
}
