package main

import "testing"

func TestWantNetwork(t *testing.T) {
	for _, c := range []struct {
		mode      string
		inRamdisk bool
		want      bool
	}{
		{"auto", true, true}, {"auto", false, false},
		{"true", false, true}, {"false", true, false},
	} {
		if got := wantNetwork(c.mode, c.inRamdisk); got != c.want {
			t.Errorf("wantNetwork(%q, %v) = %v, want %v", c.mode, c.inRamdisk, got, c.want)
		}
	}
}
