package bmcsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/internal/testtool"
	"github.com/stmcginnis/gofish/schemas"
)

func TestQEMUArgs(t *testing.T) {
	noROM := ""
	q := &QEMU{cfg: QEMUConfig{Dir: "/vm/x", Accel: "tcg", CPUs: 2, MemoryMiB: 1024, MAC: "52:54:00:00:00:01",
		Disk: "/vm/x/disk.qcow2", DiskFormat: "qcow2", BootFile: "http://10.0.2.2:8080/boot.ipxe", TFTPDir: "/tftp",
		HostFwd: []string{"tcp:127.0.0.1:19999-:9999"}, UEFI: true, OVMFCode: "/code.fd", NICROMFile: &noROM},
		inv: Inventory{UUID: "u", SerialNumber: "s,1"}}
	for _, tc := range []struct {
		target, iso string
		order       []string
	}{
		{TargetPxe, "", []string{"nic", "disk"}},
		{TargetNone, "", []string{"disk", "nic"}},
		{TargetHdd, "/i.iso", []string{"disk", "cd", "nic"}},
		{TargetCd, "/i.iso", []string{"cd", "disk", "nic"}},
	} {
		args, order := q.args(tc.target, tc.iso)
		if !slices.Equal(order, tc.order) {
			t.Errorf("%s: order %v, want %v", tc.target, order, tc.order)
		}
		line := strings.Join(args, " ")
		for _, want := range []string{"-machine q35", "-accel tcg", "-no-reboot", "-m 1024",
			"virtio-net-pci,netdev=n0,id=nic0,mac=52:54:00:00:00:01,bootindex=" + itoa(slices.Index(order, "nic")+1) + ",romfile=",
			"user,id=n0,tftp=/tftp,bootfile=http://10.0.2.2:8080/boot.ipxe,hostfwd=tcp:127.0.0.1:19999-:9999",
			"format=qcow2", "bootindex=" + itoa(slices.Index(order, "disk")+1),
			"if=pflash,format=raw,unit=0,readonly=on,file=/code.fd", "file=/vm/x/OVMF_VARS.fd",
			"type=1,serial=s,,1"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: args lack %q: %s", tc.target, want, line)
			}
		}
		if (tc.iso != "") != strings.Contains(line, "media=cdrom") {
			t.Errorf("%s: cdrom presence wrong: %s", tc.target, line)
		}
	}
}

// TestQEMUTapNIC: a Tap NIC replaces user networking, and QEMU runs in
// the tap's namespace; user-networking options with a tap are refused.
func TestQEMUTapNIC(t *testing.T) {
	q := &QEMU{cfg: QEMUConfig{Dir: "/vm/x", Binary: "qemu-system-x86_64", Accel: "tcg", CPUs: 2, MemoryMiB: 1024,
		MAC: "52:54:00:00:00:02", Tap: "tap0", NetNS: "lab1"}, inv: Inventory{UUID: "u", SerialNumber: "s"}}
	args, _ := q.args(TargetPxe, "")
	line := strings.Join(args, " ")
	if !strings.Contains(line, "-netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device virtio-net-pci,netdev=n0,id=nic0,mac=52:54:00:00:00:02,bootindex=1") {
		t.Errorf("no tap NIC: %s", line)
	}
	if strings.Contains(line, "user,") {
		t.Errorf("user networking with a tap: %s", line)
	}
	argv := q.argv(args)
	if want := []string{"ip", "netns", "exec", "lab1", "qemu-system-x86_64", "-name"}; !slices.Equal(argv[:len(want)], want) {
		t.Errorf("argv starts %q, want %q", argv[:len(want)], want)
	}
	q.cfg.NetNS = ""
	if argv := q.argv(args); argv[0] != "qemu-system-x86_64" || len(argv) != len(args)+1 {
		t.Errorf("argv without a namespace: %q", argv)
	}
	testtool.Need(t, "qemu-system-x86_64") // NewQEMU looks the binary up first
	for _, c := range []QEMUConfig{
		{Tap: "tap0", BootFile: "http://10.0.2.2/boot.ipxe"},
		{Tap: "tap0", TFTPDir: "/tftp"},
		{Tap: "tap0", HostFwd: []string{"tcp:127.0.0.1:1-:9999"}},
	} {
		c.Dir = t.TempDir()
		if _, err := NewQEMU(c); err == nil || !strings.Contains(err.Error(), "Tap") {
			t.Errorf("NewQEMU(%+v) = %v, want an error naming Tap", c, err)
		}
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// segment returns the serial output of power-on n (1-based), using the
// markers the backend writes before each start.
func segment(t *testing.T, log string, n int) string {
	t.Helper()
	b, _ := os.ReadFile(log)
	parts := strings.Split(string(b), "[kiln-bmcsim] power-on ")
	if n >= len(parts) {
		return ""
	}
	return parts[n]
}

// qemuPatience stretches every QEMU wait (see waitFor).
const qemuPatience = 10

// waitFor polls cond. The timeout is a safety net against a hang, not a
// measurement: TCG QEMU on a 2-core machine at load 30-40 took minutes for
// what takes seconds on an idle one, so it is stretched by qemuPatience.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	timeout *= qemuPatience
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// firstBoot returns which device SeaBIOS tried first in a serial segment.
func firstBoot(seg string) string {
	best, which := -1, ""
	for dev, marker := range map[string]string{"pxe": "Booting from ROM", "disk": "Booting from Hard Disk", "cd": "Booting from DVD/CD"} {
		if i := strings.Index(seg, marker); i >= 0 && (best < 0 || i < best) {
			best, which = i, dev
		}
	}
	return which
}

// TestQEMUBootOverrideAndReboot boots a real VM under SeaBIOS: a Pxe/Once
// override makes the first power-on try iPXE first; a reboot restarts QEMU,
// which then tries the (unbootable) disk first because Once was used up; a
// virtual CD with a Cd/Once override is tried first at the next power-on.
func TestQEMUBootOverrideAndReboot(t *testing.T) {
	testtool.Need(t, "qemu-system-x86_64")
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:12:34:56"
	q, err := NewQEMU(QEMUConfig{Dir: filepath.Join(dir, "vm"), Disk: disk, MAC: mac, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	svc, err := NewService(Config{Systems: []SystemConfig{{ID: "vm0", Backend: q}}})
	if err != nil {
		t.Fatal(err)
	}
	bmc, err := Listen("127.0.0.1:0", svc)
	if err != nil {
		t.Fatal(err)
	}
	defer bmc.Close()
	c := connect(t, bmc, true)
	systems, err := c.Service.Systems()
	if err != nil || len(systems) != 1 {
		t.Fatalf("systems: %v", err)
	}
	sys := systems[0]
	if nics, err := sys.EthernetInterfaces(); err != nil || len(nics) != 1 || nics[0].MACAddress != mac {
		t.Errorf("NICs %v %v", nics, err)
	}
	if err := sys.SetBoot(&schemas.Boot{BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
		BootSourceOverrideTarget: schemas.PxeBootSource}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Reset(schemas.OnResetType); err != nil {
		t.Fatal(err)
	}
	if sys = refresh(t, c, sys); sys.PowerState != schemas.OnPowerState || sys.Boot.BootSourceOverrideEnabled != schemas.DisabledBootSourceOverrideEnabled {
		t.Fatalf("after On: power %s boot %+v", sys.PowerState, sys.Boot)
	}
	log := q.SerialLog()
	waitFor(t, "iPXE DHCP on power-on 1", 45*time.Second, func() bool {
		return strings.Contains(segment(t, log, 1), "Configuring (net0 "+mac+")")
	})
	if got := firstBoot(segment(t, log, 1)); got != "pxe" {
		t.Errorf("power-on 1 booted %s first, want pxe", got)
	}

	// Guest-side reset: with -no-reboot QEMU exits, the backend starts it again.
	q.mu.Lock()
	p := q.cur
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.command(ctx, "system_reset", nil); err != nil {
		t.Fatalf("system_reset: %v", err)
	}
	waitFor(t, "disk boot attempt on power-on 2", 30*time.Second, func() bool {
		return strings.Contains(segment(t, log, 2), "Booting from Hard Disk")
	})
	if got := firstBoot(segment(t, log, 2)); got != "disk" {
		t.Errorf("power-on 2 booted %s first, want disk", got)
	}
	if q.PowerOns() != 2 {
		t.Errorf("power-ons = %d, want 2", q.PowerOns())
	}
	if _, err := sys.Reset(schemas.ForceOffResetType); err != nil {
		t.Fatal(err)
	}
	if ps := refresh(t, c, sys).PowerState; ps != schemas.OffPowerState {
		t.Fatalf("after ForceOff: %s", ps)
	}
	select {
	case <-p.exited:
	default:
		t.Error("QEMU process of power-on 2 still running after ForceOff")
	}

	// Virtual media: the ISO is fetched at insert and attached at the next start.
	iso := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 64<<10))
	}))
	defer iso.Close()
	vms, err := sys.VirtualMedia()
	if err != nil || len(vms) != 1 {
		t.Fatalf("virtual media: %v", err)
	}
	if _, err := vms[0].InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: iso.URL + "/boot.iso"}); err != nil {
		t.Fatal(err)
	}
	// gofish sends the ETag of its last GET as If-Match: re-read first.
	sys = refresh(t, c, sys)
	if err := sys.SetBoot(&schemas.Boot{BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
		BootSourceOverrideTarget: schemas.CdBootSource}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Reset(schemas.OnResetType); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "CD boot attempt on power-on 3", 30*time.Second, func() bool {
		return strings.Contains(segment(t, log, 3), "Booting from DVD/CD")
	})
	if got := firstBoot(segment(t, log, 3)); got != "cd" {
		t.Errorf("power-on 3 booted %s first, want cd", got)
	}
	// GracefulShutdown goes through QMP; firmware without an OS ignores the
	// ACPI power button, so the VM stays on, as a real machine would.
	if _, err := sys.Reset(schemas.GracefulShutdownResetType); err != nil {
		t.Errorf("GracefulShutdown: %v", err)
	}
	if ps := refresh(t, c, sys).PowerState; ps != schemas.OnPowerState || q.PowerOns() != 3 {
		t.Errorf("after GracefulShutdown without an OS: %s, %d power-ons", ps, q.PowerOns())
	}
	// ForceRestart = quit + start: a fourth process, booting the default order.
	if _, err := sys.Reset(schemas.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	if q.PowerOns() != 4 || refresh(t, c, sys).PowerState != schemas.OnPowerState {
		t.Errorf("after ForceRestart: power-ons %d", q.PowerOns())
	}
	// Nmi goes through QMP too. SeaBIOS may answer it by resetting the
	// machine (a restart the backend follows), so it comes after the counted
	// power-ons; ForceOff stops a process such a reset started.
	if _, err := sys.Reset(schemas.NmiResetType); err != nil {
		t.Errorf("Nmi: %v", err)
	}
	if _, err := sys.Reset(schemas.ForceOffResetType); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("BMCSIM_SHOW_SERIAL") != "" {
		b, _ := os.ReadFile(log)
		t.Logf("serial log:\n%s", b)
	}
	if ps, _ := q.PowerState(context.Background()); ps != PowerOff {
		t.Errorf("final power %s", ps)
	}
}

// TestQEMUUEFIPxe boots OVMF from pflash with a Pxe/Once override and checks
// that iPXE's EFI driver configured the NIC; ForceOff then ends the process.
func TestQEMUUEFIPxe(t *testing.T) {
	testtool.Need(t, "qemu-system-x86_64")
	for _, f := range []string{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("OVMF not installed: %v", err)
		}
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:65:66:01"
	q, err := NewQEMU(QEMUConfig{Dir: filepath.Join(dir, "vm"), Disk: disk, MAC: mac, UEFI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	ctx := context.Background()
	if err := q.SetBootOverride(ctx, BootOverride{Enabled: OverrideOnce, Target: TargetPxe, Mode: ModeUEFI}); err != nil {
		t.Fatal(err)
	}
	if err := q.Reset(ctx, ResetOn); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "vm", "OVMF_VARS.fd")); err != nil {
		t.Errorf("no per-VM VARS copy: %v", err)
	}
	waitFor(t, "iPXE (EFI) DHCP", 50*time.Second, func() bool {
		return strings.Contains(segment(t, q.SerialLog(), 1), "Configuring (net0 "+mac+")")
	})
	if err := q.Reset(ctx, ResetForceOff); err != nil {
		t.Fatal(err)
	}
	if ps, _ := q.PowerState(ctx); ps != PowerOff || q.PowerOns() != 1 {
		t.Errorf("after ForceOff: %s, %d power-ons", ps, q.PowerOns())
	}
}

// rebootingMBR is a 512-byte boot sector that prints "KILN-MBR" through the
// BIOS (SeaBIOS copies it to the serial console) and then resets the machine
// through the keyboard controller, like an OS that reboots.
func rebootingMBR() []byte {
	code := []byte{
		0x31, 0xC0, // xor ax,ax
		0x8E, 0xD8, // mov ds,ax
		0xBE, 0x1C, 0x7C, // mov si,0x7c1c (msg)
		0xFC,       // cld
		0xAC,       // loop: lodsb
		0x08, 0xC0, // or al,al
		0x74, 0x09, // jz done
		0xB4, 0x0E, // mov ah,0x0e
		0xBB, 0x07, 0x00, // mov bx,7
		0xCD, 0x10, // int 0x10
		0xEB, 0xF2, // jmp loop
		0xB0, 0xFE, // done: mov al,0xfe
		0xE6, 0x64, // out 0x64,al (pulse reset line)
		0xEB, 0xFE, // jmp $
	}
	// The last characters before the reset may not reach the serial log.
	code = append(code, []byte("KILN-MBR rebooting\r\n\x00")...)
	sector := make([]byte, 512)
	copy(sector, code)
	sector[510], sector[511] = 0x55, 0xAA
	return sector
}

// TestQEMUGuestRebootUsesNewOrder: the guest itself reboots (keyboard
// controller reset). With -no-reboot QEMU exits with reason guest-reset and
// the backend starts it again, now booting the disk first because the
// Pxe/Once override was used up by the first power-on.
func TestQEMUGuestRebootUsesNewOrder(t *testing.T) {
	testtool.Need(t, "qemu-system-x86_64")
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	img := append(rebootingMBR(), make([]byte, 1<<20-512)...)
	if err := os.WriteFile(disk, img, 0o644); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:12:34:57"
	q, err := NewQEMU(QEMUConfig{Dir: filepath.Join(dir, "vm"), Disk: disk, MAC: mac, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	ctx := context.Background()
	_ = q.SetBootOverride(ctx, BootOverride{Enabled: OverrideOnce, Target: TargetPxe, Mode: ModeLegacy})
	if err := q.Reset(ctx, ResetOn); err != nil {
		t.Fatal(err)
	}
	log := q.SerialLog()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("serial log:\n%q", b)
		}
	})
	waitFor(t, "guest reboot into power-on 2", 20*time.Second, func() bool {
		return strings.Contains(segment(t, log, 2), "KILN-MBR")
	})
	s1, s2 := segment(t, log, 1), segment(t, log, 2)
	if firstBoot(s1) != "pxe" || !strings.Contains(s1, "Configuring (net0 "+mac+")") || !strings.Contains(s1, "KILN-MBR") {
		t.Errorf("power-on 1 should try PXE, then boot the disk that reboots:\n%s", s1)
	}
	if firstBoot(s2) != "disk" {
		t.Errorf("power-on 2 booted %s first, want disk", firstBoot(s2))
	}
	// The guest keeps rebooting; ForceOff must stop it for good even if it
	// races with a restart.
	if err := q.Reset(ctx, ResetForceOff); err != nil {
		t.Fatal(err)
	}
	n := q.PowerOns()
	time.Sleep(2 * time.Second)
	if ps, _ := q.PowerState(ctx); ps != PowerOff || q.PowerOns() != n {
		t.Errorf("after ForceOff: %s, power-ons %d → %d", ps, n, q.PowerOns())
	}
}

// TestQEMUSecureBootFirmware: SecureBootEnable over Redfish switches the
// next power-on of a UEFI VM to OVMF's secure-boot build (SMM on, secure
// pflash) with its own copy of the enrolled-keys variables; disabling it
// goes back to the plain firmware and variables. The VM's Storage drives
// are its disks.
func TestQEMUSecureBootFirmware(t *testing.T) {
	q := &QEMU{cfg: QEMUConfig{Dir: "/vm/x", Accel: "tcg", CPUs: 2, MemoryMiB: 1024, MAC: "52:54:00:00:00:01",
		Disk: "/vm/x/disk.raw", DiskFormat: "raw", UEFI: true, OVMFCode: "/code.fd", OVMFVars: "/vars.fd",
		OVMFSecureCode: "/secure-code.fd", OVMFEnrolledVars: "/ms-vars.fd"},
		inv: DefaultInventory(0, Inventory{Disks: []Disk{{Name: "vda", SizeBytes: 8 << 30}}})}
	svc, err := NewService(Config{Systems: []SystemConfig{{Backend: q}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	u, p := svc.Credentials()
	line := func() string { a, _ := q.args(TargetHdd, ""); return strings.Join(a, " ") }
	plain := []string{"-machine q35 ", "file=/code.fd", "file=/vm/x/OVMF_VARS.fd"}
	secure := []string{"-machine q35,smm=on", "driver=cfi.pflash01,property=secure,value=on", "file=/secure-code.fd", "file=/vm/x/OVMF_VARS.secboot.fd"}
	check := func(want, not []string) {
		t.Helper()
		l := line()
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("args lack %q: %s", w, l)
			}
		}
		for _, w := range not {
			if strings.Contains(l, w) {
				t.Errorf("args have %q: %s", w, l)
			}
		}
	}
	check(plain, secure)
	for _, tc := range []struct {
		enable    bool
		want, not []string
	}{{true, secure, plain}, {false, plain, secure}} {
		if st, _, m := do(t, nil, "PATCH", srv.URL+"/redfish/v1/Systems/1/SecureBoot", u, p, map[string]any{"SecureBootEnable": tc.enable}); st != http.StatusNoContent {
			t.Fatalf("PATCH SecureBootEnable=%v: %d %v", tc.enable, st, m)
		}
		check(tc.want, tc.not)
	}
	_, _, m := do(t, nil, "GET", srv.URL+"/redfish/v1/Systems/1/Storage/1", u, p, nil)
	if n := m["Drives@odata.count"]; n != 1.0 {
		t.Errorf("QEMU storage drives %v, want its one disk", n)
	}
}

// TestQEMUSecureBootStarts boots a real VM with the secure-boot firmware: QEMU
// accepts the SMM/secure-pflash command line, OVMF runs its boot manager
// (BdsDxe on the serial console), and the VM has its own copy of the
// enrolled-keys variables.
func TestQEMUSecureBootStarts(t *testing.T) {
	testtool.Need(t, "qemu-system-x86_64")
	for _, f := range []string{"/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("OVMF secure-boot files not installed: %v", err)
		}
	}
	dir := filepath.Join(t.TempDir(), "vm")
	q, err := NewQEMU(QEMUConfig{Dir: dir, UEFI: true, MemoryMiB: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	ctx := context.Background()
	q.SetSecureBoot(true)
	if err := q.Reset(ctx, ResetOn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OVMF boot manager output", 50*time.Second, func() bool {
		return strings.Contains(segment(t, q.SerialLog(), 1), "BdsDxe")
	})
	if ps, _ := q.PowerState(ctx); ps != PowerOn {
		t.Errorf("secure-boot VM not running: %s", ps)
	}
	if _, err := os.Stat(filepath.Join(dir, "OVMF_VARS.secboot.fd")); err != nil {
		t.Errorf("no per-VM enrolled-keys variables: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "OVMF_VARS.fd")); err == nil {
		t.Error("plain variables copied for a secure-boot start")
	}
	if err := q.Reset(ctx, ResetForceOff); err != nil {
		t.Fatal(err)
	}
}
