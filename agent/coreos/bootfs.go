package coreos

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Paths on a CoreOS boot partition (relative to its root), as CoreOS's first
// boot reads them.
const (
	// IgnitionPath is where ignition-dracut finds the config on a metal
	// install ("ignition.config.url" is not used on metal).
	IgnitionPath = "ignition/config.ign"
	// FirstbootPath is the stamp GRUB's ignition snippet tests: while it
	// exists, the kernel command line gets ignition.firstboot (and the
	// network arguments the file sets); Ignition removes it after its run.
	FirstbootPath = "ignition.firstboot"
	// NetworkDir receives NetworkManager keyfiles that
	// coreos-copy-firstboot-network copies into the initramfs on first boot.
	NetworkDir = "coreos-firstboot-network"
	// EntriesDir holds the Boot Loader Specification entries.
	EntriesDir = "loader/entries"
)

// WriteIgnition writes cfg to IgnitionPath under root: the directory 0700
// and the file 0600 (the config may carry secrets), refusing to overwrite a
// config the image already carries.
func WriteIgnition(root string, cfg []byte) error {
	dir := filepath.Join(root, filepath.Dir(IgnitionPath))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create Ignition directory %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restrict Ignition directory %s: %w", dir, err)
		}
	}
	p := filepath.Join(root, IgnitionPath)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create Ignition config %s: %w", p, err)
	}
	if _, err := f.Write(cfg); err != nil {
		f.Close()
		return fmt.Errorf("write Ignition config %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync Ignition config %s: %w", p, err)
	}
	return f.Close()
}

// WriteFirstboot makes sure the first-boot stamp exists (metal images ship
// it; an image without one would boot without running Ignition) and, when
// networkKargs is not empty, appends the GRUB line that replaces the default
// first-boot network arguments, as coreos-installer --firstboot-args does:
//
//	set ignition_network_kcmdline="ip=… nameserver=…"
func WriteFirstboot(root, networkKargs string) error {
	p := filepath.Join(root, FirstbootPath)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open first-boot stamp %s: %w", p, err)
	}
	if networkKargs != "" {
		if strings.ContainsAny(networkKargs, "\"\n$\\") {
			f.Close()
			return fmt.Errorf("first-boot kernel arguments %q: quotes, newlines, $ and \\ cannot be written into a GRUB string", networkKargs)
		}
		if _, err := fmt.Fprintf(f, "set ignition_network_kcmdline=\"%s\"\n", networkKargs); err != nil {
			f.Close()
			return fmt.Errorf("write first-boot kernel arguments to %s: %w", p, err)
		}
	}
	return f.Close()
}

// DefaultEntry returns the path of the boot loader entry the machine boots
// by default: the last *.conf of EntriesDir in name order (ostree names
// them so that the newest deployment sorts last).
func DefaultEntry(root string) (string, error) {
	dir := filepath.Join(root, EntriesDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read boot loader entries: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".conf") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no boot loader entries in %s", dir)
	}
	sort.Strings(names)
	return filepath.Join(dir, names[len(names)-1]), nil
}

// AppendKargs appends kernel arguments to the options line of the default
// boot loader entry. An entry with no options line or with several is
// refused: the change would be ambiguous.
func AppendKargs(root string, kargs []string) error {
	if len(kargs) == 0 {
		return nil
	}
	p, err := DefaultEntry(root)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read boot loader entry: %w", err)
	}
	out, err := AppendOptions(string(b), kargs)
	if err != nil {
		return fmt.Errorf("boot loader entry %s: %w", p, err)
	}
	return writeFileSync(p, []byte(out))
}

// AppendOptions returns a BLS entry with kargs appended to its options line.
func AppendOptions(entry string, kargs []string) (string, error) {
	var sb strings.Builder
	found := false
	for _, line := range strings.SplitAfter(entry, "\n") {
		if line == "" {
			continue
		}
		body := strings.TrimRight(line, " \t\r\n")
		key, val, _ := strings.Cut(strings.TrimLeft(body, " \t"), " ")
		if key == "options" {
			if found {
				return "", errors.New("several options lines")
			}
			found = true
			fields := strings.Fields(val)
			for _, k := range kargs {
				fields = append(fields, strings.Fields(k)...)
			}
			body = "options " + strings.Join(fields, " ")
		}
		sb.WriteString(body)
		sb.WriteByte('\n')
	}
	if !found {
		return "", errors.New("no options line")
	}
	return sb.String(), nil
}

// CopyNetwork copies the regular files of src (NetworkManager keyfiles) into
// NetworkDir under root, keeping their modes. A missing or empty src copies
// nothing and reports 0.
func CopyNetwork(root, src string) (int, error) {
	ents, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read network config %s: %w", src, err)
	}
	dst := filepath.Join(root, NetworkDir)
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if n == 0 {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return 0, fmt.Errorf("create %s: %w", dst, err)
			}
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy network config: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy network config: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return fmt.Errorf("copy network config to %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Chmod(st.Mode().Perm()); err != nil {
		out.Close()
		return fmt.Errorf("copy network config to %s: %w", dst, err)
	}
	return out.Close()
}

// writeFileSync replaces the content of an existing file in place (keeping
// its mode) and syncs it.
func writeFileSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", p, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("rewrite %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return f.Close()
}
