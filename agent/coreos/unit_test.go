package coreos

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

func TestValidateIgnition(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		err       string // substring; "" = valid
	}{
		{"minimal", `{"ignition":{"version":"3.0.0"}}`, ""},
		{"spaces", " \n{\"ignition\":{\"version\":\"3.4.0\"}}\n", ""},
		{"bom", "\xef\xbb\xbf{\"ignition\":{\"version\":\"3.4.0\"}}", "line 1, column 1: invalid character"},
		{"experimental", `{"ignition":{"version":"3.6.0-experimental"}}`, ""},
		{"full", `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core"}]},
			"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hi"}}],"links":[{"path":"/a","target":"/b"}]},
			"systemd":{"units":[{"name":"x.service","enabled":true}]},"kernelArguments":{"shouldExist":["a"]}}`, ""},
		{"empty", "  ", "empty config"},
		{"array", `[1]`, "must be a JSON object, not list"},
		{"trailing", `{"ignition":{"version":"3.4.0"}} {}`, "line 1, column 34: data after"},
		{"truncated", "{\"ignition\":\n{\"version\":\"3.4.0\"", "line 2, column 18: unexpected end"},
		{"bad char", "{\n\"ignition\": {\"version\": 3.4.0}}", "line 2, column 28: invalid character '.'"},
		{"no ignition", `{"storage":{}}`, "missing the ignition section"},
		{"numeric version", `{"ignition":{"version":3}}`, "must be a string"},
		{"spec 2", `{"ignition":{"version":"2.3.0"}}`, "spec 2.x/1.x"},
		{"spec 4", `{"ignition":{"version":"4.0.0"}}`, "not a 3.x spec version"},
		{"unknown key", `{"ignition":{"version":"3.4.0"},"networkd":{}}`, `unknown top-level key "networkd"`},
		{"storage not object", `{"ignition":{"version":"3.4.0"},"storage":[]}`, "storage must be an object, not list"},
		{"files not list", `{"ignition":{"version":"3.4.0"},"storage":{"files":{}}}`, "storage.files must be a list"},
		{"relative path", `{"ignition":{"version":"3.4.0"},"storage":{"directories":[{"path":"var/x"}]}}`, "storage.directories[0].path must be an absolute path"},
		{"user without name", `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"uid":1}]}}`, "passwd.users[0] has no name"},
		{"unit not object", `{"ignition":{"version":"3.4.0"},"systemd":{"units":["x"]}}`, "systemd.units[0] must be an object"},
		// Caught by Ignition's own validator.
		{"duplicate path", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a"},{"path":"/a"}]}}`, "$.storage.files.1: duplicate entry defined"},
		{"mode type", "{\"ignition\":{\"version\":\"3.4.0\"},\n\"storage\":{\"files\":[{\"path\":\"/a\",\"mode\":\"0644\"}]}}", "line 2, column"},
		{"bad source", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a","contents":{"source":"nope://x"}}]}}`, "$.storage.files.0.contents.source"},
		{"unit suffix", `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"foo","enabled":true}]}}`, "$.systemd.units.0.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateIgnition([]byte(tc.cfg))
			if tc.err == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			var ie *IgnitionError
			if !errors.As(err, &ie) {
				t.Errorf("error is %T, not *IgnitionError", err)
			}
		})
	}
}

func TestValidateIgnitionWarnings(t *testing.T) {
	w, err := ValidateIgnition([]byte(`{"ignition":{"version":"3.4.0"},"storage":{"filez":[]}}`))
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "filez") {
		t.Errorf("warnings %q, err %v", w, err)
	}
}

func FuzzValidateIgnition(f *testing.F) {
	for _, s := range []string{`{"ignition":{"version":"3.4.0"}}`, "{\n\"a\":", `[]`, `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/x"}]}}`, "\xef\xbb\xbf{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ValidateIgnition(b)
		var ie *IgnitionError
		if err != nil && !errors.As(err, &ie) {
			t.Fatalf("error of type %T: %v", err, err)
		}
		if ie != nil && ie.Line > 0 && (ie.Column < 1 || ie.Line > strings.Count(string(b), "\n")+1) {
			t.Fatalf("position %d:%d out of range", ie.Line, ie.Column)
		}
	})
}

func TestParseOptions(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		node map[string]any
		want Options
		err  string
	}{
		{"defaults", map[string]any{"instance_info": map[string]any{"image_source": "http://x/img.raw.xz", "image_checksum": sha}},
			Options{CopyNetwork: true, ImageURL: "http://x/img.raw.xz", HasChecksum: true}, ""},
		{"metal3", map[string]any{"instance_info": map[string]any{
			"image_source": "http://x/img", "image_os_hash_algo": "sha512", "image_os_hash_value": strings.Repeat("cd", 64),
			"configdrive": map[string]any{"user_data": map[string]any{"ignition": map[string]any{"version": "3.4.0"}},
				"meta_data": map[string]any{"coreos_append_karg": []any{"a=1", " b "}, "coreos_copy_network": false}}}},
			Options{Ignition: []byte(`{"ignition":{"version":"3.4.0"}}`), AppendKargs: []string{"a=1", "b"}, ImageURL: "http://x/img", HasChecksum: true}, ""},
		{"string user_data and string bool", map[string]any{"instance_info": map[string]any{"configdrive": map[string]any{
			"user_data": `{"ignition":{"version":"3.4.0"}}`, "meta_data": map[string]any{"coreos_copy_network": "True"}}}},
			Options{Ignition: []byte(`{"ignition":{"version":"3.4.0"}}`), CopyNetwork: true}, ""},
		{"image_url stands in for a Glance ID", map[string]any{"instance_info": map[string]any{"image_source": "5f1bc3e4-6b0e-4d0c-9d5c-3c1f0f0f0f0f", "image_url": "http://ctrl/images/x.raw"}},
			Options{CopyNetwork: true, ImageURL: "http://ctrl/images/x.raw"}, ""},
		{"rendered configdrive", map[string]any{"instance_info": map[string]any{"configdrive": "H4sIAAAA"}}, Options{}, "pre-rendered"},
		{"bad karg", map[string]any{"instance_info": map[string]any{"configdrive": map[string]any{"meta_data": map[string]any{"coreos_append_karg": []any{1}}}}}, Options{}, "coreos_append_karg[0]"},
		{"bad copy", map[string]any{"instance_info": map[string]any{"configdrive": map[string]any{"meta_data": map[string]any{"coreos_copy_network": "maybe"}}}}, Options{}, "coreos_copy_network"},
		{"bad checksum", map[string]any{"instance_info": map[string]any{"image_checksum": "xyz"}}, Options{}, "image_checksum"},
		{"bad hint", map[string]any{"properties": map[string]any{"root_device": map[string]any{"colour": "red"}}}, Options{}, "root device hints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOptions(tc.node, false)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.Checksum = tc.want.Checksum
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	o, err := ParseOptions(map[string]any{"properties": map[string]any{
		"root_device":        map[string]any{"name": "/dev/sdb"},
		"skip_block_devices": []any{map[string]any{"name": "sda"}},
	}}, false)
	if err != nil || len(o.Hints) != 1 || !reflect.DeepEqual(o.Skip, []string{"sda"}) {
		t.Errorf("hints %v skip %v err %v", o.Hints, o.Skip, err)
	}
}

func TestAppendOptions(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		kargs       []string
		want, err   string
	}{
		{"append", "title x\noptions a b\nlinux /k\n", []string{"c=1", "d e"}, "title x\noptions a b c=1 d e\nlinux /k\n", ""},
		{"trailing spaces and crlf", "title x\r\noptions  a   b  \r\n", []string{"c"}, "title x\noptions a b c\n", ""},
		{"no final newline", "options a", []string{"b"}, "options a b\n", ""},
		{"none", "title x\n", []string{"b"}, "", "no options line"},
		{"two", "options a\noptions b\n", []string{"c"}, "", "several options lines"},
	} {
		got, err := AppendOptions(tc.entry, tc.kargs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestBootFS(t *testing.T) {
	root := t.TempDir()
	ents := filepath.Join(root, EntriesDir)
	os.MkdirAll(ents, 0o755)
	os.WriteFile(filepath.Join(ents, "ostree-1.conf"), []byte("options old\n"), 0o644)
	os.WriteFile(filepath.Join(ents, "ostree-2.conf"), []byte("options new\n"), 0o644)
	if err := AppendKargs(root, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(filepath.Join(ents, "ostree-1.conf"))
	b2, _ := os.ReadFile(filepath.Join(ents, "ostree-2.conf"))
	if string(b1) != "options old\n" || string(b2) != "options new x\n" {
		t.Errorf("only the default (last) entry changes: %q %q", b1, b2)
	}

	if err := WriteFirstboot(root, "ip=eno1:dhcp"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, FirstbootPath)); string(b) != "set ignition_network_kcmdline=\"ip=eno1:dhcp\"\n" {
		t.Errorf("firstboot %q", b)
	}
	if err := WriteFirstboot(root, `x"; reboot; "`); err == nil {
		t.Error("quote in GRUB string accepted")
	}

	if err := WriteIgnition(root, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := WriteIgnition(root, []byte("{}")); err == nil {
		t.Error("existing config.ign overwritten")
	}
	if n, err := CopyNetwork(root, filepath.Join(root, "absent")); n != 0 || err != nil {
		t.Errorf("absent network dir: %d, %v", n, err)
	}
}

func TestInstallerArgs(t *testing.T) {
	o := Options{AppendKargs: []string{"a=1", "b"}, ImageURL: "http://x/i.raw.xz", CopyNetwork: true}
	want := "install --preserve-on-error --ignition-file /tmp/ironic.ign --append-karg a=1,b --image-url http://x/i.raw.xz --insecure --copy-network /dev/sda"
	if got := strings.Join(InstallerArgs("/dev/sda", "/tmp/ironic.ign", o), " "); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := strings.Join(InstallerArgs("/dev/sda", "", Options{}), " "); got != "install --preserve-on-error --offline /dev/sda" {
		t.Errorf("offline: %s", got)
	}
}

// TestInstallerPath runs a stand-in coreos-installer that fails twice, then
// records its arguments and the Ignition file it was given.
func TestInstallerPath(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "coreos-installer")
	os.WriteFile(script, []byte(`#!/bin/sh
n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0.count"
echo "try $n"
if [ $n -lt 3 ]; then echo "Error: transient $n" >&2; exit 1; fi
echo "$@" > "$0.args"
for a in "$@"; do case "$a" in *.ign) cat "$a" > "$0.ign";; esac; done
echo "Install complete."
`), 0o755)
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	m := New()
	m.LookPath = func(string) (string, error) { return script, nil }
	m.RetryDelay = 0
	m.Devices = func(steps.Safety) ([]disk.Device, error) {
		return []disk.Device{{Name: "/dev/fake0", Size: 8 << 30}}, nil
	}
	var logs strings.Builder
	call := steps.Call{Kind: proto.StepDeploy, Step: proto.StepCall{Step: proto.Step{Step: StepName}},
		Node: map[string]any{"instance_info": map[string]any{"image_source": "http://x/i", "configdrive": map[string]any{
			"user_data": `{"ignition":{"version":"3.4.0"}}`, "meta_data": map[string]any{"coreos_append_karg": []any{"k=v"}}}}},
		Safety: steps.Safety{Allow: []string{"/dev/fake0"}},
		Log:    slog.New(slog.NewTextHandler(&logs, nil))}
	res, err := m.Execute(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(Result); r.Method != "coreos-installer" || r.Device != "/dev/fake0" {
		t.Errorf("result %+v", r)
	}
	args, _ := os.ReadFile(script + ".args")
	if !strings.HasPrefix(string(args), "install --preserve-on-error --ignition-file ") ||
		!strings.HasSuffix(string(args), "--append-karg k=v --image-url http://x/i --insecure --copy-network /dev/fake0\n") {
		t.Errorf("args %q", args)
	}
	if ign, _ := os.ReadFile(script + ".ign"); string(ign) != `{"ignition":{"version":"3.4.0"}}` {
		t.Errorf("ignition %q", ign)
	}
	for _, want := range []string{"coreos-installer: Error: transient 1", "coreos-installer: try 3", "coreos-installer: Install complete."} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}

	// Three failures fail the step with the last line.
	os.WriteFile(script+".count", []byte("-10\n"), 0o644)
	call.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := m.Execute(context.Background(), call); err == nil || !strings.Contains(err.Error(), "3 tries") || !strings.Contains(err.Error(), "transient -7") {
		t.Errorf("three failures: %v", err)
	}
}

func TestRegistered(t *testing.T) {
	var m *steps.Manager
	for _, r := range steps.Registered() {
		if r.Name() == ManagerName {
			m = r
		}
	}
	if m == nil {
		t.Fatal("CoreOSInstallHardwareManager not registered")
	}
	set := steps.NewSet(context.Background(), nil, m)
	res := set.Collect(proto.StepDeploy)
	st := res.Steps[ManagerName]
	if len(st) != 1 || st[0].Step != StepName || st[0].Priority != 0 || st[0].Interface != "deploy" {
		t.Errorf("deploy steps %+v", res.Steps)
	}
	if res.HardwareManagerVersion[ManagerName] != ManagerVersion {
		t.Errorf("versions %v", res.HardwareManagerVersion)
	}
	if len(m.Steps(proto.StepClean)) != 0 {
		t.Error("clean steps offered")
	}
	_, err := m.Execute(context.Background(), steps.Call{Kind: proto.StepDeploy, Step: proto.StepCall{Step: proto.Step{Step: "write_image"}}})
	if !errors.Is(err, steps.ErrIncompatibleHardwareMethod) {
		t.Errorf("other step: %v", err)
	}
}
