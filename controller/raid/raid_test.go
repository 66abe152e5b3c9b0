package raid

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, wantErr string // wantErr "" = valid
	}{
		{"empty clears", `{}`, ""},
		{"one disk", `{"logical_disks":[{"raid_level":"1","size_gb":100}]}`, ""},
		{"MAX and every key", `{"logical_disks":[{"raid_level":"1+0","size_gb":"MAX","volume_name":"root","is_root_volume":true,"share_physical_disks":false,"disk_type":"ssd","interface_type":"sas","number_of_physical_disks":4,"controller":"RAID.Integrated.1-1","physical_disks":["d0","d1"]}]}`, ""},
		{"JBOD size 0", `{"logical_disks":[{"raid_level":"JBOD","size_gb":0}]}`, ""},
		{"physical disks as objects", `{"logical_disks":[{"raid_level":"1","size_gb":10,"controller":"c","physical_disks":[{"a":1},{"b":2}]}]}`, ""},
		{"no logical_disks", `{"foo":1}`, "unexpected"},
		{"logical_disks not a list", `{"logical_disks":{}}`, "must be a list"},
		{"no disks", `{"logical_disks":[]}`, "at least one"},
		{"disk not an object", `{"logical_disks":[1]}`, "not an object"},
		{"no raid_level", `{"logical_disks":[{"size_gb":10}]}`, "raid_level"},
		{"no size", `{"logical_disks":[{"raid_level":"1"}]}`, "size_gb"},
		{"bad level", `{"logical_disks":[{"raid_level":"7","size_gb":10}]}`, "raid_level"},
		{"level as number", `{"logical_disks":[{"raid_level":1,"size_gb":10}]}`, "raid_level"},
		{"negative size", `{"logical_disks":[{"raid_level":"1","size_gb":-1}]}`, "size_gb"},
		{"fractional size", `{"logical_disks":[{"raid_level":"1","size_gb":1.5}]}`, "size_gb"},
		{"size min", `{"logical_disks":[{"raid_level":"1","size_gb":"min"}]}`, "size_gb"},
		{"unknown key", `{"logical_disks":[{"raid_level":"1","size_gb":10,"speed":"fast"}]}`, "speed"},
		{"bad disk type", `{"logical_disks":[{"raid_level":"1","size_gb":10,"disk_type":"nvme"}]}`, "disk_type"},
		{"bad interface", `{"logical_disks":[{"raid_level":"1","size_gb":10,"interface_type":"usb"}]}`, "interface_type"},
		{"zero disks", `{"logical_disks":[{"raid_level":"1","size_gb":10,"number_of_physical_disks":0}]}`, "number_of_physical_disks"},
		{"root not a bool", `{"logical_disks":[{"raid_level":"1","size_gb":10,"is_root_volume":"yes"}]}`, "is_root_volume"},
		{"name not a string", `{"logical_disks":[{"raid_level":"1","size_gb":10,"volume_name":3}]}`, "volume_name"},
		{"physical disks without controller", `{"logical_disks":[{"raid_level":"1","size_gb":10,"physical_disks":["a","b"]}]}`, "controller"},
		{"one physical disk object", `{"logical_disks":[{"raid_level":"1","size_gb":10,"controller":"c","physical_disks":[{"a":1}]}]}`, "at least 2"},
		{"two roots", `{"logical_disks":[{"raid_level":"1","size_gb":10,"is_root_volume":true},{"raid_level":"0","size_gb":"MAX","is_root_volume":true}]}`, "more than one root volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg map[string]any
			d := json.NewDecoder(strings.NewReader(tc.cfg))
			d.UseNumber()
			if err := d.Decode(&cfg); err != nil {
				t.Fatal(err)
			}
			err := Validate(cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("valid config refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("invalid config accepted")
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestEveryPropertyIsChecked(t *testing.T) {
	// Each described key is accepted on a disk (with a valid value).
	valid := map[string]any{"raid_level": "1", "size_gb": json.Number("1"), "volume_name": "v", "is_root_volume": false,
		"share_physical_disks": true, "disk_type": "hdd", "interface_type": "sata", "number_of_physical_disks": json.Number("2"),
		"controller": "c", "physical_disks": []any{"a"}}
	for k := range LogicalDiskProperties {
		if _, ok := valid[k]; !ok {
			t.Errorf("no valid value for %s in this test", k)
		}
	}
	if err := Validate(map[string]any{"logical_disks": []any{valid}}); err != nil {
		t.Error(err)
	}
}
