package erase

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
)

// Disk is an open whole-disk block device: the only way this package
// reaches hardware. Reads and writes must bypass the page cache (the
// verifier must see the media, not what it just wrote into memory).
type Disk interface {
	Path() string
	Size() int64
	SectorSize() int
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
	// CanDiscard reports whether the kernel can discard blocks on it.
	CanDiscard() bool
	// Discard discards [off, off+n) (BLKDISCARD).
	Discard(ctx context.Context, off, n int64) error
	// ZeroRange writes zeroes over [off, off+n), offloaded when the
	// device can (BLKZEROOUT).
	ZeroRange(ctx context.Context, off, n int64) error
	// KernelPartitions are the partitions the kernel knows of, which may
	// be stale relative to the table on the disk.
	KernelPartitions() []disk.Partition
	// NVMe returns the admin command set, nil when not an NVMe namespace.
	NVMe() NVMeAdmin
	// ATA returns the ATA command set, nil when the device cannot be an
	// ATA disk.
	ATA() ATAAdmin
	// Settle runs after an erase: drops cached blocks and makes the
	// kernel's partitions match the (now erased) table.
	Settle(ctx context.Context) error
	Close() error
}

// NVMeAdmin is the NVMe admin command passthrough.
type NVMeAdmin interface {
	// Identify returns the namespace id and the Identify Controller and
	// Identify Namespace data (4096 bytes each).
	Identify(ctx context.Context) (nsid uint32, ctrl, ns []byte, err error)
	// Sanitize runs a sanitize (crypto, block or single-pass zero
	// overwrite) and waits until the drive reports it finished.
	Sanitize(ctx context.Context, m Method) error
	// Format runs Format NVM with the given Secure Erase Settings (1 user
	// data erase, 2 cryptographic erase), keeping the LBA format.
	Format(ctx context.Context, c NVMeCaps, ses uint8) error
}

// ATAAdmin is the ATA command passthrough (SG_IO ATA PASS-THROUGH).
type ATAAdmin interface {
	// Identify returns the 512-byte IDENTIFY DEVICE data; an error means
	// the device is not an ATA disk.
	Identify(ctx context.Context) ([]byte, error)
	// SecurityErase sets a temporary user password and runs SECURITY
	// ERASE UNIT (enhanced or normal), waiting up to timeout.
	SecurityErase(ctx context.Context, enhanced bool, timeout time.Duration) error
}

// Probe reads what d can do. An NVMe namespace that cannot be identified is
// an error; a device that does not answer ATA IDENTIFY is simply not ATA.
func Probe(ctx context.Context, d Disk) (Caps, error) {
	c := Caps{Discard: d.CanDiscard()}
	if a := d.NVMe(); a != nil {
		nsid, ctrl, ns, err := a.Identify(ctx)
		if err != nil {
			return Caps{}, fmt.Errorf("probe %s: NVMe identify: %w", d.Path(), err)
		}
		n, err := ParseNVMeIdentify(nsid, ctrl, ns)
		if err != nil {
			return Caps{}, fmt.Errorf("probe %s: %w", d.Path(), err)
		}
		c.NVMe = &n
		c.DiscardZeroes = n.Deallocate && n.DeallocateZeroes
	}
	if a := d.ATA(); a != nil {
		if id, err := a.Identify(ctx); err == nil {
			if ac, err := ParseATAIdentify(id); err == nil {
				c.ATA = &ac
				c.DiscardZeroes = ac.Trim && ac.TrimDeterministic && ac.TrimZeroes
			}
		}
	}
	return c, nil
}

// Opener opens a whole-disk device for erasing.
type Opener func(path string) (Disk, error)

// Eraser runs the three erase steps on devices its Guard allows.
type Eraser struct {
	Guard disk.Guard
	// Open opens devices; nil means Open (the Linux implementation).
	Open Opener
	// Samples is how many random blocks, besides the first and last, the
	// verifier checks; 0 means 16.
	Samples int
	// Log receives one line per erase; nil means slog.Default().
	Log *slog.Logger
}

// Result says how a device was erased and how that was checked.
type Result struct {
	Device string
	Method Method
	Reason string // why this method was chosen
	// Checked is the number of bytes read back to verify the erase.
	Checked int64
}

// Full is erase_devices: the strongest erase dev supports (see Plan),
// verified by sampled reads.
func (e *Eraser) Full(ctx context.Context, dev string) (Result, error) {
	return e.erase(ctx, dev, Plan)
}

// Express is erase_devices_express: a fast hardware erase when the drive
// has one, else the metadata wipe (see PlanExpress), verified.
func (e *Eraser) Express(ctx context.Context, dev string) (Result, error) {
	return e.erase(ctx, dev, PlanExpress)
}

// Metadata is erase_devices_metadata: zeroes every place a partition
// table, RAID superblock, LVM label or filesystem signature can live, on
// the disk and on each of its partitions, then checks they read as zero.
func (e *Eraser) Metadata(ctx context.Context, dev string) (Result, error) {
	return e.erase(ctx, dev, func(Caps) (Method, string) {
		return MetadataOnly, "erase_devices_metadata"
	})
}

func (e *Eraser) erase(ctx context.Context, dev string, plan func(Caps) (Method, string)) (res Result, err error) {
	if err := e.Guard.Check(dev); err != nil {
		return Result{}, fmt.Errorf("erase %s: %w", dev, err)
	}
	open := e.Open
	if open == nil {
		open = Open
	}
	d, err := open(dev)
	if err != nil {
		return Result{}, fmt.Errorf("erase %s: %w", dev, err)
	}
	defer func() {
		if cerr := d.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("erase %s: close: %w", dev, cerr)
		}
	}()
	res = Result{Device: dev}
	var caps Caps
	probe := true
	if m, _ := plan(Caps{}); m == MetadataOnly {
		probe = false // the metadata wipe needs no capabilities
	}
	if probe {
		if caps, err = Probe(ctx, d); err != nil {
			return res, fmt.Errorf("erase %s: %w", dev, err)
		}
	}
	res.Method, res.Reason = plan(caps)
	if res.Method == MethodNone {
		return res, fmt.Errorf("erase %s: %s", dev, res.Reason)
	}
	log := e.Log
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "erasing disk", "device", dev, "method", res.Method, "reason", res.Reason)
	start := time.Now()

	v, err := Arm(d, res.Method, e.samples())
	if err != nil {
		return res, fmt.Errorf("erase %s: before %s: %w", dev, res.Method, err)
	}
	if err := run(ctx, d, res.Method, caps, v.regions); err != nil {
		return res, fmt.Errorf("erase %s by %s: %w", dev, res.Method, err)
	}
	if err := d.Settle(ctx); err != nil {
		return res, fmt.Errorf("erase %s: after %s: %w", dev, res.Method, err)
	}
	if res.Checked, err = v.Verify(); err != nil {
		return res, fmt.Errorf("erase %s by %s: verify: %w", dev, res.Method, err)
	}
	log.InfoContext(ctx, "disk erased", "device", dev, "method", res.Method, "checked_bytes", res.Checked, "duration", time.Since(start))
	return res, nil
}

func (e *Eraser) samples() int {
	if e.Samples > 0 {
		return e.Samples
	}
	return 16
}

// ErrUnsupported is returned by a Disk for an operation it cannot do.
var ErrUnsupported = errors.New("operation not supported by the device")

func run(ctx context.Context, d Disk, m Method, c Caps, regions []region) error {
	switch m {
	case NVMeSanitizeCrypto, NVMeSanitizeBlock, NVMeSanitizeOverwrite:
		return d.NVMe().Sanitize(ctx, m)
	case NVMeFormatCrypto:
		return d.NVMe().Format(ctx, *c.NVMe, 2)
	case NVMeFormatUserData:
		return d.NVMe().Format(ctx, *c.NVMe, 1)
	case ATASecurityErase, ATAEnhancedSecurityErase:
		enhanced := m == ATAEnhancedSecurityErase
		minutes := c.ATA.EraseMinutes
		if enhanced {
			minutes = c.ATA.EnhancedEraseMinutes
		}
		timeout := 24 * time.Hour // the drive did not say
		if minutes > 0 {
			timeout = time.Duration(minutes)*2*time.Minute + 10*time.Minute
		}
		return d.ATA().SecurityErase(ctx, enhanced, timeout)
	case Discard:
		return d.Discard(ctx, 0, d.Size())
	case ZeroOverwrite:
		return d.ZeroRange(ctx, 0, d.Size())
	case MetadataOnly:
		return zeroRegions(ctx, d, regions)
	}
	return fmt.Errorf("unknown erase method %q", m)
}
