package erase

import (
	"strings"
	"testing"
)

func TestPlanDecisionTable(t *testing.T) {
	nvme := func(n NVMeCaps) Caps { return Caps{NVMe: &n} }
	ata := func(a ATACaps) Caps { return Caps{ATA: &a} }
	cases := []struct {
		name       string
		caps       Caps
		full       Method
		express    Method
		reasonHint string // a word the Full reason must contain
	}{
		{"nvme all sanitize + format crypto", nvme(NVMeCaps{SanitizeCrypto: true, SanitizeBlock: true, SanitizeOverwrite: true, Format: true, FormatCrypto: true}), NVMeSanitizeCrypto, NVMeSanitizeCrypto, "crypto"},
		{"nvme sanitize block + overwrite", nvme(NVMeCaps{SanitizeBlock: true, SanitizeOverwrite: true}), NVMeSanitizeBlock, MetadataOnly, "block"},
		{"nvme sanitize block, format crypto", nvme(NVMeCaps{SanitizeBlock: true, Format: true, FormatCrypto: true}), NVMeSanitizeBlock, NVMeFormatCrypto, "block"},
		{"nvme format crypto only", nvme(NVMeCaps{Format: true, FormatCrypto: true}), NVMeFormatCrypto, NVMeFormatCrypto, "cryptographic"},
		{"nvme format user data", nvme(NVMeCaps{Format: true}), NVMeFormatUserData, MetadataOnly, "user data"},
		{"nvme crypto bit without format support", nvme(NVMeCaps{FormatCrypto: true}), ZeroOverwrite, MetadataOnly, "overwriting"},
		{"nvme format user data + sanitize overwrite", nvme(NVMeCaps{Format: true, SanitizeOverwrite: true}), NVMeFormatUserData, MetadataOnly, "user data"},
		{"nvme sanitize overwrite only", nvme(NVMeCaps{SanitizeOverwrite: true}), NVMeSanitizeOverwrite, MetadataOnly, "overwrite"},
		{"nvme nothing, zeroing deallocate", Caps{NVMe: &NVMeCaps{Deallocate: true, DeallocateZeroes: true}, Discard: true, DiscardZeroes: true}, Discard, Discard, "zeroes after discard"},
		{"nvme nothing, no discard", nvme(NVMeCaps{}), ZeroOverwrite, MetadataOnly, "overwriting"},
		{"ata enhanced", ata(ATACaps{SecuritySupported: true, EnhancedErase: true}), ATAEnhancedSecurityErase, MetadataOnly, "enhanced"},
		{"ata normal", ata(ATACaps{SecuritySupported: true}), ATASecurityErase, MetadataOnly, "security erase"},
		{"ata frozen", ata(ATACaps{SecuritySupported: true, Frozen: true, EnhancedErase: true}), MethodNone, MetadataOnly, "frozen"},
		{"ata frozen with zeroing trim", Caps{ATA: &ATACaps{SecuritySupported: true, Frozen: true}, Discard: true, DiscardZeroes: true}, MethodNone, Discard, "frozen"},
		{"ata locked", ata(ATACaps{SecuritySupported: true, Locked: true, SecurityEnabled: true}), MethodNone, MetadataOnly, "locked"},
		{"ata password set", ata(ATACaps{SecuritySupported: true, SecurityEnabled: true}), MethodNone, MetadataOnly, "password"},
		{"ata attempts expired", ata(ATACaps{SecuritySupported: true, CountExpired: true}), MethodNone, MetadataOnly, "expired"},
		{"ata without security, zeroing trim", Caps{ATA: &ATACaps{Trim: true, TrimDeterministic: true, TrimZeroes: true}, Discard: true, DiscardZeroes: true}, Discard, Discard, "discard"},
		{"ata without security, plain trim", Caps{ATA: &ATACaps{Trim: true}, Discard: true}, ZeroOverwrite, MetadataOnly, "overwriting"},
		{"no ata/nvme, discard not zeroing", Caps{Discard: true}, ZeroOverwrite, MetadataOnly, "overwriting"},
		{"nothing at all", Caps{}, ZeroOverwrite, MetadataOnly, "overwriting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, reason := Plan(c.caps)
			if m != c.full {
				t.Errorf("Plan = %s (%s), want %s", m, reason, c.full)
			}
			if !strings.Contains(reason, c.reasonHint) {
				t.Errorf("Plan reason %q lacks %q", reason, c.reasonHint)
			}
			if m, reason := PlanExpress(c.caps); m != c.express {
				t.Errorf("PlanExpress = %s (%s), want %s", m, reason, c.express)
			}
		})
	}
}

func TestProbeParsesIdentify(t *testing.T) {
	ctx := t.Context()
	d := newFake(1 << 20)
	ctrl, ns := nvmeIdentify(0b101, 0b10, 0b100, 0b100, 1)
	ns[26] = 0x12 // FLBAS: format 2, metadata at end
	ns[29] = 0x09 // DPS: PI type 1, first bytes
	d.nvme = &fakeNVMe{ctrl: ctrl, ns: ns}
	d.canDiscard = true
	c, err := Probe(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	want := NVMeCaps{NSID: 1, SanitizeCrypto: true, SanitizeOverwrite: true, Format: true, FormatCrypto: true,
		Deallocate: true, DeallocateZeroes: true, LBAFormat: 2, MetadataAtEnd: true, ProtectionInfo: 1, ProtectionFirst: true}
	if *c.NVMe != want || !c.Discard || !c.DiscardZeroes || c.ATA != nil {
		t.Errorf("caps = %+v %+v, want %+v", c, *c.NVMe, want)
	}
	// FLBAS upper bits (6:5) extend the format index past 15.
	ns[26] = 0x61
	if c, _ := Probe(ctx, d); c.NVMe.LBAFormat != 0x31 {
		t.Errorf("LBAFormat = %#x, want 0x31", c.NVMe.LBAFormat)
	}

	a := newFake(1 << 20)
	a.ata = &fakeATA{id: ataIdentifyData(0b101001, 1<<14|1<<5, 1, 30, 255)}
	a.canDiscard = true
	c, err = Probe(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	wantATA := ATACaps{SecuritySupported: true, Frozen: true, EnhancedErase: true, EraseMinutes: 60, EnhancedEraseMinutes: 508,
		Trim: true, TrimDeterministic: true, TrimZeroes: true}
	if *c.ATA != wantATA || !c.DiscardZeroes {
		t.Errorf("ATA caps = %+v, want %+v", *c.ATA, wantATA)
	}
	// A SAS disk behind sd answers no ATA IDENTIFY: not ATA, no error.
	s := newFake(1 << 20)
	s.ata = &fakeATA{}
	if c, err := Probe(ctx, s); err != nil || c.ATA != nil {
		t.Errorf("non-ATA sd: %+v, %v", c, err)
	}
	if _, err := ParseNVMeIdentify(1, ctrl[:100], ns); err == nil {
		t.Error("short identify data accepted")
	}
	if _, err := ParseATAIdentify(make([]byte, 10)); err == nil {
		t.Error("short ATA identify accepted")
	}
}
