package raid

import (
	"encoding/json"
	"strings"
	"testing"
)

func node(t *testing.T, cfg string) map[string]any {
	t.Helper()
	var n map[string]any
	if err := json.Unmarshal([]byte(`{"uuid":"n1","target_raid_config":`+cfg+`}`), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTargetAndValidate(t *testing.T) {
	for _, c := range []struct {
		name, cfg string
		disks     int
		none      bool   // no software RAID asked for
		parseErr  string // from Target
		err       string // from Validate
	}{
		{name: "no config", cfg: `{}`, none: true},
		{name: "null", cfg: `null`, none: true},
		{name: "hardware only", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"RAID.Integrated.1-1"}]}`, none: true},
		{name: "RAID-1 root, MAX", cfg: `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","is_root_volume":true}]}`, disks: 2},
		{name: "RAID-1 then RAID-0 MAX", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, disks: 2},
		{name: "1+0 second", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"1+0","controller":"software"}]}`, disks: 4},
		{name: "first not RAID-1", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"0","controller":"software"}]}`, disks: 2, err: "requires RAID-1 for the first"},
		{name: "mixed controllers", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0"}]}`, disks: 2, err: "'controller'='software'"},
		{name: "three disks", cfg: `{"logical_disks":[{"size_gb":1,"raid_level":"1","controller":"software"},{"size_gb":1,"raid_level":"1","controller":"software"},{"size_gb":1,"raid_level":"1","controller":"software"}]}`, disks: 2, err: "one or two logical disks"},
		{name: "two MAX", cfg: `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`, disks: 2, err: "only one RAID device with size 'MAX'"},
		{name: "RAID-5 on two disks", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"5","controller":"software"}]}`, disks: 2, err: "RAID level 5 with only 2"},
		{name: "RAID-6 on three disks", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"6","controller":"software"}]}`, disks: 3, err: "RAID level 6 with only 3"},
		{name: "unsupported level", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"5+0","controller":"software"}]}`, disks: 6, err: "does not support RAID level 5+0"},
		{name: "two roots", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software","is_root_volume":true},{"size_gb":"MAX","raid_level":"0","controller":"software","is_root_volume":true}]}`, disks: 2, err: "only one logical disk to be marked as is_root_volume"},
		{name: "duplicate names", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software","volume_name":"a"},{"size_gb":"MAX","raid_level":"0","controller":"software","volume_name":"a"}]}`, disks: 2, err: "Duplicate software RAID device name a"},
		{name: "size zero", cfg: `{"logical_disks":[{"size_gb":0,"raid_level":"1","controller":"software"}]}`, parseErr: "positive whole number"},
		{name: "size fraction", cfg: `{"logical_disks":[{"size_gb":1.5,"raid_level":"1","controller":"software"}]}`, parseErr: "positive whole number"},
		{name: "size word", cfg: `{"logical_disks":[{"size_gb":"ALL","raid_level":"1","controller":"software"}]}`, parseErr: "size_gb \"ALL\""},
		{name: "no size", cfg: `{"logical_disks":[{"raid_level":"1","controller":"software"}]}`, parseErr: "size_gb is missing"},
		{name: "no level", cfg: `{"logical_disks":[{"size_gb":1,"controller":"software"}]}`, parseErr: "raid_level is missing"},
		{name: "one physical disk", cfg: `{"logical_disks":[{"size_gb":1,"raid_level":"1","controller":"software","physical_disks":[{"name":"/dev/sda"}]}]}`, parseErr: "at least 2 items"},
		{name: "physical disk not a hint", cfg: `{"logical_disks":[{"size_gb":1,"raid_level":"1","controller":"software","physical_disks":["/dev/sda","/dev/sdb"]}]}`, parseErr: "list of device hints"},
		{name: "bad volume name", cfg: `{"logical_disks":[{"size_gb":1,"raid_level":"1","controller":"software","volume_name":"a/b"}]}`, parseErr: "volume_name"},
		{name: "logical_disks not a list", cfg: `{"logical_disks":{}}`, parseErr: "want a list"},
		{name: "config not an object", cfg: `[]`, parseErr: "want an object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lds, err := Target(node(t, c.cfg))
			if c.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.parseErr) {
					t.Fatalf("Target = %v, want %q", err, c.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.none {
				if lds != nil {
					t.Fatalf("Target = %+v, want none", lds)
				}
				return
			}
			err = Validate(lds, c.disks)
			if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("Validate = %v, want %q", err, c.err)
			}
		})
	}
}

func TestParsedFields(t *testing.T) {
	lds, err := Target(node(t, `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","is_root_volume":true,
		"volume_name":"root","physical_disks":[{"size":">= 100"},{"name":"/dev/sdb"}]}]}`))
	if err != nil || len(lds) != 1 {
		t.Fatal(lds, err)
	}
	ld := lds[0]
	if !ld.Max || ld.SizeGB != 0 || ld.RAIDLevel != "1" || ld.VolumeName != "root" || ld.IsRootVolume == nil || !*ld.IsRootVolume ||
		len(ld.PhysicalDisks) != 2 || ld.PhysicalDisks[1]["name"] != "/dev/sdb" {
		t.Fatalf("parsed %+v", ld)
	}
}

func TestBootMode(t *testing.T) {
	for _, c := range []struct {
		node             string
		def, mode, label string
	}{
		{`{}`, "bios", "bios", ""},
		{`{}`, "uefi", "uefi", ""},
		{`{"instance_info":{"deploy_boot_mode":"uefi"}}`, "bios", "uefi", ""},
		{`{"properties":{"capabilities":"boot_mode:uefi,disk_label:gpt"}}`, "bios", "uefi", "gpt"},
		{`{"properties":{"capabilities":"boot_mode:bios"},"instance_info":{"capabilities":{"disk_label":"gpt"}}}`, "uefi", "bios", "gpt"},
		{`{"properties":{"capabilities":"secure_boot:true"}}`, "bios", "uefi", ""},
		{`{"properties":{"capabilities":"boot_mode:weird"}}`, "bios", "bios", ""},
	} {
		var n map[string]any
		if err := json.Unmarshal([]byte(c.node), &n); err != nil {
			t.Fatal(err)
		}
		if mode, label := BootMode(n, c.def); mode != c.mode || label != c.label {
			t.Errorf("BootMode(%s, %s) = %s, %q; want %s, %q", c.node, c.def, mode, label, c.mode, c.label)
		}
	}
}
