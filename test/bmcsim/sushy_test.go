package bmcsim

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// sushyPython returns a python3 that can import sushy: Debian's
// /usr/bin/python3 first (python3-sushy installs there, and a python3 earlier
// in PATH, such as pyenv's, does not see it), then python3 from PATH.
func sushyPython(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, p+": not found")
			continue
		}
		if out, err := exec.Command(path, "-c", "import sushy").CombinedOutput(); err != nil {
			tried = append(tried, path+": "+strings.TrimSpace(string(out)))
			continue
		}
		return path
	}
	t.Skipf("no python3 with sushy (apt-get install python3-sushy): %s", strings.Join(tried, "; "))
	return ""
}

// TestSushy runs testdata/sushy_check.py, python3-sushy against a running
// simulator of each personality: the simulator is held to a Redfish client
// that is not ours. Tasks run on the real clock here (one second each); the
// script polls them with a generous deadline.
func TestSushy(t *testing.T) {
	py := sushyPython(t)
	for _, name := range PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab, err := StartLab(LabConfig{N: 1, Personality: name, TaskDuration: time.Second, Disks: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lab.Close() })
			b := lab.BMCs[0]
			u, p := b.Credentials()
			var out bytes.Buffer
			cmd := exec.Command(py, "testdata/sushy_check.py", b.URL, u, p, name)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("sushy_check.py: %v\n%s", err, out.String())
			}
			for _, stepName := range []string{"indicator-led", "memory", "secure-boot", "bios-registry",
				"bios-apply-on-reset", "storage-volumes", "simple-update", "manager-virtual-media", "manager-reset"} {
				if !strings.Contains(out.String(), "ok "+stepName+"\n") {
					t.Errorf("step %s did not pass:\n%s", stepName, out.String())
				}
			}
			if b.ManagerResets() != 1 {
				t.Errorf("manager resets = %d", b.ManagerResets())
			}
		})
	}
}
