package raid

import (
	"context"
	"strings"

	"github.com/kilnhq/kiln/agent/disk"
)

// Assemble starts the md arrays the disks hold (mdadm --assemble --scan),
// as IPA does when its hardware manager starts in the ramdisk: a machine
// whose RAID was built by an earlier clean boots the agent again for the
// deploy, and only a running array is the root device the image goes to.
// It is best effort: disks without arrays make mdadm fail, which is only
// logged. It reports the arrays running afterwards.
func (m *Manager) Assemble(ctx context.Context) []string {
	out, err := m.opts.Run(ctx, "mdadm", "--assemble", "--scan")
	if err != nil {
		m.opts.Log.Debug("mdadm --assemble --scan: no array assembled", "out", strings.TrimSpace(string(out)), "err", err)
	}
	arrays, err := m.arrays()
	if err != nil {
		m.opts.Log.Warn("reading the md arrays", "err", err)
		return nil
	}
	if len(arrays) > 0 {
		m.opts.Log.Info("software RAID arrays assembled", "arrays", arrays)
	}
	return arrays
}

// arrays names the running md arrays (partitions of arrays aside).
func (m *Manager) arrays() ([]string, error) {
	all, err := disk.MDArrays(m.opts.SysRoot)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, a := range all {
		if len(a.Members) > 0 {
			names = append(names, a.Name)
		}
	}
	return names, nil
}
