package raid

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/agent/disk"
)

var fourDisks = []disk.Device{
	{Name: "/dev/nvme0n1", Size: 100 << 30, Tran: "nvme", Model: "fast"},
	{Name: "/dev/sda", Size: 500 << 30, Tran: "sata", Serial: "A1"},
	{Name: "/dev/sdb", Size: 500 << 30, Tran: "sata", Serial: "B2"},
	{Name: "/dev/sdc", Size: 2000 << 30, Tran: "sas", Rotational: true},
}

func lds(t *testing.T, cfg string) []LogicalDisk {
	t.Helper()
	l, err := Target(node(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestMembers(t *testing.T) {
	for _, c := range []struct {
		name, cfg string
		all       []string
		per       [][]string
		err       string
	}{
		{"every disk", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`,
			[]string{"/dev/nvme0n1", "/dev/sda", "/dev/sdb", "/dev/sdc"}, [][]string{{"/dev/nvme0n1", "/dev/sda", "/dev/sdb", "/dev/sdc"}}, ""},
		{"hints pick two", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":[{"serial":"B2"},{"serial":"A1"}]}]}`,
			[]string{"/dev/sdb", "/dev/sda"}, [][]string{{"/dev/sdb", "/dev/sda"}}, ""},
		{"same hint twice takes the next match", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":[{"tran":"sata"},{"tran":"sata"}]}]}`,
			[]string{"/dev/sda", "/dev/sdb"}, [][]string{{"/dev/sda", "/dev/sdb"}}, ""},
		{"two logical disks share members", `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software","physical_disks":[{"tran":"sata"},{"tran":"sata"}]},
			{"size_gb":"MAX","raid_level":"0","controller":"software","physical_disks":[{"size":">= 400"},{"rotational":true}]}]}`,
			[]string{"/dev/sda", "/dev/sdb", "/dev/sdc"}, [][]string{{"/dev/sda", "/dev/sdb"}, {"/dev/sda", "/dev/sdc"}}, ""},
		{"no candidate", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":[{"serial":"ZZ"},{"serial":"A1"}]}]}`,
			nil, nil, "no candidates for physical disk"},
		{"candidates used up", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":[{"tran":"nvme"},{"tran":"nvme"}]}]}`,
			nil, nil, "no candidates left"},
		{"bad hint", `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software","physical_disks":[{"colour":"red"},{"tran":"nvme"}]}]}`,
			nil, nil, "physical disk"},
	} {
		t.Run(c.name, func(t *testing.T) {
			all, per, err := Members(fourDisks, lds(t, c.cfg))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Members = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(all, c.all) || !reflect.DeepEqual(per, c.per) {
				t.Fatalf("Members = %v %v %v, want %v %v", all, per, err, c.all, c.per)
			}
		})
	}
	// RAID-1 needs two disks.
	if _, _, err := Members(fourDisks[:1], lds(t, `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`)); err == nil || !strings.Contains(err.Error(), "at least 2 disks") {
		t.Fatalf("one disk: %v", err)
	}
}

func TestMakePlan(t *testing.T) {
	const M, G = int64(1 << 20), int64(1 << 30)
	two := [][]string{{"/dev/sda", "/dev/nvme0n1"}, {"/dev/sda", "/dev/nvme0n1"}}
	sizes := map[string]int64{"/dev/sda": 500 * G, "/dev/nvme0n1": 100 * G}
	esp := disk.PartSpec{Start: M, Size: 550 * M, GPTType: disk.GPTTypeESP, Name: "uefi-holder"}
	biosBoot := disk.PartSpec{Start: M, Size: 7 * M, GPTType: disk.GPTTypeBIOSBoot, Name: "bios-boot"}
	raid := func(start, size int64, idx string) disk.PartSpec {
		return disk.PartSpec{Start: start, Size: size, GPTType: disk.GPTTypeLinuxRAID, MBRType: disk.MBRTypeLinuxRAID, Name: "raid-" + idx}
	}
	for _, c := range []struct {
		name, mode, label, cfg string
		per                    [][]string
		wantLabel              string
		start                  int64
		sda                    []disk.PartSpec
		arrays                 [][]string
		levels                 []string
		err                    string
	}{
		{name: "uefi RAID-1 MAX", mode: "uefi", cfg: `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`,
			per: two[:1], wantLabel: "gpt", start: 551 * M, sda: []disk.PartSpec{esp, raid(551*M, 0, "0")},
			arrays: [][]string{{"/dev/sda2", "/dev/nvme0n1p2"}}, levels: []string{"1"}},
		{name: "bios MBR: first partition ends at its size", mode: "bios", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":"MAX","raid_level":"0","controller":"software"}]}`,
			per: two, wantLabel: "msdos", start: M, sda: []disk.PartSpec{raid(M, 10*G-M, "0"), raid(10*G, 0, "1")},
			arrays: [][]string{{"/dev/sda1", "/dev/nvme0n1p1"}, {"/dev/sda2", "/dev/nvme0n1p2"}}, levels: []string{"1", "0"}},
		{name: "bios GPT leaves 8 MiB", mode: "bios", label: "gpt", cfg: `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`,
			per: two[:1], wantLabel: "gpt", start: 8 * M, sda: []disk.PartSpec{biosBoot, raid(8*M, 0, "0")},
			arrays: [][]string{{"/dev/sda2", "/dev/nvme0n1p2"}}, levels: []string{"1"}},
		{name: "MAX moved last", mode: "uefi", cfg: `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"},{"size_gb":20,"raid_level":"1+0","controller":"software"}]}`,
			per: two, wantLabel: "gpt", start: 551 * M, sda: []disk.PartSpec{esp, raid(551*M, 20*G-551*M, "0"), raid(20*G, 0, "1")},
			arrays: [][]string{{"/dev/sda2", "/dev/nvme0n1p2"}, {"/dev/sda3", "/dev/nvme0n1p3"}}, levels: []string{"10", "1"}},
		{name: "second fixed size follows the first", mode: "bios", cfg: `{"logical_disks":[{"size_gb":10,"raid_level":"1","controller":"software"},{"size_gb":30,"raid_level":"1","controller":"software"}]}`,
			per: two, wantLabel: "msdos", start: M, sda: []disk.PartSpec{raid(M, 10*G-M, "0"), raid(10*G, 30*G, "1")},
			arrays: [][]string{{"/dev/sda1", "/dev/nvme0n1p1"}, {"/dev/sda2", "/dev/nvme0n1p2"}}, levels: []string{"1", "1"}},
		{name: "does not fit", mode: "bios", cfg: `{"logical_disks":[{"size_gb":200,"raid_level":"1","controller":"software"}]}`,
			per: two[:1], err: "does not fit on /dev/nvme0n1"},
		{name: "uefi on MBR", mode: "uefi", label: "msdos", cfg: `{"logical_disks":[{"size_gb":"MAX","raid_level":"1","controller":"software"}]}`,
			per: two[:1], err: "needs gpt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := MakePlan(c.mode, c.label, lds(t, c.cfg), c.per, sizes)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("MakePlan = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Label != c.wantLabel || p.Start != c.start || !reflect.DeepEqual(p.Tables["/dev/sda"], c.sda) {
				t.Fatalf("plan %s start %d sda %+v; want %s %d %+v", p.Label, p.Start, p.Tables["/dev/sda"], c.wantLabel, c.start, c.sda)
			}
			var arrays [][]string
			var levels []string
			for i, a := range p.Arrays {
				if a.Index != i {
					t.Errorf("array %d has index %d", i, a.Index)
				}
				arrays = append(arrays, a.Members)
				levels = append(levels, mdadmLevel(a.Disk.RAIDLevel))
			}
			if !reflect.DeepEqual(arrays, c.arrays) || !reflect.DeepEqual(levels, c.levels) {
				t.Fatalf("arrays %v levels %v; want %v %v", arrays, levels, c.arrays, c.levels)
			}
		})
	}
}
