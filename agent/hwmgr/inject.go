package hwmgr

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
)

// InjectFile is one entry of inject_files' files (IPA's fields).
type InjectFile struct {
	// Path is the absolute path of the file inside the partition.
	Path string `json:"path"`
	// Partition selects the partition: its number on the root device ("2"
	// or 2), a device path (/dev/sda2), PARTUUID=<uuid> or PARTLABEL=<GPT
	// name>. Empty: the first partition of the root device holding the
	// path's top directory (/etc for /etc/hostname).
	Partition any `json:"partition,omitempty"`
	// Content is the file's bytes in base64, or an http(s) URL to fetch.
	Content string `json:"content,omitempty"`
	// Deleted removes the file instead.
	Deleted bool `json:"deleted,omitempty"`
	// Mode and DirMode are the file's and a created leaf directory's
	// permission bits; Owner and Group its ids.
	Mode    *int `json:"mode,omitempty"`
	DirMode *int `json:"dirmode,omitempty"`
	Owner   *int `json:"owner,omitempty"`
	Group   *int `json:"group,omitempty"`
}

// ParseInjectFiles validates properties.inject_files followed by the step's
// files argument, as IPA does.
func ParseInjectFiles(fromProperties, fromArgs any) ([]InjectFile, error) {
	var all []InjectFile
	var fails []string
	for _, src := range []struct {
		name string
		v    any
	}{{"node property inject_files", fromProperties}, {"files argument", fromArgs}} {
		if src.v == nil {
			continue
		}
		list, ok := src.v.([]any)
		if !ok {
			return nil, fmt.Errorf("the %s must be a list, got %T", src.name, src.v)
		}
		for _, e := range list {
			b, _ := json.Marshal(e)
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			var f InjectFile
			if err := dec.Decode(&f); err != nil {
				fails = append(fails, fmt.Sprintf("%s: %v", b, err))
				continue
			}
			switch {
			case f.Path == "" || !strings.HasPrefix(f.Path, "/"):
				fails = append(fails, fmt.Sprintf("%s: expected an absolute path", b))
			case strings.HasSuffix(f.Path, "/") || path.Clean(f.Path) == "/":
				fails = append(fails, fmt.Sprintf("%s: directories are not supported", b))
			case path.Dir(path.Clean(f.Path)) == "/" && partitionSpec(f.Partition) == "":
				fails = append(fails, fmt.Sprintf("%s: a file in the root directory requires \"partition\"", b))
			}
			if f.Content != "" && f.Deleted {
				fails = append(fails, fmt.Sprintf("%s: content cannot be used with deleted", b))
			}
			all = append(all, f)
		}
	}
	if len(fails) > 0 {
		return nil, fmt.Errorf("validation of files failed: %s", strings.Join(fails, "; "))
	}
	return all, nil
}

func partitionSpec(p any) string {
	switch v := p.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.Itoa(int(v))
	case json.Number:
		return v.String()
	}
	return fmt.Sprint(p)
}

func (m *Manager) injectFilesStep(ctx context.Context, call steps.Call) (any, error) {
	files, err := ParseInjectFiles(dict(call.Node["properties"])["inject_files"], call.Step.Args["files"])
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		m.log.Info("no files to inject")
		return nil, nil
	}
	dev, err := m.RootDevice(call.Node, nil, call.Safety)
	if err != nil {
		return nil, err
	}
	return nil, m.InjectFiles(ctx, dev.Name, files, call.Safety)
}

// InjectFiles writes files into the partitions of root device dev, mounting
// each with the kernel's own filesystem driver.
func (m *Manager) InjectFiles(ctx context.Context, dev string, files []InjectFile, s steps.Safety) error {
	if err := s.Check(dev); err != nil {
		return err
	}
	// The kernel may not have parsed the table (an image written since
	// boot, a kernel without the table's parser): sync its partitions.
	if err := disk.RereadPartitions(ctx, dev); err != nil {
		m.log.Warn("re-reading the partition table failed; using the kernel's partitions as they are", "device", dev, "err", err)
	}
	for _, f := range files {
		if err := m.injectOne(ctx, dev, f, s); err != nil {
			return fmt.Errorf("inject %s: %w", f.Path, err)
		}
	}
	return nil
}

func (m *Manager) injectOne(ctx context.Context, dev string, f InjectFile, s steps.Safety) error {
	rel := strings.TrimPrefix(path.Clean(f.Path), "/")
	var content []byte
	if !f.Deleted {
		if isHTTPURL(f.Content) {
			b, err := m.fetch(ctx, f.Content, 1<<30)
			if err != nil {
				return err
			}
			content = b
		} else {
			b, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return fmt.Errorf("content is not base64: %w", err)
			}
			content = b
		}
	}
	spec := partitionSpec(f.Partition)
	if spec != "" {
		part, err := resolvePartition(dev, spec)
		if err != nil {
			return err
		}
		// A partition of the (checked) root device may be mounted; any
		// other device must pass the safety check itself.
		if own, _ := partitionDevices(dev); !slices.Contains(own, part) {
			if err := s.Check(part); err != nil {
				return err
			}
		}
		return withMount(part, func(root string) error { return writeInRoot(root, rel, f, content) })
	}
	top, rest, _ := strings.Cut(rel, "/")
	parts, err := partitionDevices(dev)
	if err != nil {
		return err
	}
	var tried []string
	for _, part := range parts {
		found := false
		err := withMount(part, func(root string) error {
			st, err := os.Lstat(path.Join(root, top))
			if err != nil || !st.IsDir() {
				return nil
			}
			found = true
			m.log.Info("found the path's directory", "dir", "/"+top, "partition", part)
			return writeInRoot(root, top+"/"+rest, f, content)
		})
		if found {
			return err
		}
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", part, err))
		} else {
			tried = append(tried, part)
		}
	}
	return fmt.Errorf("no partition of %s has the directory /%s; scanned %v", dev, top, tried)
}

// partitionDevices lists dev's partitions as the kernel has them.
func partitionDevices(dev string) ([]string, error) {
	kp, err := disk.KernelPartitions(dev)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", dev, err)
	}
	slices.SortFunc(kp, func(a, b disk.Partition) int { return a.Number - b.Number })
	var out []string
	for _, p := range kp {
		out = append(out, "/dev/"+p.Name)
	}
	return out, nil
}

// resolvePartition turns a partition specifier into a device path on dev.
func resolvePartition(dev, spec string) (string, error) {
	num := 0
	if n, err := strconv.Atoi(spec); err == nil {
		num = n
	} else if strings.HasPrefix(spec, "/dev/") {
		return spec, nil
	} else if key, val, ok := strings.Cut(spec, "="); ok {
		t, err := disk.ReadTable(dev)
		if err != nil {
			return "", fmt.Errorf("read the partition table of %s: %w", dev, err)
		}
		for _, p := range t.Partitions {
			if (strings.EqualFold(key, "PARTUUID") && strings.EqualFold(p.UUID, val)) ||
				(strings.EqualFold(key, "PARTLABEL") && p.Name == val) {
				num = p.Number
			}
		}
		if num == 0 {
			return "", fmt.Errorf("no partition of %s has %s", dev, spec)
		}
	} else {
		return "", fmt.Errorf("partition %q: want a number, a /dev path, PARTUUID=… or PARTLABEL=…", spec)
	}
	kp, err := disk.KernelPartitions(dev)
	if err != nil {
		return "", fmt.Errorf("list partitions of %s: %w", dev, err)
	}
	for _, p := range kp {
		if p.Number == num {
			return "/dev/" + p.Name, nil
		}
	}
	return "", fmt.Errorf("%s has no partition %d", dev, num)
}

// fsTypes lists the block filesystems the kernel can mount, the usual root
// filesystems first.
func fsTypes() []string {
	out := []string{"ext4", "xfs", "btrfs", "vfat"}
	f, err := os.Open("/proc/filesystems")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 1 && !slices.Contains(out, fields[0]) {
			out = append(out, fields[0])
		}
	}
	return out
}

// withMount mounts part on a temporary directory with the first filesystem
// type the kernel accepts, runs fn and unmounts.
func withMount(part string, fn func(root string) error) error {
	dir, err := os.MkdirTemp("", "kiln-inject-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	var errs []error
	mounted := false
	for _, t := range fsTypes() {
		if err := unix.Mount(part, dir, t, unix.MS_NOSUID|unix.MS_NODEV, ""); err == nil {
			mounted = true
			break
		} else if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
		}
	}
	if !mounted {
		return fmt.Errorf("mount %s: no filesystem type fits %v", part, errors.Join(errs...))
	}
	ferr := fn(dir)
	if err := unix.Unmount(dir, 0); err != nil {
		return errors.Join(ferr, fmt.Errorf("unmount %s: %w", part, err))
	}
	return ferr
}

// openInRoot opens rel beneath root, resolving symlinks as if root were / so
// that a link in the image (say /etc → /somewhere) cannot send a write into
// the ramdisk.
func openInRoot(rootfd int, rel string, flags uint64, mode uint64) (int, error) {
	return unix.Openat2(rootfd, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: unix.RESOLVE_IN_ROOT})
}

// writeInRoot creates, replaces or deletes rel under root.
func writeInRoot(root, rel string, f InjectFile, content []byte) error {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rootfd)
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if f.Deleted {
		pfd, err := openInRoot(rootfd, orDot(dir), unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open /%s: %w", dir, err)
		}
		defer unix.Close(pfd)
		if err := unix.Unlinkat(pfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete /%s: %w", rel, err)
		}
		return nil
	}
	// Create the missing directories one level at a time; only the leaf
	// gets dirmode, as in IPA.
	if dir != "" {
		comps := strings.Split(dir, "/")
		for i := range comps {
			prefix := strings.Join(comps[:i+1], "/")
			fd, err := openInRoot(rootfd, prefix, unix.O_PATH|unix.O_DIRECTORY, 0)
			if err == nil {
				unix.Close(fd)
				continue
			}
			if !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("open /%s: %w", prefix, err)
			}
			pfd, err := openInRoot(rootfd, orDot(strings.Join(comps[:i], "/")), unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				return fmt.Errorf("open the parent of /%s: %w", prefix, err)
			}
			err = unix.Mkdirat(pfd, comps[i], 0o755)
			unix.Close(pfd)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("mkdir /%s: %w", prefix, err)
			}
			if i == len(comps)-1 && f.DirMode != nil {
				dfd, err := openInRoot(rootfd, prefix, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					return fmt.Errorf("open /%s: %w", prefix, err)
				}
				err = unix.Fchmod(dfd, uint32(*f.DirMode))
				unix.Close(dfd)
				if err != nil {
					return fmt.Errorf("chmod /%s: %w", prefix, err)
				}
			}
		}
	}
	fd, err := openInRoot(rootfd, rel, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create /%s: %w", rel, err)
	}
	file := os.NewFile(uintptr(fd), rel)
	defer file.Close()
	if _, err := io.Copy(file, strings.NewReader(string(content))); err != nil {
		return fmt.Errorf("write /%s: %w", rel, err)
	}
	if f.Mode != nil {
		if err := unix.Fchmod(int(file.Fd()), uint32(*f.Mode)&0o7777); err != nil {
			return fmt.Errorf("chmod /%s: %w", rel, err)
		}
	}
	if f.Owner != nil || f.Group != nil {
		uid, gid := -1, -1
		if f.Owner != nil {
			uid = *f.Owner
		}
		if f.Group != nil {
			gid = *f.Group
		}
		if err := file.Chown(uid, gid); err != nil {
			return fmt.Errorf("chown /%s: %w", rel, err)
		}
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("sync /%s: %w", rel, err)
	}
	return file.Close()
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}
