package phases

import (
	"reflect"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name    string
		samples []sample
		want    []Phase
	}{
		{"nothing", nil, nil},
		{"resting states left out, runs merged, the open last phase dropped", []sample{
			{at(0), 0, "manageable"},
			{at(10), 1, "cleaning"},
			{at(30), 4, "clean wait"},
			{at(50), 4, "clean raid.create_configuration"},
			{at(70), 9, "clean raid.create_configuration"},
			{at(1050), 20, "clean bios.apply_configuration"},
			{at(1100), 30, "manageable"},
			{at(2000), 31, "deploying"},
		}, []Phase{
			{"cleaning", 20 * time.Millisecond, 3},
			{"clean wait", 20 * time.Millisecond, 0},
			{"clean raid.create_configuration", 1000 * time.Millisecond, 16},
			{"clean bios.apply_configuration", 50 * time.Millisecond, 10},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := split(tc.samples); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("split:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLabel(t *testing.T) {
	for _, tc := range []struct{ state, step, want string }{
		{"inspecting", "", "inspecting"},
		{"clean wait", "bios.apply_configuration", "clean bios.apply_configuration"},
		{"cleaning", "raid.create_configuration", "clean raid.create_configuration"},
		{"wait call-back", "deploy.write_image", "deploy deploy.write_image"},
		{"deploying", "deploy.deploy", "deploy deploy.deploy"},
		{"service wait", "management.reset_bmc", "service management.reset_bmc"},
		{"rescuing", "x.y", "rescuing x.y"},
	} {
		if got := Label(tc.state, tc.step); got != tc.want {
			t.Errorf("Label(%q, %q) = %q, want %q", tc.state, tc.step, got, tc.want)
		}
	}
}
