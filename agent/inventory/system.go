package inventory

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/memory"
	"github.com/kilnhq/kiln/proto"
)

// readCPU parses root/proc/cpuinfo.
func readCPU(root string) (proto.CPU, error) {
	f, err := os.Open(filepath.Join(root, "proc/cpuinfo"))
	if err != nil {
		return proto.CPU{}, err
	}
	defer f.Close()
	cpu, err := ParseCPUInfo(f)
	if err != nil {
		return cpu, err
	}
	cpu.Architecture = architecture()
	if mhz := readString(filepath.Join(root, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")); mhz != "" {
		// The maximum frequency is what lscpu (and so IPA) reports first.
		if khz, err := strconv.ParseInt(mhz, 10, 64); err == nil && khz > 0 {
			cpu.Frequency = strconv.FormatFloat(float64(khz)/1000, 'f', 3, 64)
		}
	}
	return cpu, nil
}

// ParseCPUInfo reads /proc/cpuinfo: the number of logical CPUs, the first
// model name, MHz and flag list, and the number of distinct physical ids
// (sockets; 1 when the kernel reports none). Architecture is left empty.
func ParseCPUInfo(r io.Reader) (proto.CPU, error) {
	var cpu proto.CPU
	sockets := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "processor":
			cpu.Count++
		case "model name", "Model Name", "cpu model":
			if cpu.ModelName == "" {
				cpu.ModelName = val
			}
		case "cpu MHz", "clock":
			if cpu.Frequency == "" {
				cpu.Frequency = strings.TrimSuffix(val, "MHz")
			}
		case "flags", "Features":
			if cpu.Flags == nil {
				cpu.Flags = strings.Fields(val)
			}
		case "physical id":
			sockets[val] = true
		}
	}
	if err := sc.Err(); err != nil {
		return cpu, fmt.Errorf("read cpuinfo: %w", err)
	}
	if cpu.Count == 0 {
		return cpu, fmt.Errorf("parse cpuinfo: no processor entries: %w", errNoData)
	}
	if cpu.Flags == nil {
		cpu.Flags = []string{}
	}
	cpu.SocketCount = max(len(sockets), 1)
	return cpu, nil
}

// architecture names the CPU architecture as uname -m does.
func architecture() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	case "ppc64le":
		return "ppc64le"
	case "s390x":
		return "s390x"
	case "riscv64":
		return "riscv64"
	}
	return runtime.GOARCH
}

// readMemory takes the usable total from root/proc/meminfo (as IPA, via
// psutil) and the installed size from ghw, which sums the online memory blocks
// of root/sys/devices/system/memory. When that is unavailable, physical_mb is
// the usable total rounded up to a GiB.
func readMemory(ctx context.Context, root string) (proto.Memory, error) {
	f, err := os.Open(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return proto.Memory{}, err
	}
	defer f.Close()
	total, err := ParseMemTotal(f)
	if err != nil {
		return proto.Memory{}, err
	}
	m := proto.Memory{Total: total}
	info, err := memory.New(ctx, ghw.WithChroot(root), ghw.WithDisableTools(), ghw.WithDisableWarnings())
	if err == nil && info.TotalPhysicalBytes > total {
		m.PhysicalMB = info.TotalPhysicalBytes >> 20
	} else {
		// No memory blocks in sysfs (ghw then reports the usable total):
		const gib = 1 << 30
		m.PhysicalMB = ((total + gib - 1) / gib * gib) >> 20
	}
	return m, nil
}

// ParseMemTotal returns MemTotal from /proc/meminfo, in bytes.
func ParseMemTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal %q: %w", f[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo has no MemTotal: %w", errNoData)
}

// readSystemVendor reads DMI identity from root/sys/class/dmi/id.
func readSystemVendor(root string) proto.SystemVendor {
	dmi := func(name string) string { return readString(filepath.Join(root, "sys/class/dmi/id", name)) }
	return proto.SystemVendor{
		ProductName:  dmi("product_name"),
		SerialNumber: dmi("product_serial"),
		Manufacturer: dmi("sys_vendor"),
		Firmware: proto.Firmware{
			Vendor:    dmi("bios_vendor"),
			Version:   dmi("bios_version"),
			BuildDate: dmi("bios_date"),
		},
	}
}
