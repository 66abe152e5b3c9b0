package redfish_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/controller/driver/redfish"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/bmcsim"
)

// raidLab is one BMC with four 10 GiB drives whose task clock moves only
// when the step waits: each wait advances it by the poll interval.
func raidLab(t *testing.T, personality string) (*bmcsim.Lab, driver.StepEnv) {
	t.Helper()
	clk := bmcsim.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	lab, err := bmcsim.StartLab(bmcsim.LabConfig{N: 1, Personality: personality, Disks: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	env := driver.StepEnv{
		Wait:     func(ctx context.Context, d time.Duration) error { clk.Advance(d); return ctx.Err() },
		Deadline: 10 * time.Minute,
	}
	return lab, env
}

func target(disks ...proto.Dict) proto.Dict {
	var l []any
	for _, d := range disks {
		l = append(l, map[string]any(d))
	}
	return proto.Dict{"logical_disks": l}
}

// TestRAIDEveryPersonality builds a RAID-1 root volume and a RAID-0 data
// volume, records them with the root device hint, and deletes them, on
// every personality (each has its own storage ID and task IDs); prints
// each step's wall time and BMC requests.
func TestRAIDEveryPersonality(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab, env := raidLab(t, name)
			r := &redfish.RAID{Pool: newPool(t, fast)}
			n := nodeFor(lab.BMCs[0], nil)
			disks, err := driver.ParseTargetRAID(target(
				proto.Dict{"size_gb": "MAX", "raid_level": "0"},
				proto.Dict{"size_gb": float64(8), "raid_level": "1", "is_root_volume": true, "volume_name": "root"},
			), true, true)
			if err != nil {
				t.Fatal(err)
			}
			before := lab.Requests()[0]
			start := time.Now()
			res, err := r.CreateConfiguration(ctx, n, disks, env)
			t.Logf("personality %s: raid.create_configuration (RAID-1 root + RAID-0) took %s and %d BMC requests", name, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			lds := res.RAIDConfig["logical_disks"].([]any)
			if len(lds) != 2 {
				t.Fatalf("raid_config %v", res.RAIDConfig)
			}
			root := lds[0].(proto.Dict)
			if root["is_root_volume"] != true || root["raid_level"] != "1" || root["size_gb"] != int64(8) || root["volume_name"] != "root" || len(root["physical_disks"].([]any)) != 2 {
				t.Errorf("root logical disk %v", root)
			}
			if data := lds[1].(proto.Dict); data["raid_level"] != "0" || data["size_gb"] != int64(10) || len(data["physical_disks"].([]any)) != 1 {
				t.Errorf("data logical disk %v", data)
			}
			if fmt.Sprint(res.RootDevice) != "map[size:8]" || fmt.Sprint(root["root_device_hint"]) != "map[size:8]" {
				t.Errorf("root device %v", res.RootDevice)
			}
			// A third volume needs drives that are taken.
			more, _ := driver.ParseTargetRAID(target(proto.Dict{"size_gb": "MAX", "raid_level": "1"}), true, true)
			if _, err := r.CreateConfiguration(ctx, n, more, env); err == nil || !strings.Contains(err.Error(), "needs 2 free drives") {
				t.Errorf("RAID-1 on one free drive: %v", err)
			}

			before = lab.Requests()[0]
			start = time.Now()
			res, err = r.DeleteConfiguration(ctx, n, env)
			t.Logf("personality %s: raid.delete_configuration took %s and %d BMC requests", name, time.Since(start).Round(time.Millisecond), lab.Requests()[0]-before)
			if err != nil || len(res.RAIDConfig) != 0 {
				t.Fatalf("delete: %v %v", res, err)
			}
			// All four drives are free again.
			four, _ := driver.ParseTargetRAID(target(proto.Dict{"size_gb": "MAX", "raid_level": "10"}), true, true)
			if _, err := r.CreateConfiguration(ctx, n, four, env); err != nil {
				t.Errorf("RAID-10 on the freed drives: %v", err)
			}
		})
	}
}

// TestRAIDFaults: a task that fails halfway (monitor 500) and a task that
// never completes fail the step naming the task.
func TestRAIDFaults(t *testing.T) {
	ctx := context.Background()
	for _, name := range bmcsim.PersonalityNames() {
		t.Run(name, func(t *testing.T) {
			lab, env := raidLab(t, name)
			r := &redfish.RAID{Pool: newPool(t, fast)}
			n := nodeFor(lab.BMCs[0], nil)
			disks, _ := driver.ParseTargetRAID(target(proto.Dict{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}), true, true)

			if err := lab.SetFaults(bmcsim.Faults{TaskError: true}); err != nil {
				t.Fatal(err)
			}
			_, err := r.CreateConfiguration(ctx, n, disks, env)
			if err == nil || !strings.Contains(err.Error(), "create logical disk 0") || !strings.Contains(err.Error(), "TaskMonitors") {
				t.Errorf("task error: %v", err)
			}
			if err := lab.SetFaults(bmcsim.Faults{TaskHang: true}); err != nil {
				t.Fatal(err)
			}
			env.Deadline = time.Minute
			_, err = r.CreateConfiguration(ctx, n, disks, env)
			if err == nil || !strings.Contains(err.Error(), "still Running at 50% after 1m0s") {
				t.Errorf("hung task: %v", err)
			}
		})
	}
}

func TestParseTargetRAID(t *testing.T) {
	for name, c := range map[string]struct {
		target proto.Dict
		want   string
	}{
		"no disks":     {proto.Dict{}, "no logical_disks"},
		"no size":      {target(proto.Dict{"raid_level": "1"}), "size_gb is required"},
		"bad size":     {target(proto.Dict{"size_gb": "big", "raid_level": "1"}), `size_gb "big"`},
		"bad level":    {target(proto.Dict{"size_gb": "MAX", "raid_level": "7"}), "raid_level 7"},
		"two roots":    {target(proto.Dict{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}, proto.Dict{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}), "2 root volumes"},
		"bad physical": {target(proto.Dict{"size_gb": "MAX", "raid_level": "1", "physical_disks": []any{3}}), "physical_disks"},
	} {
		if _, err := driver.ParseTargetRAID(c.target, true, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	disks, err := driver.ParseTargetRAID(target(proto.Dict{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}, proto.Dict{"size_gb": float64(5), "raid_level": "0"}), false, true)
	if err != nil || len(disks) != 1 || disks[0].Root || disks[0].SizeGB != 5 {
		t.Errorf("non-root only: %+v %v", disks, err)
	}
}
