package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kilnhq/kiln/internal/syspath"
)

// ISOConfig configures NewISOBuilder.
type ISOConfig struct {
	// Dir is the boot files directory (served at FilesURL); ISOs are
	// written to Dir/iso/<node>.iso.
	Dir, FilesURL string
	// Kernel and Ramdisk are the default agent files in Dir.
	Kernel, Ramdisk string
	// Stub is the UEFI stub the kernel, initramfs and command line are
	// joined to (a unified kernel image); default systemd-boot's.
	Stub string
	// AgentCA, when set, is the PEM CA bundle of the controller's API,
	// carried in every ISO's initramfs at AgentCAPath.
	AgentCA []byte
}

// ISOBuilder makes per-node agent ISOs for virtual media: a unified kernel
// image (UEFI stub + agent kernel + initramfs + the node's kernel command
// line, agent token included) as the El Torito EFI boot image. A BMC boots
// it without network boot and the agent needs no lookup to learn its token.
//
// It uses objcopy (binutils), mkfs.vfat (dosfstools), mtools and xorriso, as
// Ironic uses mkisofs; Check reports what is missing.
type ISOBuilder struct{ cfg ISOConfig }

// NewISOBuilder returns a builder; nothing is checked until Check or Build.
func NewISOBuilder(cfg ISOConfig) *ISOBuilder {
	if cfg.Stub == "" {
		cfg.Stub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"
	}
	if cfg.Kernel == "" {
		cfg.Kernel = "kiln-agent.kernel"
	}
	if cfg.Ramdisk == "" {
		cfg.Ramdisk = "kiln-agent.initramfs"
	}
	return &ISOBuilder{cfg: cfg}
}

var isoTools = []string{"objcopy", "mkfs.vfat", "mmd", "mcopy", "xorriso"}

// Check reports whether ISOs can be built here, naming what is missing.
func (b *ISOBuilder) Check() error {
	var missing []string
	for _, t := range isoTools {
		if _, err := syspath.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if _, err := os.Stat(b.cfg.Stub); err != nil {
		missing = append(missing, b.cfg.Stub+" (systemd-boot-efi)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot build agent ISOs: missing %s", strings.Join(missing, ", "))
	}
	return nil
}

var isoNodeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// file resolves a kernel or ramdisk name: empty means the default, anything
// else must name a file directly in Dir.
func (b *ISOBuilder) file(name, def string) (string, error) {
	if name == "" {
		name = def
	}
	if strings.Contains(name, "/") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("%q: virtual-media ISOs are built from files in the boot directory; name one (not a URL or path)", name)
	}
	p := filepath.Join(b.cfg.Dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("agent file for the ISO: %w", err)
	}
	return p, nil
}

// Cmdline renders kernel arguments in a stable order, then extra ones.
func Cmdline(args map[string]string, extra []string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+args[k])
	}
	return strings.TrimSpace(strings.Join(append(parts, extra...), " "))
}

// Build writes node's ISO and returns its URL. networkData, when not nil,
// is the node's NMState document: it is appended to the initramfs as the
// per-node ramdisk handler does for network boot, so that a host without
// DHCP that boots the ISO configures its network from it.
func (b *ISOBuilder) Build(ctx context.Context, node, kernel, ramdisk, cmdline string, networkData []byte) (string, error) {
	if !isoNodeRE.MatchString(node) {
		return "", fmt.Errorf("invalid node identifier %q", node)
	}
	for _, arg := range strings.Fields(cmdline) {
		if err := CheckArg(arg); err != nil {
			return "", fmt.Errorf("agent kernel command line: %w", err)
		}
	}
	if err := b.Check(); err != nil {
		return "", err
	}
	k, err := b.file(kernel, b.cfg.Kernel)
	if err != nil {
		return "", err
	}
	r, err := b.file(ramdisk, b.cfg.Ramdisk)
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "kiln-iso-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	run := func(name string, args ...string) error {
		// mkfs.vfat is in /usr/sbin, off a normal user's PATH.
		path, err := syspath.LookPath(name)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if networkData != nil || len(b.cfg.AgentCA) > 0 {
		if r, err = withNetworkData(work, r, networkData, b.cfg.AgentCA); err != nil {
			return "", err
		}
	}
	osrel := filepath.Join(work, "os-release")
	cmdFile := filepath.Join(work, "cmdline")
	uki := filepath.Join(work, "uki.efi")
	if err := os.WriteFile(osrel, []byte("NAME=\"Kiln agent\"\nID=kiln-agent\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(cmdFile, []byte(cmdline), 0o644); err != nil {
		return "", err
	}
	// Section addresses: the kernel (< 16 MiB) at 32 MiB, the initramfs at 48 MiB.
	if err := run("objcopy",
		"--add-section", ".osrel="+osrel, "--change-section-vma", ".osrel=0x20000",
		"--add-section", ".cmdline="+cmdFile, "--change-section-vma", ".cmdline=0x30000",
		"--add-section", ".linux="+k, "--change-section-vma", ".linux=0x2000000",
		"--add-section", ".initrd="+r, "--change-section-vma", ".initrd=0x3000000",
		b.cfg.Stub, uki); err != nil {
		return "", fmt.Errorf("build the unified kernel image: %w", err)
	}
	st, err := os.Stat(uki)
	if err != nil {
		return "", err
	}
	tree := filepath.Join(work, "iso")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return "", err
	}
	efiboot := filepath.Join(tree, "efiboot.img")
	if err := os.WriteFile(efiboot, nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Truncate(efiboot, (st.Size()/(1<<20)+4)<<20); err != nil {
		return "", err
	}
	if err := run("mkfs.vfat", "-n", "KILNAGENT", efiboot); err != nil {
		return "", err
	}
	if err := run("mmd", "-i", efiboot, "::/EFI", "::/EFI/BOOT"); err != nil {
		return "", err
	}
	if err := run("mcopy", "-i", efiboot, uki, "::/EFI/BOOT/BOOTX64.EFI"); err != nil {
		return "", err
	}
	outDir := filepath.Join(b.cfg.Dir, "iso")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("ISO directory: %w", err)
	}
	out := filepath.Join(outDir, node+".iso")
	if err := run("xorriso", "-as", "mkisofs", "-quiet", "-o", out+".tmp", "-V", "KILN_AGENT", "-J", "-R",
		"-e", "efiboot.img", "-no-emul-boot", tree); err != nil {
		return "", err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.cfg.FilesURL, "/") + "/iso/" + node + ".iso", nil
}

// Remove deletes node's ISO; a missing one is no error.
func (b *ISOBuilder) Remove(node string) error {
	if !isoNodeRE.MatchString(node) {
		return fmt.Errorf("invalid node identifier %q", node)
	}
	err := os.Remove(filepath.Join(b.cfg.Dir, "iso", node+".iso"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// withNetworkData writes, in dir, the initramfs at ramdisk followed by the
// archive of the network data and the controller's CA, and returns its path.
func withNetworkData(dir, ramdisk string, data, agentCA []byte) (string, error) {
	tail, err := BootFilesArchive(data, agentCA)
	if err != nil {
		return "", err
	}
	in, err := os.Open(ramdisk)
	if err != nil {
		return "", err
	}
	defer in.Close()
	path := filepath.Join(dir, "initrd")
	out, err := os.Create(path)
	if err != nil {
		return "", err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		_, err = out.Write(make([]byte, padTo4(n)))
	}
	if err == nil {
		_, err = out.Write(tail)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("initramfs with network data: %w", err)
	}
	return path, nil
}
