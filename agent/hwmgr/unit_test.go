package hwmgr

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
	"github.com/kilnhq/kiln/agent/steps"
)

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func TestDecodeConfigDrive(t *testing.T) {
	iso := append([]byte("\x00\x01ISO"), bytes.Repeat([]byte{7}, 5000)...)
	b64gz := base64.StdEncoding.EncodeToString(gz(iso))
	wrapped := ""
	for i := 0; i < len(b64gz); i += 60 {
		wrapped += b64gz[i:min(i+60, len(b64gz))] + "\n"
	}
	cases := []struct {
		name    string
		in      []byte
		want    []byte
		wantErr string
	}{
		{"gzip+base64", []byte(b64gz), iso, ""},
		{"gzip+base64 with newlines", []byte(wrapped), iso, ""},
		{"base64 only", []byte(base64.StdEncoding.EncodeToString(iso)), iso, ""},
		{"gzip only", gz(iso), iso, ""},
		{"raw", iso, iso, ""},
		{"empty after decode", []byte(base64.StdEncoding.EncodeToString(gz(nil))), nil, "empty"},
		{"bad gzip", []byte(base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 1, 2, 3})), nil, "gunzip"},
		{"too large", []byte(base64.StdEncoding.EncodeToString(gz(make([]byte, disk.MaxConfigDriveSize+1)))), nil, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeConfigDrive(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.want) {
				t.Fatalf("decoded %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
}

func FuzzDecodeConfigDrive(f *testing.F) {
	f.Add([]byte(base64.StdEncoding.EncodeToString(gz([]byte("iso")))))
	f.Add(gz([]byte("x")))
	f.Add([]byte("not base64 !!"))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := DecodeConfigDrive(b)
		if err == nil && (len(out) == 0 || len(out) > disk.MaxConfigDriveSize) {
			t.Fatalf("accepted %d bytes", len(out))
		}
	})
}

func TestConfigDriveParam(t *testing.T) {
	m := New(Options{})
	ctx := context.Background()
	for _, raw := range []string{``, `null`, `""`} {
		got, err := m.ConfigDrive(ctx, json.RawMessage(raw))
		if err != nil || got != nil {
			t.Errorf("%q: got %v, %v; want none", raw, got, err)
		}
	}
	if _, err := m.ConfigDrive(ctx, json.RawMessage(`{"meta_data":{}}`)); err == nil || !strings.Contains(err.Error(), "controller must render") {
		t.Errorf("dict: err = %v", err)
	}
	s, _ := json.Marshal(base64.StdEncoding.EncodeToString(gz([]byte("ISO"))))
	got, err := m.ConfigDrive(ctx, s)
	if err != nil || string(got) != "ISO" {
		t.Errorf("string: %q, %v", got, err)
	}
}

func TestParseInjectFiles(t *testing.T) {
	list := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name       string
		props, arg string
		n          int
		wantErr    string
	}{
		{"none", `null`, `null`, 0, ""},
		{"merged", `[{"path":"/etc/a","content":"eA=="}]`, `[{"path":"/etc/b","partition":2,"mode":420}]`, 2, ""},
		{"relative", `null`, `[{"path":"etc/a"}]`, 0, "absolute path"},
		{"directory", `null`, `[{"path":"/etc/"}]`, 0, "directories"},
		{"root dir needs partition", `null`, `[{"path":"/a"}]`, 0, "requires \"partition\""},
		{"root dir with partition", `null`, `[{"path":"/a","partition":"1"}]`, 1, ""},
		{"content and deleted", `null`, `[{"path":"/etc/a","content":"eA==","deleted":true}]`, 0, "deleted"},
		{"unknown field", `null`, `[{"path":"/etc/a","colour":"red"}]`, 0, "colour"},
		{"mode not a number", `null`, `[{"path":"/etc/a","mode":"644"}]`, 0, "mode"},
		{"not a list", `{"path":"/etc/a"}`, `null`, 0, "must be a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, err := ParseInjectFiles(list(c.props), list(c.arg))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != c.n {
				t.Fatalf("%d files, want %d", len(files), c.n)
			}
		})
	}
}

func TestRootDeviceSelection(t *testing.T) {
	devs := []disk.Device{
		{Name: "/dev/sda", Size: 100 << 30, Serial: "big"},
		{Name: "/dev/sdb", Size: 8 << 30, Serial: "small"},
		{Name: "/dev/sdc", Size: 2 << 30, Serial: "tiny"},
	}
	m := New(Options{Devices: func() ([]disk.Device, error) { return devs, nil }})
	ramdisk := steps.Safety{InRamdisk: true}
	node := func(s string) steps.Node {
		var n steps.Node
		if err := json.Unmarshal([]byte(s), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cases := []struct {
		name    string
		node    string
		image   map[string]any
		safety  steps.Safety
		want    string
		wantErr string
	}{
		{"default smallest >= 4 GiB", `{}`, nil, ramdisk, "/dev/sdb", ""},
		{"skip_block_devices", `{"properties":{"skip_block_devices":[{"name":"/dev/sdb"}]}}`, nil, ramdisk, "/dev/sda", ""},
		{"properties hint", `{"properties":{"root_device":{"serial":"big"}}}`, nil, ramdisk, "/dev/sda", ""},
		{"instance_info over properties", `{"properties":{"root_device":{"serial":"big"}},"instance_info":{"root_device":{"name":"/dev/sdc"}}}`, nil, ramdisk, "/dev/sdc", ""},
		{"image_info over node", `{"instance_info":{"root_device":{"name":"/dev/sdc"}}}`, map[string]any{"serial": "s== small"}, ramdisk, "/dev/sdb", ""},
		{"bad hint", `{"properties":{"root_device":{"colour":"red"}}}`, nil, ramdisk, "", "root device hints"},
		{"outside ramdisk: only allowed devices", `{"properties":{"root_device":{"name":"/dev/sdc"}}}`, nil, steps.Safety{Allow: []string{"/dev/sdc"}}, "/dev/sdc", ""},
		{"outside ramdisk: others never chosen", `{}`, nil, steps.Safety{Allow: []string{"/dev/sdc"}}, "", "choose the root device"},
		{"outside ramdisk: nothing allowed", `{}`, nil, steps.Safety{}, "", "not running in a ramdisk"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := m.RootDevice(node(c.node), c.image, c.safety)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %s, err = %v, want %q", d.Name, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Name != c.want {
				t.Fatalf("chose %s, want %s", d.Name, c.want)
			}
		})
	}
}

func TestEraseRefusedOutsideRamdisk(t *testing.T) {
	m := New(Options{Devices: func() ([]disk.Device, error) { return []disk.Device{{Name: "/dev/sda", Size: 1 << 30}}, nil }})
	_, err := m.Erase(context.Background(), StepEraseMetadata, steps.Node{}, steps.Safety{}, nil)
	if err == nil || !strings.Contains(err.Error(), "not running in a ramdisk") {
		t.Fatalf("err = %v", err)
	}
	_, err = m.Erase(context.Background(), StepEraseMetadata, steps.Node{}, steps.Safety{Allow: []string{"/dev/loop99"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "no disk to erase") {
		t.Fatalf("err = %v", err)
	}
}

func TestStepsOffered(t *testing.T) {
	f := steps.MustManager("generic_hardware_manager", "1.0", steps.SupportGeneric, New(Options{}).Steps()...)
	prio := map[string]int{}
	for _, s := range f.Steps("clean") {
		prio["clean."+s.Step] = s.Priority
	}
	for _, s := range f.Steps("deploy") {
		prio["deploy."+s.Step] = s.Priority
	}
	want := map[string]int{"clean.erase_devices_metadata": 99, "clean.erase_devices": 10, "clean.erase_devices_express": 0,
		"deploy.erase_devices_metadata": 0, "deploy.inject_files": 0}
	for k, v := range want {
		if p, ok := prio[k]; !ok || p != v {
			t.Errorf("%s: priority %d (offered %v), want %d", k, p, ok, v)
		}
	}
}

func FuzzParseInjectFiles(f *testing.F) {
	f.Add(`[{"path":"/etc/a","content":"eA==","mode":384}]`)
	f.Add(`[{"path":"/a","partition":2,"deleted":true}]`)
	f.Add(`{"path":"/etc/a"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		files, err := ParseInjectFiles(nil, v)
		if err != nil {
			return
		}
		for _, fl := range files {
			if !strings.HasPrefix(fl.Path, "/") || strings.HasSuffix(fl.Path, "/") || (fl.Deleted && fl.Content != "") {
				t.Fatalf("accepted %+v", fl)
			}
		}
	})
}
