package erase

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/kilnhq/kiln/agent/disk"
)

// fakeDisk is an in-memory disk with scriptable misbehaviour.
type fakeDisk struct {
	path string
	data []byte
	// ignoreWrites makes WriteAt report success and change nothing, like
	// a device in a write-dropping failure mode.
	ignoreWrites bool
	canDiscard   bool
	// discardZeroes: discarded blocks read as zero; else they keep data.
	discardZeroes bool
	nvme          *fakeNVMe
	ata           *fakeATA
	settled       int
	ops           []string
}

func newFake(size int) *fakeDisk {
	d := &fakeDisk{path: "/dev/fake0", data: make([]byte, size)}
	rand.Read(d.data) // a used disk
	return d
}

func (d *fakeDisk) Path() string    { return d.path }
func (d *fakeDisk) Size() int64     { return int64(len(d.data)) }
func (d *fakeDisk) SectorSize() int { return 512 }
func (d *fakeDisk) Sync() error     { return nil }
func (d *fakeDisk) Close() error    { return nil }
func (d *fakeDisk) CanDiscard() bool {
	return d.canDiscard
}

func (d *fakeDisk) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > d.Size() {
		return 0, fmt.Errorf("read past end")
	}
	return copy(p, d.data[off:]), nil
}

func (d *fakeDisk) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > d.Size() {
		return 0, fmt.Errorf("write past end")
	}
	if d.ignoreWrites {
		return len(p), nil
	}
	return copy(d.data[off:], p), nil
}

func (d *fakeDisk) Discard(ctx context.Context, off, n int64) error {
	d.ops = append(d.ops, "discard")
	if d.discardZeroes && !d.ignoreWrites {
		clear(d.data[off : off+n])
	}
	return nil
}

func (d *fakeDisk) ZeroRange(ctx context.Context, off, n int64) error {
	d.ops = append(d.ops, "zero")
	if !d.ignoreWrites {
		clear(d.data[off : off+n])
	}
	return nil
}

func (d *fakeDisk) KernelPartitions() []disk.Partition { return nil }
func (d *fakeDisk) Settle(ctx context.Context) error   { d.settled++; return nil }

func (d *fakeDisk) NVMe() NVMeAdmin {
	if d.nvme == nil {
		return nil
	}
	d.nvme.d = d
	return d.nvme
}

func (d *fakeDisk) ATA() ATAAdmin {
	if d.ata == nil {
		return nil
	}
	d.ata.d = d
	return d.ata
}

type fakeNVMe struct {
	d         *fakeDisk
	ctrl, ns  []byte
	noop      bool // the drive accepts commands and does nothing
	lastCmd   string
	lastSES   uint8
	lastNSID  uint32
	lastCDW10 uint32
}

func (n *fakeNVMe) Identify(ctx context.Context) (uint32, []byte, []byte, error) {
	return 1, n.ctrl, n.ns, nil
}

func (n *fakeNVMe) Sanitize(ctx context.Context, m Method) error {
	n.lastCmd = string(m)
	if n.noop {
		return nil
	}
	if m == NVMeSanitizeCrypto {
		rand.Read(n.d.data) // the old key is gone: data reads as noise
	} else {
		clear(n.d.data)
	}
	return nil
}

func (n *fakeNVMe) Format(ctx context.Context, c NVMeCaps, ses uint8) error {
	n.lastCmd, n.lastSES, n.lastNSID = "format", ses, c.NSID
	if c.FormatAllNamespaces {
		n.lastNSID = 0xffffffff
	}
	if !n.noop {
		rand.Read(n.d.data)
	}
	return nil
}

type fakeATA struct {
	d        *fakeDisk
	id       []byte
	enhanced bool
	called   bool
}

func (a *fakeATA) Identify(ctx context.Context) ([]byte, error) {
	if a.id == nil {
		return nil, fmt.Errorf("not ATA")
	}
	return a.id, nil
}

func (a *fakeATA) SecurityErase(ctx context.Context, enhanced bool, timeout time.Duration) error {
	a.called, a.enhanced = true, enhanced
	for i := range a.d.data {
		a.d.data[i] = 0xff // some drives erase to ones
	}
	return nil
}

// nvmeIdentify builds Identify Controller/Namespace data with the given
// SANICAP, OACS, FNA, ONCS and DLFEAT values.
func nvmeIdentify(sanicap uint32, oacs uint16, fna byte, oncs uint16, dlfeat byte) (ctrl, ns []byte) {
	ctrl, ns = make([]byte, 4096), make([]byte, 4096)
	ctrl[256], ctrl[257] = byte(oacs), byte(oacs>>8)
	ctrl[328], ctrl[329], ctrl[330], ctrl[331] = byte(sanicap), byte(sanicap>>8), byte(sanicap>>16), byte(sanicap>>24)
	ctrl[520], ctrl[521] = byte(oncs), byte(oncs>>8)
	ctrl[524] = fna
	ns[33] = dlfeat
	return ctrl, ns
}

// ataIdentifyData builds IDENTIFY DEVICE data with words 128 (security), 69
// and 169 (TRIM) and the erase times.
func ataIdentifyData(security, w69, w169 uint16, eraseTime, enhancedTime uint16) []byte {
	id := make([]byte, 512)
	put := func(w int, v uint16) { id[2*w], id[2*w+1] = byte(v), byte(v>>8) }
	put(0, 0x0040)
	put(128, security)
	put(69, w69)
	put(169, w169)
	put(89, eraseTime)
	put(90, enhancedTime)
	return id
}
