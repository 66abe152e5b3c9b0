package bmcsim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// QEMUConfig describes one QEMU-backed system.
type QEMUConfig struct {
	// Dir holds the VM's state: serial.log, qemu.log, qmp.sock, OVMF_VARS.fd,
	// vmedia.iso. Required; created if missing. Keep the path short (the QMP
	// socket path must fit in 108 bytes).
	Dir string
	// Binary is the QEMU executable (default qemu-system-x86_64).
	Binary string
	// Accel is the -accel value (default tcg; "kvm" where /dev/kvm exists).
	Accel string
	// MemoryMiB (default 1024) and CPUs (default 2).
	MemoryMiB, CPUs int
	// UEFI boots OVMF from pflash with a per-VM copy of OVMFVars; otherwise SeaBIOS.
	UEFI bool
	// OVMFCode and OVMFVars default to Debian's /usr/share/OVMF/OVMF_{CODE,VARS}_4M.fd.
	OVMFCode, OVMFVars string
	// OVMFSecureCode and OVMFEnrolledVars are used instead while secure boot
	// is enabled (Redfish SecureBootEnable, from the next power-on): the
	// SMM-enforcing firmware and a variables file with the Microsoft keys
	// enrolled and secure boot on. Defaults: Debian's
	// /usr/share/OVMF/OVMF_CODE_4M.secboot.fd and OVMF_VARS_4M.ms.fd. The
	// per-VM copy is OVMF_VARS.secboot.fd, kept apart from OVMF_VARS.fd.
	OVMFSecureCode, OVMFEnrolledVars string
	// MAC of the virtio NIC (default derived from the UUID).
	MAC string
	// Disk is the disk image (raw or qcow2, by extension unless DiskFormat is
	// set). Empty means no disk.
	Disk, DiskFormat string
	// TFTPDir and BootFile are slirp's tftp= and bootfile= options. BootFile
	// may be an http:// URL (iPXE fetches it; the host is 10.0.2.2 from the guest).
	TFTPDir, BootFile string
	// HostFwd are slirp hostfwd= rules, e.g. "tcp:127.0.0.1:19999-:9999",
	// so the host reaches a service in the guest (the agent's API).
	HostFwd []string
	// Tap, when set, puts the NIC on that existing tap device
	// (-netdev tap,ifname=…) instead of QEMU's user networking, so that the
	// guest's DHCP, TFTP and HTTP come from whatever answers on the tap's
	// bridge; TFTPDir, BootFile and HostFwd must then be empty.
	Tap string
	// NetNS runs QEMU in that named network namespace (ip netns exec), the
	// one that holds Tap.
	NetNS string
	// NICROMFile sets the NIC's romfile=: nil keeps QEMU's default iPXE ROM,
	// a pointer to "" removes the option ROM (for OVMF's native PXE/HTTP boot).
	NICROMFile *string
	// ExtraArgs are appended to every QEMU command line.
	ExtraArgs []string
	// HTTPClient fetches virtual media images (nil = http.DefaultClient).
	// A BMC that must trust a private CA gets its own client here, so that
	// machines in one process do not share a changed global transport.
	HTTPClient *http.Client
	// Inventory overrides the facts reported over Redfish (zero fields are
	// derived from this config).
	Inventory Inventory
	Logger    *slog.Logger
}

// QEMU is a Backend whose system is a QEMU VM, one QEMU process per power-on.
// QEMU runs with -no-reboot: when the guest reboots, QEMU exits and the
// backend starts a new process with the current boot override (a Once
// override is used up by the power-on that consumed it). Virtual media is
// attached as a CD-ROM at the next start. Power state = process alive.
type QEMU struct {
	cfg QEMUConfig
	inv Inventory
	log *slog.Logger

	op sync.Mutex // serialises Reset / Close

	mu         sync.Mutex
	cur        *vmProc
	boot       BootOverride
	media      Media
	mediaISO   string // local copy of the inserted image
	powerOns   int
	closed     bool
	secureBoot bool // boot the next power-on with the secure-boot firmware
}

type vmProc struct {
	cmd    *exec.Cmd
	exited chan struct{}

	qmpReady chan struct{} // closed when qmp is set or failed
	qmp      *qmpConn
	qmpErr   error

	mu      sync.Mutex
	reason  string // last SHUTDOWN reason from QMP
	restart bool   // start again after exit (ForceRestart, GracefulRestart, PowerCycle)
	off     bool   // ForceOff/Close: never restart, even after a guest reset
}

var _ Backend = (*QEMU)(nil)

// NewQEMU checks the config and returns a powered-off QEMU backend.
func NewQEMU(cfg QEMUConfig) (*QEMU, error) {
	if cfg.Dir == "" {
		return nil, errors.New("qemu backend: Dir is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create VM directory %s: %w", cfg.Dir, err)
	}
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("qemu backend: %w", err)
	}
	if cfg.Accel == "" {
		cfg.Accel = "tcg"
	}
	if cfg.Tap != "" && (cfg.TFTPDir != "" || cfg.BootFile != "" || len(cfg.HostFwd) > 0) {
		return nil, errors.New("qemu backend: TFTPDir, BootFile and HostFwd are user-networking options; a Tap NIC takes none")
	}
	if cfg.NetNS != "" {
		if _, err := exec.LookPath("ip"); err != nil {
			return nil, fmt.Errorf("qemu backend: NetNS needs ip (iproute2): %w", err)
		}
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 1024
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.OVMFCode == "" {
		cfg.OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	}
	if cfg.OVMFVars == "" {
		cfg.OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	}
	if cfg.OVMFSecureCode == "" {
		cfg.OVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	}
	if cfg.OVMFEnrolledVars == "" {
		cfg.OVMFEnrolledVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	}
	if cfg.Disk != "" && cfg.DiskFormat == "" {
		cfg.DiskFormat = "raw"
		if strings.HasSuffix(cfg.Disk, ".qcow2") {
			cfg.DiskFormat = "qcow2"
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	inv := cfg.Inventory
	if inv.UUID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		inv.UUID = fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	if cfg.MAC == "" {
		cfg.MAC = "52:54:00:" + inv.UUID[len(inv.UUID)-6:len(inv.UUID)-4] + ":" +
			inv.UUID[len(inv.UUID)-4:len(inv.UUID)-2] + ":" + inv.UUID[len(inv.UUID)-2:]
	}
	if inv.Manufacturer == "" {
		inv.Manufacturer = "QEMU"
	}
	if inv.Model == "" {
		inv.Model = "Standard PC (Q35 + ICH9, 2009)"
	}
	if inv.CPUCount == 0 {
		inv.CPUCount = cfg.CPUs
	}
	if inv.CPUModel == "" {
		inv.CPUModel = "QEMU " + strings.ToUpper(cfg.Accel) + " CPU (max)"
	}
	if inv.MemoryGiB == 0 {
		inv.MemoryGiB = (cfg.MemoryMiB + 1023) / 1024
	}
	if len(inv.NICs) == 0 {
		inv.NICs = []NIC{{MAC: cfg.MAC}}
	}
	if len(inv.Disks) == 0 && cfg.Disk != "" {
		var size int64
		if fi, err := os.Stat(cfg.Disk); err == nil {
			size = fi.Size()
		}
		inv.Disks = []Disk{{Name: "vda", SizeBytes: size}}
	}
	inv = DefaultInventory(0, inv)
	if inv.SerialNumber == "SIM0000000" {
		inv.SerialNumber = "QEMU-" + inv.UUID[:8]
	}
	mode := ModeLegacy
	if cfg.UEFI {
		mode = ModeUEFI
	}
	return &QEMU{cfg: cfg, inv: inv, log: cfg.Logger.With("vm", filepath.Base(cfg.Dir)),
		boot: BootOverride{Enabled: OverrideDisabled, Target: TargetNone, Mode: mode}}, nil
}

// SerialLog is the file that collects the VM's serial console across all
// power-ons; before each start the backend appends a line
// "[kiln-bmcsim] power-on N: boot order ...".
func (q *QEMU) SerialLog() string { return filepath.Join(q.cfg.Dir, "serial.log") }

// PowerOns returns how many QEMU processes have been started.
func (q *QEMU) PowerOns() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.powerOns
}

// Inventory implements Backend.
func (q *QEMU) Inventory() Inventory { return q.inv }

// SetSecureBoot chooses the firmware of the next power-on: with secure boot,
// OVMF's SMM secure-boot build and the enrolled-keys variables. It has no
// effect on a SeaBIOS (non-UEFI) VM.
func (q *QEMU) SetSecureBoot(enable bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.secureBoot = enable
}

// ovmfFiles returns the firmware code, the variables template and the per-VM
// variables file for the next start. Called with q.mu held.
func (q *QEMU) ovmfFiles() (code, template, vars string) {
	if q.secureBoot {
		return q.cfg.OVMFSecureCode, q.cfg.OVMFEnrolledVars, filepath.Join(q.cfg.Dir, "OVMF_VARS.secboot.fd")
	}
	return q.cfg.OVMFCode, q.cfg.OVMFVars, filepath.Join(q.cfg.Dir, "OVMF_VARS.fd")
}

// PowerState implements Backend.
func (q *QEMU) PowerState(context.Context) (PowerState, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != nil {
		return PowerOn, nil
	}
	return PowerOff, nil
}

// BootOverride implements Backend.
func (q *QEMU) BootOverride(context.Context) (BootOverride, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.boot, nil
}

// SetBootOverride implements Backend; it takes effect at the next QEMU start.
func (q *QEMU) SetBootOverride(_ context.Context, b BootOverride) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.boot = b
	return nil
}

// Media implements Backend.
func (q *QEMU) Media(context.Context) (Media, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.media, nil
}

// ErrMediaUnreachable wraps failures to fetch a virtual media image.
var ErrMediaUnreachable = errors.New("virtual media image unreachable")

// InsertMedia implements Backend: it fetches the image to the VM directory
// (QEMU cannot read an HTTP URL without the curl block driver) and attaches
// it as a CD-ROM at the next start.
func (q *QEMU) InsertMedia(ctx context.Context, image string, writeProtected bool) error {
	q.mu.Lock()
	inserted := q.media.Inserted
	q.mu.Unlock()
	if inserted {
		return ErrMediaInserted
	}
	dst := filepath.Join(q.cfg.Dir, "vmedia.iso")
	if err := fetchFile(ctx, q.cfg.HTTPClient, image, dst); err != nil {
		return fmt.Errorf("%w: %w", ErrMediaUnreachable, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.media.Inserted {
		return ErrMediaInserted
	}
	q.media = Media{Image: image, Inserted: true, WriteProtected: writeProtected}
	q.mediaISO = dst
	return nil
}

func fetchFile(ctx context.Context, client *http.Client, url, dst string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: status %s", url, resp.Status)
	}
	f, err := os.Create(dst + ".part")
	if err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("fetch %s to %s: %w", url, dst, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return os.Rename(dst+".part", dst)
}

// EjectMedia implements Backend; the CD-ROM disappears at the next start.
func (q *QEMU) EjectMedia(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.media.Inserted {
		return ErrMediaNotInserted
	}
	q.media = Media{}
	q.mediaISO = ""
	return nil
}

// Reset implements Backend:
//   - On/ForceOn start QEMU if it is not running;
//   - ForceOff sends QMP quit (SIGKILL to the process group as fallback);
//   - GracefulShutdown sends system_powerdown (the guest decides);
//   - GracefulRestart sends system_powerdown and starts again once QEMU exits;
//   - ForceRestart/PowerCycle quit and start again (or just start when off);
//   - PushPowerButton is system_powerdown when on, start when off;
//   - Nmi sends inject-nmi.
func (q *QEMU) Reset(ctx context.Context, t ResetType) error {
	q.op.Lock()
	defer q.op.Unlock()
	q.mu.Lock()
	p := q.cur
	if q.closed {
		q.mu.Unlock()
		return errors.New("qemu backend closed")
	}
	if p == nil {
		defer q.mu.Unlock()
		switch t {
		case ResetOn, ResetForceOn, ResetForceRestart, ResetPowerCycle, ResetPushPowerButton:
			return q.startLocked()
		case ResetForceOff, ResetGracefulShutdown:
			return nil
		case ResetGracefulRestart, ResetNmi:
			return ErrPoweredOff
		}
		return fmt.Errorf("reset type %q not implemented", t)
	}
	q.mu.Unlock()
	switch t {
	case ResetOn, ResetForceOn:
		return nil
	case ResetForceOff:
		return q.forceOff(ctx)
	case ResetForceRestart, ResetPowerCycle:
		p.setRestart(true)
		return q.stop(ctx, p)
	case ResetGracefulShutdown, ResetPushPowerButton:
		return p.command(ctx, "system_powerdown", nil)
	case ResetGracefulRestart:
		p.setRestart(true)
		return p.command(ctx, "system_powerdown", nil)
	case ResetNmi:
		return p.command(ctx, "inject-nmi", nil)
	}
	return fmt.Errorf("reset type %q not implemented", t)
}

// Close powers the VM off (QMP quit, then SIGKILL) and refuses further resets.
func (q *QEMU) Close(ctx context.Context) error {
	q.op.Lock()
	defer q.op.Unlock()
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	return q.forceOff(ctx)
}

// forceOff stops the running process for good. A guest reset racing with it
// may already have started the next process; that one is stopped too.
func (q *QEMU) forceOff(ctx context.Context) error {
	for range 3 {
		q.mu.Lock()
		p := q.cur
		q.mu.Unlock()
		if p == nil {
			return nil
		}
		p.mu.Lock()
		p.off, p.restart = true, false
		p.mu.Unlock()
		if err := q.stop(ctx, p); err != nil {
			return err
		}
	}
	return errors.New("QEMU keeps restarting after ForceOff")
}

func (p *vmProc) setRestart(v bool) {
	p.mu.Lock()
	p.restart = v
	p.mu.Unlock()
}

// command runs a QMP command once the connection is up.
func (p *vmProc) command(ctx context.Context, cmd string, args any) error {
	select {
	case <-p.qmpReady:
	case <-ctx.Done():
		return fmt.Errorf("wait for QMP: %w", ctx.Err())
	}
	if p.qmpErr != nil {
		return p.qmpErr
	}
	return p.qmp.execute(ctx, cmd, args)
}

// stop ends the process p: QMP quit, SIGKILL to its process group if it is
// still alive after 5 s. It returns once the supervisor has handled the
// exit (and, for a restart, started the next process).
func (q *QEMU) stop(ctx context.Context, p *vmProc) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := p.command(qctx, "quit", nil)
	cancel()
	if err != nil {
		q.log.Warn("QMP quit failed, killing QEMU", "err", err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for QEMU to exit: %w", ctx.Err())
	}
}

// bootOrder lists the devices in boot order for an override target; absent
// devices are skipped by args.
func bootOrder(target string) []string {
	switch target {
	case TargetPxe, TargetUefiHTTP:
		return []string{"nic", "disk", "cd"}
	case TargetCd:
		return []string{"cd", "disk", "nic"}
	default: // None, Hdd, BiosSetup, ...: the machine's default order
		return []string{"disk", "cd", "nic"}
	}
}

// args builds the QEMU command line for one power-on with boot target target.
func (q *QEMU) args(target, iso string) ([]string, []string) {
	c := q.cfg
	a := []string{
		"-name", "kiln-" + filepath.Base(c.Dir),
		"-machine", "q35", "-accel", c.Accel, "-cpu", "max",
		"-smp", strconv.Itoa(c.CPUs), "-m", strconv.Itoa(c.MemoryMiB),
		"-nographic", "-monitor", "none", "-no-reboot",
		"-chardev", "file,id=ser0,path=" + q.SerialLog() + ",append=on", "-serial", "chardev:ser0",
		"-qmp", "unix:" + filepath.Join(c.Dir, "qmp.sock") + ",server=on,wait=off",
		"-uuid", q.inv.UUID,
		"-smbios", "type=1,serial=" + strings.ReplaceAll(q.inv.SerialNumber, ",", ",,"),
		"-boot", "strict=on",
	}
	if c.UEFI {
		code, _, vars := q.ovmfFiles()
		if q.secureBoot {
			// The secure-boot build keeps its variables in SMM-protected flash.
			a[slices.Index(a, "q35")] = "q35,smm=on"
			a = append(a, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars,
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}
	var order []string
	idx := 1
	for _, dev := range bootOrder(target) {
		switch dev {
		case "nic":
			netdev := "user,id=n0"
			if c.Tap != "" {
				netdev = "tap,id=n0,ifname=" + c.Tap + ",script=no,downscript=no"
			}
			if c.TFTPDir != "" {
				netdev += ",tftp=" + c.TFTPDir
			}
			if c.BootFile != "" {
				netdev += ",bootfile=" + c.BootFile
			}
			for _, f := range c.HostFwd {
				netdev += ",hostfwd=" + f
			}
			nic := "virtio-net-pci,netdev=n0,id=nic0,mac=" + c.MAC + ",bootindex=" + strconv.Itoa(idx)
			if c.NICROMFile != nil {
				nic += ",romfile=" + *c.NICROMFile
			}
			a = append(a, "-netdev", netdev, "-device", nic)
		case "disk":
			if c.Disk == "" {
				continue
			}
			a = append(a, "-drive", "file="+c.Disk+",if=none,id=disk0drv,format="+c.DiskFormat,
				"-device", "virtio-blk-pci,drive=disk0drv,id=disk0,bootindex="+strconv.Itoa(idx))
		case "cd":
			if iso == "" {
				continue
			}
			a = append(a, "-drive", "file="+iso+",if=none,id=cd0drv,media=cdrom,readonly=on,format=raw",
				"-device", "ide-cd,drive=cd0drv,id=cd0,bus=ide.2,bootindex="+strconv.Itoa(idx))
		}
		order = append(order, dev)
		idx++
	}
	return append(a, c.ExtraArgs...), order
}

// argv is the command that runs QEMU with args: in the configured network
// namespace, if any, where ip execs QEMU in place (the pid and process
// group stay QEMU's, so stop's SIGKILL reaches it).
func (q *QEMU) argv(args []string) []string {
	if q.cfg.NetNS != "" {
		return append([]string{"ip", "netns", "exec", q.cfg.NetNS, q.cfg.Binary}, args...)
	}
	return append([]string{q.cfg.Binary}, args...)
}

// startLocked starts a QEMU process for one power-on. Called with q.mu held.
func (q *QEMU) startLocked() error {
	target := q.boot.EffectiveTarget()
	if q.cfg.UEFI {
		_, template, vars := q.ovmfFiles()
		if _, err := os.Stat(vars); errors.Is(err, os.ErrNotExist) {
			if err := copyFile(template, vars); err != nil {
				return err
			}
		}
	}
	iso := ""
	if q.media.Inserted {
		iso = q.mediaISO
	}
	args, order := q.args(target, iso)
	sock := filepath.Join(q.cfg.Dir, "qmp.sock")
	_ = os.Remove(sock)
	n := q.powerOns + 1
	if f, err := os.OpenFile(q.SerialLog(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintf(f, "\r\n[kiln-bmcsim] power-on %d: boot order %s\r\n", n, strings.Join(order, ","))
		f.Close()
	}
	qlog, err := os.OpenFile(filepath.Join(q.cfg.Dir, "qemu.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open QEMU log: %w", err)
	}
	argv := q.argv(args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = qlog, qlog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		qlog.Close()
		return fmt.Errorf("start %s: %w", q.cfg.Binary, err)
	}
	qlog.Close() // the child has its own copy
	q.powerOns = n
	q.boot = q.boot.consumeOnce()
	p := &vmProc{cmd: cmd, exited: make(chan struct{}), qmpReady: make(chan struct{})}
	q.cur = p
	q.log.Info("QEMU started", "pid", cmd.Process.Pid, "power_on", n, "boot_order", order)
	go p.connectQMP(sock)
	go q.supervise(p)
	return nil
}

func (p *vmProc) connectQMP(sock string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// stop dialling when the process is gone
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := dialQMP(ctx, sock, func(name string, data json.RawMessage) {
		if name != "SHUTDOWN" {
			return
		}
		var d struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(data, &d)
		p.mu.Lock()
		p.reason = d.Reason
		p.mu.Unlock()
	})
	p.qmp, p.qmpErr = c, err
	close(p.qmpReady)
}

// supervise waits for the process to exit and decides whether this was a
// reboot (start again with the current boot order) or a power-off.
func (q *QEMU) supervise(p *vmProc) {
	err := p.cmd.Wait()
	// The SHUTDOWN event precedes exit; let the QMP reader drain it.
	select {
	case <-p.qmpReady:
		if p.qmp != nil {
			select {
			case <-p.qmp.done:
			case <-time.After(2 * time.Second):
			}
			p.qmp.close()
		}
	case <-time.After(2 * time.Second):
	}
	p.mu.Lock()
	reason, restart := p.reason, p.restart
	if reason == "guest-reset" || reason == "host-qmp-system-reset" {
		restart = true
	}
	if p.off {
		restart = false
	}
	p.mu.Unlock()
	q.mu.Lock()
	q.cur = nil
	if q.closed {
		restart = false
	}
	q.log.Info("QEMU exited", "reason", reason, "err", err, "restart", restart)
	if restart {
		if err := q.startLocked(); err != nil {
			q.log.Error("restart QEMU", "err", err)
		}
	}
	q.mu.Unlock()
	close(p.exited)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}
