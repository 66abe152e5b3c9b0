package bmcsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Reset key types of #SecureBoot.ResetKeys.
var resetKeysTypes = []string{"ResetAllKeysToDefault", "DeleteAllKeys", "DeletePK"}

// secureBoot serves Systems/<id>/SecureBoot: SecureBootEnable is writable and
// takes effect at the next boot (SecureBootCurrentBoot), as on real firmware;
// deleting the platform key drops the firmware into SetupMode, where secure
// boot is not enforced.
func (s *Service) secureBoot(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	path := spath + "/SecureBoot"
	resource := func() map[string]any {
		h := sys.hw
		h.mu.Lock()
		defer h.mu.Unlock()
		m := odata(path, "#SecureBoot.v1_1_0.SecureBoot")
		m["Id"] = "SecureBoot"
		m["Name"] = "UEFI Secure Boot"
		m["SecureBootEnable"] = h.sbEnable
		m["SecureBootCurrentBoot"] = enabledDisabled(h.sbCurrent)
		m["SecureBootMode"] = h.sbMode
		m["Actions"] = map[string]any{"#SecureBoot.ResetKeys": map[string]any{
			"target":                                path + "/Actions/SecureBoot.ResetKeys",
			"ResetKeysType@Redfish.AllowableValues": resetKeysTypes,
		}}
		return m
	}
	switch {
	case len(seg) == 0:
		return only(r, "GET,PATCH", func() *apiError {
			if r.Method == http.MethodGet {
				writeResource(w, r, resource())
				return nil
			}
			if e := checkIfMatch(r, resource()); e != nil {
				return e
			}
			body, e := readBody(r)
			if e != nil {
				return e
			}
			var enable *bool
			for k, raw := range body {
				switch {
				case strings.Contains(k, "@"):
				case k == "SecureBootEnable":
					var v bool
					if err := json.Unmarshal(raw, &v); err != nil {
						return errValueType(k, string(raw))
					}
					enable = &v
				case k == "Id" || k == "Name" || k == "SecureBootCurrentBoot" || k == "SecureBootMode" || k == "Actions":
					return errPropertyNotWritable(k)
				default:
					return errPropertyUnknown(k)
				}
			}
			if enable != nil {
				sys.hw.mu.Lock()
				sys.hw.sbEnable = *enable
				sys.hw.mu.Unlock()
				if fw, ok := sys.backend.(secureBootFirmware); ok {
					fw.SetSecureBoot(*enable)
				}
			}
			s.p.ok(w)
			return nil
		})
	case len(seg) == 2 && seg[0] == "Actions" && seg[1] == "SecureBoot.ResetKeys":
		return only(r, "POST", func() *apiError {
			const action = "SecureBoot.ResetKeys"
			body, e := readBody(r)
			if e != nil {
				return e
			}
			v, ok, e := stringField(body, "ResetKeysType", "ResetKeysType")
			if e != nil {
				return e
			}
			if !ok {
				return errActionParamMissing(action, "ResetKeysType")
			}
			if !contains(resetKeysTypes, v) {
				return errActionParamNotSupported(action, "ResetKeysType", v)
			}
			h := sys.hw
			h.mu.Lock()
			if v == "ResetAllKeysToDefault" {
				h.sbMode = SecureBootUserMode
			} else {
				h.sbMode = SecureBootSetupMode
			}
			h.mu.Unlock()
			s.p.ok(w)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

// secureBootFirmware is implemented by backends whose firmware can enforce
// secure boot (QEMU with OVMF); SecureBootEnable is passed on to them.
type secureBootFirmware interface {
	SetSecureBoot(enable bool)
}

func enabledDisabled(b bool) string {
	if b {
		return "Enabled"
	}
	return "Disabled"
}

// memory serves Systems/<id>/Memory: the inventory's memory as DIMMs of
// equal size (two when the size divides evenly, else one).
func (s *Service) memory(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	inv := sys.backend.Inventory()
	cpath := spath + "/Memory"
	n, per := 1, inv.MemoryGiB
	if inv.MemoryGiB%2 == 0 {
		n, per = 2, inv.MemoryGiB/2
	}
	if len(seg) == 0 {
		return only(r, "GET", func() *apiError {
			var ids []string
			for i := range n {
				ids = append(ids, cpath+"/DIMM"+strconv.Itoa(i+1))
			}
			writeResource(w, r, collection(cpath, "#MemoryCollection.MemoryCollection", "Memory Module Collection", ids))
			return nil
		})
	}
	i, err := strconv.Atoi(strings.TrimPrefix(seg[0], "DIMM"))
	if len(seg) != 1 || !strings.HasPrefix(seg[0], "DIMM") || err != nil || i < 1 || i > n {
		return errNotFound(r.URL.Path)
	}
	return only(r, "GET", func() *apiError {
		m := odata(cpath+"/"+seg[0], "#Memory.v1_17_0.Memory")
		m["Id"] = seg[0]
		m["Name"] = "DIMM " + strconv.Itoa(i)
		m["MemoryType"] = "DRAM"
		m["MemoryDeviceType"] = "DDR4"
		m["CapacityMiB"] = per * 1024
		m["OperatingSpeedMhz"] = 3200
		m["DeviceLocator"] = "DIMM_A" + strconv.Itoa(i)
		m["Status"] = status()
		writeResource(w, r, m)
		return nil
	})
}

// Manager reset types the simulated BMC accepts.
var managerResetTypes = []ResetType{ResetGracefulRestart, ResetForceRestart}

// managerReset reboots the BMC: like a real one it forgets every session, so
// clients must log in again, and with Faults.ManagerResetDowntime it drops
// every connection for that long (on the Clock) after answering; the host is
// not affected.
func (s *Service) managerReset(w http.ResponseWriter, r *http.Request) *apiError {
	const action = "Manager.Reset"
	body, e := readBody(r)
	if e != nil {
		return e
	}
	v, ok, e := stringField(body, "ResetType", "ResetType")
	if e != nil {
		return e
	}
	if !ok {
		v = string(ResetGracefulRestart)
	}
	if !contains(managerResetTypes, ResetType(v)) {
		return errActionParamNotSupported(action, "ResetType", v)
	}
	s.managerResets.Add(1)
	s.ExpireSessions()
	if d := s.faults.Load().ManagerResetDowntime; d > 0 {
		s.bmcDownUntil.Store(s.clock.Now().Add(d).UnixNano())
	}
	s.fwMu.Lock()
	if s.bmcStaged != "" {
		s.bmcVersion, s.bmcStaged = s.bmcStaged, ""
	}
	s.fwMu.Unlock()
	s.p.ok(w)
	return nil
}

// ManagerResets returns how many times the BMC itself was reset (#Manager.Reset).
func (s *Service) ManagerResets() uint64 { return s.managerResets.Load() }
