package erase

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/agent/disk"
)

// Open opens a whole-disk block device for erasing with the Linux ioctls:
// O_DIRECT reads and writes, BLKDISCARD, BLKZEROOUT, NVMe admin passthrough
// on nvme* namespaces and SG_IO ATA PASS-THROUGH on sd* disks.
//
// Image files are opened without O_DIRECT: their page cache is their
// content, and their sizes need not be sector multiples.
func Open(path string) (Disk, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	block := fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
	flags := os.O_RDWR
	if block {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &linuxDisk{f: f, path: path, direct: block, block: block, ss: 512}
	if n, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET); err == nil && n >= 512 {
		d.ss = n
	}
	if d.size, err = f.Seek(0, 2); err != nil {
		f.Close()
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		d.name = filepath.Base(real)
	}
	return d, nil
}

type linuxDisk struct {
	f      *os.File
	path   string
	name   string // kernel name, "nvme0n1"
	direct bool
	block  bool
	ss     int
	size   int64
}

func (d *linuxDisk) Path() string    { return d.path }
func (d *linuxDisk) Size() int64     { return d.size }
func (d *linuxDisk) SectorSize() int { return d.ss }
func (d *linuxDisk) Sync() error     { return d.f.Sync() }
func (d *linuxDisk) Close() error    { return d.f.Close() }

// alignedBuf returns n bytes aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (align - 1))
	if off != 0 {
		off = align - off
	}
	return b[off : off+n]
}

func (d *linuxDisk) ReadAt(p []byte, off int64) (int, error) {
	if !d.direct {
		return d.f.ReadAt(p, off)
	}
	b := alignedBuf(len(p))
	n, err := d.f.ReadAt(b, off)
	copy(p, b[:n])
	return n, err
}

func (d *linuxDisk) WriteAt(p []byte, off int64) (int, error) {
	if !d.direct {
		return d.f.WriteAt(p, off)
	}
	b := alignedBuf(len(p))
	copy(b, p)
	return d.f.WriteAt(b, off)
}

func (d *linuxDisk) sysfs(attr string) string {
	b, err := os.ReadFile(filepath.Join(disk.DefaultSysRoot, "class/block", d.name, attr))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (d *linuxDisk) CanDiscard() bool {
	n, err := strconv.ParseInt(d.sysfs("queue/discard_max_bytes"), 10, 64)
	return err == nil && n > 0
}

// rangeIoctl runs BLKDISCARD or BLKZEROOUT over [off, off+n) in 1 GiB
// steps, so a cancelled context stops a long erase.
func (d *linuxDisk) rangeIoctl(ctx context.Context, req uintptr, what string, off, n int64) error {
	const step = 1 << 30
	for pos := off; pos < off+n; pos += step {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := [2]uint64{uint64(pos), uint64(min(step, off+n-pos))}
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), req, uintptr(unsafe.Pointer(&r))); errno != 0 {
			return fmt.Errorf("%s at offset %d: %w", what, pos, errno)
		}
	}
	return nil
}

func (d *linuxDisk) Discard(ctx context.Context, off, n int64) error {
	if !d.block {
		return fmt.Errorf("discard %s: %w", d.path, ErrUnsupported)
	}
	return d.rangeIoctl(ctx, unix.BLKDISCARD, "BLKDISCARD", off, n)
}

func (d *linuxDisk) ZeroRange(ctx context.Context, off, n int64) error {
	if d.block {
		return d.rangeIoctl(ctx, unix.BLKZEROOUT, "BLKZEROOUT", off, n)
	}
	zero := alignedBuf(1 << 20)
	for pos := off; pos < off+n; pos += int64(len(zero)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := d.f.WriteAt(zero[:min(int64(len(zero)), off+n-pos)], pos); err != nil {
			return err
		}
	}
	return d.f.Sync()
}

func (d *linuxDisk) KernelPartitions() []disk.Partition {
	if !d.block {
		return nil
	}
	ps, _ := disk.KernelPartitions(d.path)
	return ps
}

func (d *linuxDisk) Settle(ctx context.Context) error {
	if !d.block {
		return nil
	}
	// Partition devices have their own page cache; drop it so nothing
	// (blkid, the next step) reads signatures that are gone from the disk.
	for _, p := range d.KernelPartitions() {
		if f, err := os.Open("/dev/" + p.Name); err == nil {
			unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0)
			f.Close()
		}
	}
	if err := unix.IoctlSetInt(int(d.f.Fd()), unix.BLKFLSBUF, 0); err != nil {
		return fmt.Errorf("flush buffers of %s: %w", d.path, err)
	}
	return disk.RereadPartitions(ctx, d.path)
}

func (d *linuxDisk) NVMe() NVMeAdmin {
	if d.block && strings.HasPrefix(d.name, "nvme") {
		return nvmeAdmin{d}
	}
	return nil
}

func (d *linuxDisk) ATA() ATAAdmin {
	if d.block && strings.HasPrefix(d.name, "sd") {
		return ataAdmin{d}
	}
	return nil
}

// --- NVMe admin passthrough (linux/nvme_ioctl.h) ---

type nvmePassthru struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	CDW2, CDW3  uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	CDW10       uint32
	CDW11       uint32
	CDW12       uint32
	CDW13       uint32
	CDW14       uint32
	CDW15       uint32
	TimeoutMS   uint32
	Result      uint32
}

const (
	nvmeIoctlID       = 0x4e40     // _IO('N', 0x40)
	nvmeIoctlAdminCmd = 0xc0484e41 // _IOWR('N', 0x41, struct nvme_admin_cmd)

	nvmeOpGetLogPage = 0x02
	nvmeOpIdentify   = 0x06
	nvmeOpFormat     = 0x80
	nvmeOpSanitize   = 0x84
)

type nvmeAdmin struct{ d *linuxDisk }

func (a nvmeAdmin) admin(cmd *nvmePassthru, data []byte) error {
	if len(data) > 0 {
		cmd.Addr = uint64(uintptr(unsafe.Pointer(&data[0])))
		cmd.DataLen = uint32(len(data))
	}
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, a.d.f.Fd(), nvmeIoctlAdminCmd, uintptr(unsafe.Pointer(cmd)))
	runtime.KeepAlive(data)
	if errno != 0 {
		return fmt.Errorf("NVMe admin command 0x%02x: %w", cmd.Opcode, errno)
	}
	if r != 0 {
		return fmt.Errorf("NVMe admin command 0x%02x failed with status 0x%x", cmd.Opcode, r)
	}
	return nil
}

func (a nvmeAdmin) Identify(ctx context.Context) (uint32, []byte, []byte, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, a.d.f.Fd(), nvmeIoctlID, 0)
	if errno != 0 {
		return 0, nil, nil, fmt.Errorf("NVME_IOCTL_ID: %w", errno)
	}
	nsid := uint32(r)
	ctrl := make([]byte, 4096)
	if err := a.admin(&nvmePassthru{Opcode: nvmeOpIdentify, CDW10: 1}, ctrl); err != nil {
		return 0, nil, nil, fmt.Errorf("identify controller: %w", err)
	}
	ns := make([]byte, 4096)
	if err := a.admin(&nvmePassthru{Opcode: nvmeOpIdentify, NSID: nsid, CDW10: 0}, ns); err != nil {
		return 0, nil, nil, fmt.Errorf("identify namespace %d: %w", nsid, err)
	}
	return nsid, ctrl, ns, nil
}

func (a nvmeAdmin) Sanitize(ctx context.Context, m Method) error {
	var cdw10 uint32
	switch m {
	case NVMeSanitizeBlock:
		cdw10 = 2
	case NVMeSanitizeOverwrite:
		cdw10 = 3 | 1<<4 // one pass; pattern 0 in CDW11
	case NVMeSanitizeCrypto:
		cdw10 = 4
	default:
		return fmt.Errorf("sanitize: unexpected method %s", m)
	}
	if err := a.admin(&nvmePassthru{Opcode: nvmeOpSanitize, CDW10: cdw10, TimeoutMS: 60000}, nil); err != nil {
		return fmt.Errorf("start sanitize: %w", err)
	}
	// The command returns at once; the sanitize status log (LID 0x81)
	// says when the drive is done.
	for {
		log := make([]byte, 512)
		cmd := nvmePassthru{Opcode: nvmeOpGetLogPage, NSID: 0xffffffff, CDW10: 0x81 | (512/4-1)<<16}
		if err := a.admin(&cmd, log); err != nil {
			return fmt.Errorf("read sanitize status: %w", err)
		}
		switch status := log[2] & 7; status {
		case 1, 4:
			return nil
		case 3:
			return errors.New("the drive reports the sanitize failed")
		case 2:
		default:
			return fmt.Errorf("unexpected sanitize status %d", status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for sanitize (it continues in the drive): %w", ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

func (a nvmeAdmin) Format(ctx context.Context, c NVMeCaps, ses uint8) error {
	cdw10 := uint32(c.LBAFormat&0x0f) | uint32(c.LBAFormat>>4)<<12 | uint32(ses)<<9 | uint32(c.ProtectionInfo)<<5
	if c.MetadataAtEnd {
		cdw10 |= 1 << 4
	}
	if c.ProtectionFirst {
		cdw10 |= 1 << 8
	}
	nsid := c.NSID
	if c.FormatAllNamespaces {
		nsid = 0xffffffff
	}
	// A format runs inside the command; allow it an hour.
	if err := a.admin(&nvmePassthru{Opcode: nvmeOpFormat, NSID: nsid, CDW10: cdw10, TimeoutMS: 3600_000}, nil); err != nil {
		return fmt.Errorf("format NVM (SES %d): %w", ses, err)
	}
	return nil
}

// --- ATA via SG_IO ATA PASS-THROUGH (16) ---

// sgIOHdr is struct sg_io_hdr (scsi/sg.h) for 64-bit Linux.
type sgIOHdr struct {
	InterfaceID    int32
	DxferDirection int32
	CmdLen         uint8
	MxSbLen        uint8
	IovecCount     uint16
	DxferLen       uint32
	Dxferp         uintptr
	Cmdp           uintptr
	Sbp            uintptr
	Timeout        uint32
	Flags          uint32
	PackID         int32
	UsrPtr         uintptr
	Status         uint8
	MaskedStatus   uint8
	MsgStatus      uint8
	SbLenWr        uint8
	HostStatus     uint16
	DriverStatus   uint16
	Resid          int32
	Duration       uint32
	Info           uint32
}

const (
	sgIO          = 0x2285
	sgDxferNone   = -1
	sgDxferToDev  = -2
	sgDxferFromDv = -3

	ataIdentify            = 0xec
	ataSecuritySetPassword = 0xf1
	ataSecurityErasePrep   = 0xf3
	ataSecurityEraseUnit   = 0xf4
	ataSecurityDisablePW   = 0xf6
)

type ataAdmin struct{ d *linuxDisk }

// ataPassword is the temporary user password set for the erase; a
// successful SECURITY ERASE UNIT clears it again.
var ataPassword = []byte("kiln-erase")

// ata runs one ATA command. proto is 3 (non-data), 4 (PIO in) or 5 (PIO
// out); data is one 512-byte sector for the PIO protocols.
func (a ataAdmin) ata(cmd byte, proto byte, data []byte, timeout time.Duration) error {
	var cdb [16]byte
	cdb[0] = 0x85
	cdb[1] = proto << 1
	dir := int32(sgDxferNone)
	switch proto {
	case 4:
		cdb[2] = 0x0e // T_DIR from device, BYT_BLOK, T_LENGTH in sector count
		cdb[6] = 1
		dir = sgDxferFromDv
	case 5:
		cdb[2] = 0x06
		cdb[6] = 1
		dir = sgDxferToDev
	}
	cdb[14] = cmd
	sense := make([]byte, 32)
	hdr := sgIOHdr{
		InterfaceID:    'S',
		DxferDirection: dir,
		CmdLen:         16,
		MxSbLen:        uint8(len(sense)),
		Cmdp:           uintptr(unsafe.Pointer(&cdb[0])),
		Sbp:            uintptr(unsafe.Pointer(&sense[0])),
		Timeout:        uint32(min(timeout.Milliseconds(), 1<<31)),
	}
	if len(data) > 0 {
		hdr.Dxferp = uintptr(unsafe.Pointer(&data[0]))
		hdr.DxferLen = uint32(len(data))
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, a.d.f.Fd(), sgIO, uintptr(unsafe.Pointer(&hdr)))
	runtime.KeepAlive(data)
	runtime.KeepAlive(sense)
	runtime.KeepAlive(&cdb)
	if errno != 0 {
		return fmt.Errorf("ATA command 0x%02x: SG_IO: %w", cmd, errno)
	}
	if hdr.Status != 0 || hdr.HostStatus != 0 || hdr.DriverStatus&^0x08 != 0 {
		return fmt.Errorf("ATA command 0x%02x failed: status 0x%x host 0x%x driver 0x%x sense %x", cmd, hdr.Status, hdr.HostStatus, hdr.DriverStatus, sense[:hdr.SbLenWr])
	}
	return nil
}

func (a ataAdmin) Identify(ctx context.Context) ([]byte, error) {
	id := make([]byte, 512)
	if err := a.ata(ataIdentify, 4, id, 10*time.Second); err != nil {
		return nil, err
	}
	if allZero(id) {
		return nil, errors.New("ATA IDENTIFY returned no data")
	}
	return id, nil
}

func (a ataAdmin) SecurityErase(ctx context.Context, enhanced bool, timeout time.Duration) error {
	pw := make([]byte, 512)
	copy(pw[2:34], ataPassword) // word 0: identifier user (bit 0 = 0)
	if err := a.ata(ataSecuritySetPassword, 5, pw, 30*time.Second); err != nil {
		return fmt.Errorf("set temporary ATA password: %w", err)
	}
	erase := func() error {
		if err := a.ata(ataSecurityErasePrep, 3, nil, 30*time.Second); err != nil {
			return fmt.Errorf("SECURITY ERASE PREPARE: %w", err)
		}
		unit := make([]byte, 512)
		copy(unit, pw)
		if enhanced {
			unit[0] |= 2
		}
		if err := a.ata(ataSecurityEraseUnit, 5, unit, timeout); err != nil {
			return fmt.Errorf("SECURITY ERASE UNIT: %w", err)
		}
		return nil
	}
	if err := erase(); err != nil {
		// Do not leave the drive locked with our password.
		if derr := a.ata(ataSecurityDisablePW, 5, pw, 30*time.Second); derr != nil {
			return fmt.Errorf("%w (and removing the temporary password %q failed: %v)", err, ataPassword, derr)
		}
		return err
	}
	return nil
}
