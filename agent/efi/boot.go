package efi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// BootEntry is one Boot#### variable.
type BootEntry struct {
	Number uint16
	Option LoadOption
}

// BootEntries reads every Boot#### variable, in number order. Entries that
// do not decode are skipped: firmware keeps entries of its own making that
// this package need not understand.
func (v Vars) BootEntries() ([]BootEntry, error) {
	names, err := v.Names(GlobalGUID)
	if err != nil {
		return nil, err
	}
	var out []BootEntry
	for _, name := range names {
		n, ok := bootNumber(name)
		if !ok {
			continue
		}
		_, data, err := v.Get(name, GlobalGUID)
		if err != nil {
			return nil, err
		}
		o, err := ParseLoadOption(data)
		if err != nil {
			continue
		}
		out = append(out, BootEntry{Number: n, Option: o})
	}
	slices.SortFunc(out, func(a, b BootEntry) int { return int(a.Number) - int(b.Number) })
	return out, nil
}

func bootNumber(name string) (uint16, bool) {
	hex, ok := strings.CutPrefix(name, "Boot")
	if !ok || len(hex) != 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 16)
	return uint16(n), err == nil
}

// BootOrder reads BootOrder; unset is an empty order.
func (v Vars) BootOrder() ([]uint16, error) {
	_, data, err := v.Get("BootOrder", GlobalGUID)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]uint16, len(data)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(data[2*i:])
	}
	return out, nil
}

// SetBootOrder writes BootOrder.
func (v Vars) SetBootOrder(order []uint16) error {
	b := make([]byte, 2*len(order))
	for i, n := range order {
		binary.LittleEndian.PutUint16(b[2*i:], n)
	}
	return v.Set("BootOrder", GlobalGUID, BootAttrs, b)
}

// AddBootEntry writes opt as a new Boot#### entry and puts it first in
// BootOrder. Entries with the same description are removed first, as IPA
// does with efibootmgr, so a redeploy does not pile up entries; the new
// entry takes the lowest free number.
func (v Vars) AddBootEntry(opt LoadOption) (uint16, error) {
	data, err := opt.MarshalBinary()
	if err != nil {
		return 0, err
	}
	names, err := v.Names(GlobalGUID)
	if err != nil {
		return 0, err
	}
	used := map[uint16]bool{}
	var removed []uint16
	for _, name := range names {
		n, ok := bootNumber(name)
		if !ok {
			continue
		}
		_, old, err := v.Get(name, GlobalGUID)
		if err != nil {
			return 0, err
		}
		if o, err := ParseLoadOption(old); err == nil && o.Description == opt.Description {
			if err := v.Delete(name, GlobalGUID); err != nil {
				return 0, err
			}
			removed = append(removed, n)
			continue
		}
		used[n] = true
	}
	num := -1
	for n := range 0x10000 {
		if !used[uint16(n)] {
			num = n
			break
		}
	}
	if num < 0 {
		return 0, errors.New("no free Boot#### number")
	}
	name := fmt.Sprintf("Boot%04X", num)
	if err := v.Set(name, GlobalGUID, BootAttrs, data); err != nil {
		return 0, err
	}
	order, err := v.BootOrder()
	if err != nil {
		return 0, err
	}
	next := []uint16{uint16(num)}
	for _, n := range order {
		if n != uint16(num) && !slices.Contains(removed, n) {
			next = append(next, n)
		}
	}
	if err := v.SetBootOrder(next); err != nil {
		return 0, err
	}
	return uint16(num), nil
}
