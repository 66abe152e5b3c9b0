package bmcsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
)

// Personality makes a Service look like one vendor's BMC: resource IDs, where
// virtual media lives, allowable values, response styles and quirks. Quirks
// are small named functions (below) so each one is tested alone and cited.
type Personality struct {
	Name         string
	Vendor       string // ServiceRoot.Vendor
	Product      string // ServiceRoot.Product
	Manufacturer string // default system Manufacturer
	Model        string // default system Model
	SystemID     string // ID of the first system when the config gives none
	ManagerID    string
	// ManagerModel is the Manager's Model, which Ironic reports as the BMC
	// firmware component's model ("" = Product).
	ManagerModel string
	// VirtualMediaOnManager puts the virtual CD under Managers/<id>/VirtualMedia
	// (iDRAC, iLO, Supermicro) instead of Systems/<id>/VirtualMedia. Such a
	// service holds exactly one system.
	VirtualMediaOnManager bool
	VirtualMediaID        string
	ResetTypes            []ResetType
	BootTargets           []string
	// StorageID is the Systems/<id>/Storage/<StorageID> segment ("" = "1").
	StorageID string
	// BiosApplyTimes are the @Redfish.SettingsApplyTime values accepted for
	// BIOS settings (empty = OnReset only).
	BiosApplyTimes []string
	// TaskIDPrefix makes task IDs vendor-like ("JID_" + 12 digits on iDRAC).
	TaskIDPrefix string

	// biosSettingsFull makes the BIOS settings object list every attribute
	// (current merged with pending) instead of only the pending ones.
	biosSettingsFull bool
	// biosSettingsNeedIfMatch refuses a BIOS settings PATCH without If-Match.
	biosSettingsNeedIfMatch bool
	// biosPatched answers an accepted BIOS settings PATCH (nil = ok).
	biosPatched func(s *Service, w http.ResponseWriter, r *http.Request, sys *system, applyTime string) *apiError

	// checkBoot rejects a boot PATCH before it is applied (nil = accept).
	checkBoot []func(cur BootOverride, p bootPatch) *apiError
	// adjustBoot rewrites the new override after a PATCH was accepted.
	adjustBoot func(next BootOverride, p bootPatch) BootOverride
	// checkInsert rejects an InsertMedia body before it is applied.
	checkInsert []func(body map[string]json.RawMessage) *apiError
	// sessionLimit is the error returned when the session limit is reached.
	sessionLimit func() *apiError
	// ok writes a successful PATCH or action response.
	ok func(w http.ResponseWriter)
	// oem returns the Oem object of a resource kind ("System", "Manager",
	// "VirtualMedia", "ServiceRoot"), nil for none.
	oem func(kind string) map[string]any
}

// bootPatch is the Boot object of a PATCH: nil fields were absent.
type bootPatch struct {
	Enabled, Target, Mode *string
}

var personalities = map[string]*Personality{}

// managerModel is what the Manager resource reports as its Model.
func (p *Personality) managerModel() string {
	if p.ManagerModel != "" {
		return p.ManagerModel
	}
	return p.Product
}

func registerPersonality(p *Personality) {
	if _, dup := personalities[p.Name]; dup {
		panic("bmcsim: duplicate personality " + p.Name)
	}
	if p.ok == nil {
		p.ok = respondNoContent
	}
	if p.sessionLimit == nil {
		p.sessionLimit = errSessionLimit
	}
	personalities[p.Name] = p
}

// LookupPersonality returns the named personality ("" means "generic").
func LookupPersonality(name string) (*Personality, error) {
	if name == "" {
		name = "generic"
	}
	p, ok := personalities[name]
	if !ok {
		return nil, fmt.Errorf("unknown BMC personality %q (have %v)", name, PersonalityNames())
	}
	return p, nil
}

// PersonalityNames lists the registered personalities, sorted.
func PersonalityNames() []string {
	var n []string
	for k := range personalities {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

var standardTargets = []string{TargetNone, TargetPxe, TargetCd, TargetUsb, TargetHdd, TargetBiosSetup, TargetUefiHTTP}

func init() {
	registerPersonality(&Personality{
		Name: "generic", Vendor: "Kiln", Product: "Kiln BMC simulator",
		Manufacturer: "Kiln Simulated", Model: "SIM-1000",
		SystemID: "1", ManagerID: "BMC", VirtualMediaID: "CD1",
		ResetTypes:  AllResetTypes,
		BootTargets: standardTargets,
	})
	registerPersonality(&Personality{
		Name: "idrac", Vendor: "Dell", Product: "Integrated Dell Remote Access Controller",
		Manufacturer: "Dell Inc.", Model: "PowerEdge R650",
		SystemID: "System.Embedded.1", ManagerID: "iDRAC.Embedded.1", ManagerModel: "14G Monolithic",
		VirtualMediaOnManager: true, VirtualMediaID: "CD",
		ResetTypes: []ResetType{ResetOn, ResetForceOff, ResetForceRestart, ResetGracefulRestart,
			ResetGracefulShutdown, ResetPushPowerButton, ResetNmi, ResetPowerCycle},
		BootTargets:    []string{TargetNone, TargetPxe, TargetFloppy, TargetCd, TargetHdd, TargetBiosSetup, TargetUtilities, TargetUefiTarget, TargetSDCard, TargetUefiHTTP},
		checkBoot:      []func(BootOverride, bootPatch) *apiError{idracTargetNeedsEnabled},
		sessionLimit:   idracSessionLimitError,
		ok:             respondExtendedInfoSuccess,
		oem:            idracOem,
		StorageID:      "RAID.Integrated.1-1",
		TaskIDPrefix:   "JID_",
		BiosApplyTimes: []string{"Immediate", "OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"},
		biosPatched:    idracBiosJob,
	})
	registerPersonality(&Personality{
		Name: "ilo", Vendor: "HPE", Product: "ProLiant DL360 Gen10 Plus",
		Manufacturer: "HPE", Model: "ProLiant DL360 Gen10 Plus",
		SystemID: "1", ManagerID: "1", ManagerModel: "iLO 5",
		VirtualMediaOnManager: true, VirtualMediaID: "2",
		ResetTypes: []ResetType{ResetOn, ResetForceOff, ResetGracefulShutdown, ResetForceRestart,
			ResetNmi, ResetPushPowerButton, ResetGracefulRestart},
		BootTargets:      []string{TargetNone, TargetCd, TargetHdd, TargetUsb, TargetSDCard, TargetUtilities, TargetDiags, TargetBiosSetup, TargetPxe, TargetUefiShell, TargetUefiHTTP, TargetUefiTarget},
		checkBoot:        []func(BootOverride, bootPatch) *apiError{iloModeNotWritable},
		ok:               respondILOSuccessEnvelope,
		oem:              iloOem,
		StorageID:        "DE00A000",
		biosSettingsFull: true,
		biosPatched:      iloBiosResetRequired,
	})
	registerPersonality(&Personality{
		Name: "supermicro", Vendor: "Supermicro", Product: "X12DPT-B6",
		Manufacturer: "Supermicro", Model: "SYS-120U-TNR",
		SystemID: "1", ManagerID: "1",
		VirtualMediaOnManager: true, VirtualMediaID: "CD1",
		ResetTypes: []ResetType{ResetOn, ResetForceOff, ResetGracefulShutdown, ResetGracefulRestart,
			ResetForceRestart, ResetNmi, ResetForceOn},
		BootTargets:             []string{TargetNone, TargetPxe, TargetFloppy, TargetCd, TargetUsb, TargetHdd, TargetBiosSetup, TargetUsbCd, TargetUefiBootNext, TargetUefiHTTP},
		adjustBoot:              supermicroModeRevertsWhenOmitted,
		checkInsert:             []func(map[string]json.RawMessage) *apiError{supermicroInsertImageOnly},
		StorageID:               "HA-RAID",
		biosSettingsNeedIfMatch: true,
	})
}

// Vendor-specific override targets that appear in personalities' allowable values.
const (
	TargetFloppy       = "Floppy"
	TargetUtilities    = "Utilities"
	TargetUefiTarget   = "UefiTarget"
	TargetSDCard       = "SDCard"
	TargetDiags        = "Diags"
	TargetUefiShell    = "UefiShell"
	TargetUsbCd        = "UsbCd"
	TargetUefiBootNext = "UefiBootNext"
)

// idracTargetNeedsEnabled: iDRAC answers a boot PATCH that sets the target
// without BootSourceOverrideEnabled with 400 and an IDRAC SYS444 message
// ("depends on other attribute(s)", RelatedProperties BootSourceOverrideEnabled),
// as reported against Dell 13th-gen servers (ansible-collections/community.general#5091).
func idracTargetNeedsEnabled(_ BootOverride, p bootPatch) *apiError {
	if p.Target == nil || p.Enabled != nil {
		return nil
	}
	m := msg("IDRAC.2.8.SYS444", "Unable to set the attribute value because it depends on other attribute(s).",
		"Warning", "Change the value on the other attribute and retry the operation.",
		[]string{"#/Boot/BootSourceOverrideEnabled"})
	return &apiError{Status: http.StatusBadRequest, Code: baseRegistry + ".GeneralError",
		Text: "A general error has occurred. See ExtendedInfo for more information", Info: []Message{m}}
}

// idracSessionLimitError is iDRAC's answer when all sessions are taken: 503,
// Base GeneralError with an IDRAC RAC0218 message (stmcginnis/gofish#75).
func idracSessionLimitError() *apiError {
	m := msg("IDRAC.2.8.RAC0218", "The maximum number of user sessions is reached.", "Informational",
		"Close one or more sessions before opening another session.", nil)
	return &apiError{Status: http.StatusServiceUnavailable, Code: baseRegistry + ".GeneralError",
		Text: "A general error has occurred. See ExtendedInfo for more information", Info: []Message{m}}
}

// iloModeNotWritable: on iLO 5, BootSourceOverrideMode is read-only, and a
// PATCH that includes it (even unchanged) is rejected with 400
// (ansible-collections/community.general#3509, metal3-io/metal3-docs#581).
func iloModeNotWritable(_ BootOverride, p bootPatch) *apiError {
	if p.Mode == nil {
		return nil
	}
	e := errPropertyNotWritable("BootSourceOverrideMode")
	return iloEnvelope(e.Status, e.Info)
}

// supermicroModeRevertsWhenOmitted: Supermicro BMCs reset
// BootSourceOverrideMode to its default (Legacy) when a boot PATCH does not
// repeat it, so clients must always send it (DMTF/Redfishtool#106).
func supermicroModeRevertsWhenOmitted(next BootOverride, p bootPatch) BootOverride {
	if p.Mode == nil {
		next.Mode = ModeLegacy
	}
	return next
}

// supermicroInsertImageOnly: Supermicro's InsertMedia accepts only Image
// (and credentials); the optional Inserted and WriteProtected parameters are
// rejected with 400 "The property Inserted is not in the list of valid
// properties for the resource." (ansible-collections/community.general#4839).
func supermicroInsertImageOnly(body map[string]json.RawMessage) *apiError {
	for _, k := range []string{"Inserted", "WriteProtected"} {
		if _, ok := body[k]; ok {
			return errPropertyUnknown(k)
		}
	}
	return nil
}

// iloEnvelope wraps messages the way iLO does: every response body, success
// or not, is an "error" object with code iLO.0.10.ExtendedInfo.
func iloEnvelope(status int, info []Message) *apiError {
	return &apiError{Status: status, Code: "iLO.0.10.ExtendedInfo",
		Text: "See @Message.ExtendedInfo for more information.", Info: info}
}

func respondNoContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

func successMessage() Message {
	return msg(baseRegistry+".Success", "The request completed successfully.", "OK", "None", nil)
}

// respondExtendedInfoSuccess is iDRAC's 200 with a Base Success message.
func respondExtendedInfoSuccess(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{"@Message.ExtendedInfo": []Message{successMessage()}})
}

// respondILOSuccessEnvelope is iLO's 200 whose body is an "error" object
// carrying a Success message.
func respondILOSuccessEnvelope(w http.ResponseWriter) {
	iloEnvelope(http.StatusOK, []Message{successMessage()}).write(w)
}

func idracOem(kind string) map[string]any {
	switch kind {
	case "System":
		return map[string]any{"Dell": map[string]any{"DellSystem": map[string]any{
			"@odata.type": "#DellSystem.v1_3_0.DellSystem", "SystemGeneration": "15G Monolithic"}}}
	case "Manager":
		return map[string]any{"Dell": map[string]any{"DelliDRACCard": map[string]any{
			"@odata.type": "#DelliDRACCard.v1_1_0.DelliDRACCard", "IPMIVersion": "2.0"}}}
	}
	return nil
}

func iloOem(kind string) map[string]any {
	switch kind {
	case "System":
		return map[string]any{"Hpe": map[string]any{
			"@odata.type": "#HpeComputerSystemExt.v2_11_0.HpeComputerSystemExt",
			"PostState":   "FinishedPost", "PowerRegulatorMode": "Dynamic"}}
	case "Manager":
		return map[string]any{"Hpe": map[string]any{
			"@odata.type": "#HpeiLO.v2_8_0.HpeiLO", "Firmware": map[string]any{
				"Current": map[string]any{"VersionString": "iLO 5 v2.78"}}}}
	case "VirtualMedia":
		return map[string]any{"Hpe": map[string]any{
			"@odata.type":           "#HpeiLOVirtualMedia.v2_2_0.HpeiLOVirtualMedia",
			"BootOnNextServerReset": false}}
	case "ServiceRoot":
		return map[string]any{"Hpe": map[string]any{
			"@odata.type": "#HpeiLOServiceExt.v2_3_0.HpeiLOServiceExt", "Manager": []any{
				map[string]any{"ManagerType": "iLO 5", "ManagerFirmwareVersion": "2.78"}}}}
	}
	return nil
}
