// Package erase wipes disks for Ironic's cleaning steps: erase_devices
// (the strongest erase the drive offers), erase_devices_express (a fast
// hardware erase or, failing that, the metadata wipe) and
// erase_devices_metadata (every signature wipefs would find, on the disk
// and its partitions).
//
// Deciding is separate from doing: Probe reads what a drive can do into
// Caps, Plan and PlanExpress are pure functions from Caps to a Method and
// the reason for it, and the hardware is reached only through the Disk
// interface (a Linux implementation over ioctls, and fakes in tests). No
// erase is reported done until sampled reads show it happened: canary
// blocks written before the erase must be gone afterwards, and must read
// back before it, so a device that ignores writes is caught too.
package erase

// Method is one way of erasing a disk.
type Method string

// Methods, strongest first within each family.
const (
	MethodNone               Method = ""
	NVMeSanitizeCrypto       Method = "nvme-sanitize-crypto"
	NVMeSanitizeBlock        Method = "nvme-sanitize-block"
	NVMeFormatCrypto         Method = "nvme-format-crypto"
	NVMeFormatUserData       Method = "nvme-format-user-data"
	NVMeSanitizeOverwrite    Method = "nvme-sanitize-overwrite"
	ATAEnhancedSecurityErase Method = "ata-enhanced-security-erase"
	ATASecurityErase         Method = "ata-security-erase"
	Discard                  Method = "discard"
	ZeroOverwrite            Method = "zero-overwrite"
	MetadataOnly             Method = "metadata"
)

// zeroes reports whether every block reads as zero after the method: the
// verifier then demands zeroes, not just changed data.
func (m Method) zeroes() bool {
	return m == Discard || m == ZeroOverwrite || m == NVMeSanitizeOverwrite
}

// Caps is what a drive can do, as read from its identify data and sysfs.
type Caps struct {
	NVMe *NVMeCaps // nil unless the disk is an NVMe namespace
	ATA  *ATACaps  // nil unless the disk answered ATA IDENTIFY
	// Discard is true when the kernel can discard (TRIM/deallocate/UNMAP)
	// on the device.
	Discard bool
	// DiscardZeroes is true when the device guarantees that discarded
	// blocks read back as zeroes (NVMe DLFEAT, ATA deterministic read
	// zeroes after TRIM).
	DiscardZeroes bool
}

// NVMeCaps is the erase-relevant part of NVMe Identify Controller and
// Identify Namespace.
type NVMeCaps struct {
	NSID              uint32
	SanitizeCrypto    bool // SANICAP bit 0
	SanitizeBlock     bool // SANICAP bit 1
	SanitizeOverwrite bool // SANICAP bit 2
	Format            bool // OACS bit 1: Format NVM supported
	FormatCrypto      bool // FNA bit 2: cryptographic erase as part of a format
	// FormatAllNamespaces is true when a secure-erase format applies to
	// every namespace (FNA bit 0 or 1): the command is then sent for all.
	FormatAllNamespaces bool
	Deallocate          bool // ONCS bit 2: Dataset Management supported
	DeallocateZeroes    bool // DLFEAT bits 2:0 = 001b
	LBAFormat           uint8
	MetadataAtEnd       bool  // FLBAS bit 4, kept across a format
	ProtectionInfo      uint8 // DPS bits 2:0, kept across a format
	ProtectionFirst     bool  // DPS bit 3
}

// ATACaps is the erase-relevant part of ATA IDENTIFY DEVICE.
type ATACaps struct {
	SecuritySupported    bool // word 128 bit 0
	SecurityEnabled      bool // bit 1: a user password is set
	Locked               bool // bit 2
	Frozen               bool // bit 3
	CountExpired         bool // bit 4
	EnhancedErase        bool // bit 5
	EraseMinutes         int  // word 89, 0 when not given
	EnhancedEraseMinutes int  // word 90
	Trim                 bool // word 169 bit 0
	TrimDeterministic    bool // word 69 bit 14
	TrimZeroes           bool // word 69 bit 5
}

// Plan picks the erase for erase_devices: NVMe sanitize (crypto, then
// block erase), NVMe format with cryptographic or user-data secure erase,
// NVMe sanitize overwrite; else ATA (enhanced) security erase; else a
// discard when the device guarantees zeroes after it; else overwriting
// with zeroes. An ATA drive whose security state forbids the erase
// (frozen, locked, password set, attempts exhausted) is refused with the
// reason rather than silently erased a weaker way: MethodNone is returned
// and the reason says why and what would help.
func Plan(c Caps) (Method, string) {
	if n := c.NVMe; n != nil {
		switch {
		case n.SanitizeCrypto:
			return NVMeSanitizeCrypto, "NVMe sanitize with crypto erase is supported (SANICAP): it covers all media, including spare blocks"
		case n.SanitizeBlock:
			return NVMeSanitizeBlock, "NVMe sanitize with block erase is supported (SANICAP)"
		case n.Format && n.FormatCrypto:
			return NVMeFormatCrypto, "NVMe format with cryptographic erase is supported (FNA bit 2)"
		case n.Format:
			return NVMeFormatUserData, "NVMe format with user data erase is supported (OACS)"
		case n.SanitizeOverwrite:
			return NVMeSanitizeOverwrite, "only NVMe sanitize overwrite is supported"
		}
	}
	if a := c.ATA; a != nil && a.SecuritySupported {
		switch {
		case a.Frozen:
			return MethodNone, "ATA security erase refused: the drive is security-frozen (firmware froze it at boot); a suspend/resume cycle or hot-plugging the drive unfreezes it"
		case a.Locked:
			return MethodNone, "ATA security erase refused: the drive is locked with a password Kiln does not know"
		case a.SecurityEnabled:
			return MethodNone, "ATA security erase refused: a user password is set on the drive (security enabled); disable it first"
		case a.CountExpired:
			return MethodNone, "ATA security erase refused: the password attempt counter expired; power-cycle the drive"
		case a.EnhancedErase:
			return ATAEnhancedSecurityErase, "ATA enhanced security erase is supported"
		default:
			return ATASecurityErase, "ATA security erase is supported"
		}
	}
	if c.Discard && c.DiscardZeroes {
		return Discard, "no secure erase command; the device guarantees zeroes after discard"
	}
	return ZeroOverwrite, "no secure erase command and no zeroing discard: overwriting with zeroes"
}

// PlanExpress picks the erase for erase_devices_express: only what takes
// seconds (NVMe crypto erase by sanitize or format, or a discard that
// guarantees zeroes); anything else gets the metadata wipe.
func PlanExpress(c Caps) (Method, string) {
	if n := c.NVMe; n != nil {
		switch {
		case n.SanitizeCrypto:
			return NVMeSanitizeCrypto, "NVMe sanitize with crypto erase is fast and supported"
		case n.Format && n.FormatCrypto:
			return NVMeFormatCrypto, "NVMe format with cryptographic erase is fast and supported"
		}
	}
	if c.Discard && c.DiscardZeroes {
		return Discard, "the device guarantees zeroes after discard"
	}
	return MetadataOnly, "no fast hardware erase: wiping metadata only"
}
