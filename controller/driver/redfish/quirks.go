package redfish

import (
	"strings"
	"unicode"

	"github.com/stmcginnis/gofish/schemas"
)

// Vendor identifies a Redfish service: ServiceRoot Vendor/Product and the
// system's Manufacturer/Model.
type Vendor struct {
	Vendor, Product, Manufacturer, Model string
}

// has reports whether any of the phrases occurs in the identity as whole
// words (so "ami" matches "AMI MegaRAC" but not "Miami").
func (v Vendor) has(phrases ...string) bool {
	words := strings.FieldsFunc(strings.ToLower(v.Vendor+" "+v.Product+" "+v.Manufacturer+" "+v.Model), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	all := " " + strings.Join(words, " ") + " "
	for _, p := range phrases {
		if strings.Contains(all, " "+p+" ") {
			return true
		}
	}
	return false
}

// BootPatch is the Boot object of a boot override PATCH: only the fields
// that are set are sent.
type BootPatch struct {
	Enabled, Target, Mode string
}

func (b BootPatch) body() map[string]any {
	m := map[string]any{}
	if b.Enabled != "" {
		m["BootSourceOverrideEnabled"] = b.Enabled
	}
	if b.Target != "" {
		m["BootSourceOverrideTarget"] = b.Target
	}
	if b.Mode != "" {
		m["BootSourceOverrideMode"] = b.Mode
	}
	return map[string]any{"Boot": m}
}

// Quirk is one vendor's deviation from the standard and the driver's work
// around it. Each is a small named function, tested alone; the driver's
// generic code never tests a vendor itself.
type Quirk struct {
	Name    string
	Applies func(Vendor) bool
	// Boot adjusts a boot override PATCH, given the current settings.
	Boot func(p *BootPatch, cur schemas.Boot)
	// Insert adjusts the InsertMedia parameters.
	Insert func(p *schemas.VirtualMediaInsertMediaParameters)
	// ModeReadOnly: BootSourceOverrideMode cannot be PATCHed, so a requested
	// mode change fails with a clear error instead of a 400.
	ModeReadOnly bool
}

// Quirks lists every known quirk, in the order they are applied.
var Quirks = []Quirk{
	{Name: "idrac-enabled-with-target", Applies: isDell, Boot: idracEnabledWithTarget},
	{Name: "ilo-boot-mode-read-only", Applies: isHPE, Boot: iloDropBootMode, ModeReadOnly: true},
	{Name: "supermicro-repeat-boot-mode", Applies: isSupermicro, Boot: supermicroRepeatBootMode},
	{Name: "supermicro-insert-image-only", Applies: isSupermicro, Insert: insertImageOnly},
}

// QuirksFor returns the quirks that apply to v.
func QuirksFor(v Vendor) []Quirk {
	var q []Quirk
	for _, x := range Quirks {
		if x.Applies(v) {
			q = append(q, x)
		}
	}
	return q
}

func isDell(v Vendor) bool { return v.has("dell", "dell inc", "idrac") }
func isHPE(v Vendor) bool  { return v.has("hpe", "hewlett packard enterprise", "ilo") }

// isSupermicro also matches AMI MegaRAC firmware, which Supermicro ships
// and which shares the same behaviours.
func isSupermicro(v Vendor) bool { return v.has("supermicro", "american megatrends", "ami", "megarac") }

// idracEnabledWithTarget: iDRAC rejects a PATCH that sets
// BootSourceOverrideTarget without BootSourceOverrideEnabled (400, IDRAC
// SYS444 "depends on other attribute(s)"), so always send both.
func idracEnabledWithTarget(p *BootPatch, cur schemas.Boot) {
	if p.Target != "" && p.Enabled == "" {
		p.Enabled = string(cur.BootSourceOverrideEnabled)
	}
}

// iloDropBootMode: iLO 5 reports BootSourceOverrideMode read-only and
// rejects any PATCH naming it, even unchanged; the mode follows the BIOS
// setting instead.
func iloDropBootMode(p *BootPatch, _ schemas.Boot) { p.Mode = "" }

// supermicroRepeatBootMode: Supermicro BMCs reset BootSourceOverrideMode to
// Legacy when a boot PATCH leaves it out, so repeat the current mode.
func supermicroRepeatBootMode(p *BootPatch, cur schemas.Boot) {
	if p.Mode == "" && (p.Target != "" || p.Enabled != "") {
		p.Mode = string(cur.BootSourceOverrideMode)
	}
}

// insertImageOnly: Supermicro's InsertMedia accepts only Image (and
// credentials); Inserted and WriteProtected are rejected with 400.
func insertImageOnly(p *schemas.VirtualMediaInsertMediaParameters) {
	p.Inserted = nil
	p.WriteProtected = nil
}
