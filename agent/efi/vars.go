// Package efi reads and writes UEFI variables through efivarfs and encodes
// the boot entries (EFI_LOAD_OPTION with a hard-drive media device path) that
// make firmware boot an installed system, as efibootmgr does, without
// shipping efibootmgr in the ramdisk.
package efi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultVarsDir is where Linux mounts efivarfs.
const DefaultVarsDir = "/sys/firmware/efi/efivars"

// GlobalGUID is EFI_GLOBAL_VARIABLE, the namespace of Boot#### and BootOrder.
const GlobalGUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"

// Variable attributes.
const (
	NonVolatile       = 0x1
	BootserviceAccess = 0x2
	RuntimeAccess     = 0x4
	// BootAttrs are the attributes of Boot#### and BootOrder.
	BootAttrs = NonVolatile | BootserviceAccess | RuntimeAccess
)

// fsImmutable is FS_IMMUTABLE_FL (linux/fs.h), which efivarfs sets on
// variables so that a stray write cannot brick firmware.
const fsImmutable = 0x10

// efivarfsMagic is efivarfs' statfs f_type.
const efivarfsMagic = 0xde5e81e4

// Vars is a directory of variables in efivarfs' format: one file per
// variable named <Name>-<guid>, holding a 4-byte little-endian attribute
// word and the data. Dir is efivarfs itself on a machine, any directory in
// tests.
type Vars struct {
	Dir string
}

func (v Vars) path(name, guid string) string {
	return filepath.Join(v.Dir, name+"-"+strings.ToLower(guid))
}

// Get returns a variable's attributes and data; the error wraps
// fs.ErrNotExist when it is not set.
func (v Vars) Get(name, guid string) (uint32, []byte, error) {
	b, err := os.ReadFile(v.path(name, guid))
	if err != nil {
		return 0, nil, fmt.Errorf("read EFI variable %s: %w", name, err)
	}
	if len(b) < 4 {
		return 0, nil, fmt.Errorf("read EFI variable %s: %d bytes, no attributes", name, len(b))
	}
	return binary.LittleEndian.Uint32(b), b[4:], nil
}

// Set writes a variable. efivarfs takes the attributes and data in a single
// write(2), and marks most variables immutable: that flag is cleared first.
func (v Vars) Set(name, guid string, attrs uint32, data []byte) error {
	p := v.path(name, guid)
	if err := clearImmutable(p); err != nil {
		return fmt.Errorf("write EFI variable %s: %w", name, err)
	}
	flags := os.O_WRONLY | os.O_CREATE
	if !isEfivarfs(v.Dir) {
		flags |= os.O_TRUNC // efivarfs replaces the value; a plain file must be cut
	}
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return fmt.Errorf("write EFI variable %s: %w", name, err)
	}
	buf := make([]byte, 4+len(data))
	binary.LittleEndian.PutUint32(buf, attrs)
	copy(buf[4:], data)
	n, err := f.Write(buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != len(buf) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(buf))
	}
	if err != nil {
		return fmt.Errorf("write EFI variable %s: %w", name, err)
	}
	return nil
}

// Delete removes a variable; a variable that is not set is no error.
func (v Vars) Delete(name, guid string) error {
	p := v.path(name, guid)
	if err := clearImmutable(p); err != nil {
		return fmt.Errorf("delete EFI variable %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete EFI variable %s: %w", name, err)
	}
	return nil
}

// Names lists the names of the variables in namespace guid.
func (v Vars) Names(guid string) ([]string, error) {
	ents, err := os.ReadDir(v.Dir)
	if err != nil {
		return nil, fmt.Errorf("list EFI variables: %w", err)
	}
	suffix := "-" + strings.ToLower(guid)
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(strings.ToLower(e.Name()), suffix); ok {
			out = append(out, e.Name()[:len(n)])
		}
	}
	return out, nil
}

// clearImmutable drops FS_IMMUTABLE_FL from p if it is set. A missing file
// or a filesystem without inode flags (tmpfs in tests) needs nothing.
func clearImmutable(p string) error {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read inode flags of %s: %w", p, err)
	}
	if flags&fsImmutable == 0 {
		return nil
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutable)); err != nil {
		return fmt.Errorf("clear the immutable flag of %s: %w", p, err)
	}
	return nil
}

func isEfivarfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && uint32(st.Type) == efivarfsMagic
}
