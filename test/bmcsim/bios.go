package bmcsim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// biosAttr is one entry of the BIOS attribute registry.
type biosAttr struct {
	Name          string
	Type          string // Enumeration, Integer, String, Boolean
	Default       any
	Values        []string // Enumeration
	Lower, Upper  int      // Integer
	MaxLength     int      // String
	ReadOnly      bool
	ResetRequired bool
	Unique        bool // IsSystemUniqueProperty: differs per machine (serial numbers)
}

// biosRegistryID names the attribute registry the Bios resource points to.
const biosRegistryID = "BiosAttributeRegistry.v1_0_0"

// biosAttrs is the simulated firmware's attribute set: the kinds of setting
// Metal3/OpenShift change (virtualisation, SR-IOV, boot mode) plus one of each
// type, a read-only one and a per-machine one.
var biosAttrs = []biosAttr{
	{Name: "BootMode", Type: "Enumeration", Default: "Uefi", Values: []string{"Uefi", "Bios"}, ResetRequired: true},
	{Name: "ProcVirtualization", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}, ResetRequired: true},
	{Name: "ProcHyperThreading", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}, ResetRequired: true},
	{Name: "SriovGlobalEnable", Type: "Enumeration", Default: "Disabled", Values: []string{"Enabled", "Disabled"}, ResetRequired: true},
	{Name: "PxeDev1EnDis", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}, ResetRequired: true},
	{Name: "SecureBootAllowed", Type: "Boolean", Default: true, ResetRequired: true},
	{Name: "AcPwrRcvryUserDelay", Type: "Integer", Default: 60, Lower: 60, Upper: 600},
	{Name: "AssetTagBios", Type: "String", Default: "", MaxLength: 16},
	{Name: "SystemServiceTag", Type: "String", ReadOnly: true, Unique: true},
	{Name: "SysMemSize", Type: "String", ReadOnly: true},
}

func lookupBiosAttr(name string) *biosAttr {
	for i := range biosAttrs {
		if biosAttrs[i].Name == name {
			return &biosAttrs[i]
		}
	}
	return nil
}

// biosDefaults are the factory values of a system with inventory inv.
func biosDefaults(inv Inventory) map[string]any {
	m := map[string]any{}
	for _, a := range biosAttrs {
		m[a.Name] = a.Default
	}
	m["SystemServiceTag"] = inv.SerialNumber
	m["SysMemSize"] = fmt.Sprintf("%d GB", inv.MemoryGiB)
	return m
}

// checkBiosValue validates one attribute of a settings PATCH.
func checkBiosValue(name string, raw json.RawMessage) (any, *apiError) {
	prop := "Attributes/" + name
	a := lookupBiosAttr(name)
	if a == nil {
		return nil, errPropertyUnknown(prop)
	}
	if a.ReadOnly {
		return nil, errPropertyNotWritable(prop)
	}
	switch a.Type {
	case "Enumeration", "String":
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errValueType(prop, string(raw))
		}
		if a.Type == "Enumeration" && !contains(a.Values, v) {
			return nil, errValueNotInList(prop, v)
		}
		if a.MaxLength > 0 && len(v) > a.MaxLength {
			return nil, errValueOutOfRange(prop, v)
		}
		return v, nil
	case "Boolean":
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errValueType(prop, string(raw))
		}
		return v, nil
	case "Integer":
		var v int
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errValueType(prop, string(raw))
		}
		if v < a.Lower || v > a.Upper {
			return nil, errValueOutOfRange(prop, string(raw))
		}
		return v, nil
	}
	return nil, errPropertyUnknown(prop)
}

func errValueOutOfRange(prop, value string) *apiError {
	return baseError(http.StatusBadRequest, "PropertyValueOutOfRange",
		fmt.Sprintf("The value '%s' for the property %s is not in the supported range of acceptable values.", value, prop),
		"Correct the value for the property in the request body and resubmit the request if the operation failed.",
		[]string{"#/" + prop}, value, prop)
}

// biosApplyTimes are the @Redfish.SettingsApplyTime values a personality
// accepts for BIOS settings.
func (p *Personality) biosApplyTimes() []string {
	if len(p.BiosApplyTimes) > 0 {
		return p.BiosApplyTimes
	}
	return []string{"OnReset"}
}

// routeBios serves Systems/<id>/Bios, its Settings object and ResetBios.
func (s *Service) routeBios(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	bpath := spath + "/Bios"
	h := sys.hw
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, s.biosResource(sys, bpath))
			return nil
		})
	case len(seg) == 1 && seg[0] == "Settings":
		return only(r, "GET,PATCH", func() *apiError {
			if r.Method == http.MethodGet {
				writeResource(w, r, s.biosSettingsResource(sys, bpath))
				return nil
			}
			return s.patchBiosSettings(w, r, sys, bpath)
		})
	case len(seg) == 2 && seg[0] == "Actions" && seg[1] == "Bios.ResetBios":
		return only(r, "POST", func() *apiError {
			if _, e := readBody(r); e != nil {
				return e
			}
			h.mu.Lock()
			def := biosDefaults(sys.backend.Inventory())
			for _, a := range biosAttrs {
				if !a.ReadOnly && h.bios[a.Name] != def[a.Name] {
					h.biosPending[a.Name] = def[a.Name]
				}
			}
			h.mu.Unlock()
			s.p.ok(w)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

func (s *Service) biosResource(sys *system, bpath string) map[string]any {
	h := sys.hw
	h.mu.Lock()
	defer h.mu.Unlock()
	m := odata(bpath, "#Bios.v1_2_0.Bios")
	m["Id"] = "BIOS"
	m["Name"] = "BIOS Configuration Current Settings"
	m["AttributeRegistry"] = biosRegistryID
	m["Attributes"] = maps.Clone(h.bios)
	settings := map[string]any{
		"@odata.type":         "#Settings.v1_3_5.Settings",
		"SettingsObject":      link(bpath + "/Settings"),
		"SupportedApplyTimes": s.p.biosApplyTimes(),
		"Messages":            h.biosMessages,
	}
	if !h.biosApplied.IsZero() {
		settings["Time"] = h.biosApplied.UTC().Format(time.RFC3339)
	}
	m["@Redfish.Settings"] = settings
	m["Actions"] = map[string]any{"#Bios.ResetBios": map[string]any{"target": bpath + "/Actions/Bios.ResetBios"}}
	return m
}

// biosSettingsResource is the settings object: the pending values, or (iLO)
// the whole future attribute set.
func (s *Service) biosSettingsResource(sys *system, bpath string) map[string]any {
	h := sys.hw
	h.mu.Lock()
	defer h.mu.Unlock()
	m := odata(bpath+"/Settings", "#Bios.v1_2_0.Bios")
	m["Id"] = "Settings"
	m["Name"] = "BIOS Configuration Pending Settings"
	m["AttributeRegistry"] = biosRegistryID
	attrs := maps.Clone(h.biosPending)
	if s.p.biosSettingsFull {
		attrs = maps.Clone(h.bios)
		maps.Copy(attrs, h.biosPending)
	}
	m["Attributes"] = attrs
	m["@Redfish.SettingsApplyTime"] = map[string]any{
		"@odata.type":                       "#Settings.v1_3_5.PreferredApplyTime",
		"ApplyTime":                         "OnReset",
		"ApplyTime@Redfish.AllowableValues": s.p.biosApplyTimes(),
	}
	return m
}

func (s *Service) patchBiosSettings(w http.ResponseWriter, r *http.Request, sys *system, bpath string) *apiError {
	cur := s.biosSettingsResource(sys, bpath)
	if s.p.biosSettingsNeedIfMatch && r.Header.Get("If-Match") == "" {
		return errPreconditionRequired()
	}
	if e := checkIfMatch(r, cur); e != nil {
		return e
	}
	body, e := readBody(r)
	if e != nil {
		return e
	}
	applyTime := "OnReset"
	values := map[string]any{}
	for k, raw := range body {
		switch k {
		case "Attributes":
			var attrs map[string]json.RawMessage
			if err := json.Unmarshal(raw, &attrs); err != nil || attrs == nil {
				return errValueType("Attributes", string(raw))
			}
			for _, name := range slices.Sorted(maps.Keys(attrs)) {
				v, e := checkBiosValue(name, attrs[name])
				if e != nil {
					return e
				}
				values[name] = v
			}
		case "@Redfish.SettingsApplyTime":
			var at struct{ ApplyTime string }
			if err := json.Unmarshal(raw, &at); err != nil {
				return errValueType("@Redfish.SettingsApplyTime", string(raw))
			}
			if !contains(s.p.biosApplyTimes(), at.ApplyTime) {
				return errValueNotInList("@Redfish.SettingsApplyTime/ApplyTime", at.ApplyTime)
			}
			applyTime = at.ApplyTime
		default:
			if strings.HasPrefix(k, "@") {
				continue
			}
			if k == "Id" || k == "Name" || k == "AttributeRegistry" {
				return errPropertyNotWritable(k)
			}
			return errPropertyUnknown(k)
		}
	}
	h := sys.hw
	h.mu.Lock()
	maps.Copy(h.biosPending, values)
	h.mu.Unlock()
	if s.p.biosPatched != nil {
		return s.p.biosPatched(s, w, r, sys, applyTime)
	}
	s.p.ok(w)
	return nil
}

func errPreconditionRequired() *apiError {
	return baseError(http.StatusPreconditionRequired, "PreconditionRequired",
		"A precondition header or annotation is required to change the resource.",
		"Try the request again with an If-Match header and the resource's current ETag.", nil)
}

// applyBiosLocked applies the pending BIOS values at a boot, except those the
// UnstickySettings fault names: they are dropped silently, as when firmware
// ignores a setting. Called with h.mu held.
func (h *hwState) applyBiosLocked(now time.Time, unsticky []string) {
	if len(h.biosPending) == 0 {
		return
	}
	for k, v := range h.biosPending {
		if !contains(unsticky, k) {
			h.bios[k] = v
		}
	}
	clear(h.biosPending)
	h.biosApplied = now
	h.biosMessages = []Message{msg(baseRegistry+".Success", "The request completed successfully.", "OK", "None", nil)}
}

// routeRegistries serves /redfish/v1/Registries with the BIOS attribute
// registry (AllowableValues, ReadOnly, ResetRequired, type per attribute).
func (s *Service) routeRegistries(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	cpath := root + "/Registries"
	fpath := cpath + "/" + biosRegistryID
	jpath := fpath + "/BiosAttributeRegistry.json"
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(cpath, "#MessageRegistryFileCollection.MessageRegistryFileCollection",
				"Registry File Collection", []string{fpath}))
			return nil
		})
	case seg[0] != biosRegistryID:
		return errNotFound(r.URL.Path)
	case len(seg) == 1:
		return only(r, "GET", func() *apiError {
			m := odata(fpath, "#MessageRegistryFile.v1_1_3.MessageRegistryFile")
			m["Id"] = biosRegistryID
			m["Name"] = "BIOS Attribute Registry File"
			m["Languages"] = []string{"en"}
			m["Registry"] = "BiosAttributeRegistry.1.0"
			m["Location"] = []any{map[string]any{"Language": "en", "Uri": jpath}}
			writeResource(w, r, m)
			return nil
		})
	case len(seg) == 2 && seg[1] == "BiosAttributeRegistry.json":
		return only(r, "GET", func() *apiError {
			writeResource(w, r, s.biosRegistry(jpath))
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

func (s *Service) biosRegistry(path string) map[string]any {
	m := odata(path, "#AttributeRegistry.v1_3_6.AttributeRegistry")
	m["Id"] = biosRegistryID
	m["Name"] = "BIOS Attribute Registry"
	m["Language"] = "en"
	m["OwningEntity"] = s.p.Vendor
	m["RegistryVersion"] = "1.0.0"
	var attrs []any
	for _, a := range biosAttrs {
		e := map[string]any{
			"AttributeName":          a.Name,
			"DisplayName":            a.Name,
			"Type":                   a.Type,
			"ReadOnly":               a.ReadOnly,
			"ResetRequired":          a.ResetRequired,
			"IsSystemUniqueProperty": a.Unique,
			"Immutable":              a.ReadOnly,
		}
		if a.Default != nil {
			e["DefaultValue"] = a.Default
		}
		switch a.Type {
		case "Enumeration":
			var vals []any
			for _, v := range a.Values {
				vals = append(vals, map[string]any{"ValueName": v, "ValueDisplayName": v})
			}
			e["Value"] = vals
		case "Integer":
			e["LowerBound"], e["UpperBound"] = a.Lower, a.Upper
		case "String":
			if a.MaxLength > 0 {
				e["MaxLength"] = a.MaxLength
			}
		}
		attrs = append(attrs, e)
	}
	m["RegistryEntries"] = map[string]any{"Attributes": attrs}
	return m
}
