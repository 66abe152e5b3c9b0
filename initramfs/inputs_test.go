package initramfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInputsIgnoreDirectory: inputs.sh hashes what the kernel directory
// holds, not where it is, so TestBootQEMU's fresh temporary kernel
// directory finds the initramfs cached by an earlier run; a changed module
// is a different hash.
func TestInputsIgnoreDirectory(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("go not on PATH: %v", err)
	}
	kernelDir := func(module string) string {
		d := t.TempDir()
		for name, content := range map[string]string{
			"vmlinuz": "stand-in kernel", "pci.ids.gz": "stand-in pci.ids",
			"modules/virtio_net.ko": module, "modules/order": "virtio_net.ko\n",
		} {
			p := filepath.Join(d, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	hash := func(kdir string) string {
		cmd := exec.Command("./inputs.sh", "./initramfs/testinit", kdir)
		cmd.Env = append(os.Environ(), testZstdLevel)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inputs.sh %s: %v\n%s", kdir, err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	a, b, c := hash(kernelDir("module 1")), hash(kernelDir("module 1")), hash(kernelDir("module 2"))
	if len(a) != 64 {
		t.Fatalf("inputs.sh printed %q, want a SHA-256", a)
	}
	if a != b {
		t.Errorf("the same kernel files in two directories hash to %s and %s", a, b)
	}
	if a == c {
		t.Errorf("a changed module left the hash at %s", a)
	}
}
