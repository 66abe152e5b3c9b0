package state

import (
	"errors"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestDeleteAllowed(t *testing.T) {
	ok := map[proto.ProvisionState]bool{"manageable": true, "enroll": true, "adopt failed": true, "available": true}
	for _, s := range States() {
		err := DeleteAllowed(Node{State: s}, "")
		if ok[s] != (err == nil) {
			t.Errorf("DeleteAllowed(%q) = %v, want allowed=%v", s, err, ok[s])
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Kind != Conflict || e.Status(false) != 409 {
				t.Errorf("DeleteAllowed(%q) = %v, want Conflict", s, err)
			}
		}
		// Maintenance allows any state.
		if err := DeleteAllowed(Node{State: s, Maintenance: true}, ""); err != nil {
			t.Errorf("DeleteAllowed(%q in maintenance) = %v", s, err)
		}
		// Protected never.
		var e *Error
		if err := DeleteAllowed(Node{State: s, Maintenance: true, Protected: true}, ""); !errors.As(err, &e) || e.Kind != Forbidden {
			t.Errorf("DeleteAllowed(%q protected) = %v, want Forbidden", s, err)
		}
	}
	var e *Error
	err := DeleteAllowed(Node{State: "available"}, "1be26c0b-03f2-4d2e-ae87-c02d7f33c123")
	if !errors.As(err, &e) || e.Kind != Conflict ||
		e.Faultstring("N") != "Node N is associated with instance 1be26c0b-03f2-4d2e-ae87-c02d7f33c123." {
		t.Errorf("associated: %v", err)
	}
	if err := DeleteAllowed(Node{State: "active", Maintenance: true}, "x"); err != nil {
		t.Errorf("associated in maintenance: %v, want allowed (Ironic skips the check)", err)
	}
	err = DeleteAllowed(Node{State: "deploying"}, "")
	want := `Can not delete node "N" while it is in provision state "deploying". Valid provision states to perform deletion are: "('manageable', 'enroll', 'adopt failed', 'available')", or set the node into maintenance mode`
	if !errors.As(err, &e) || e.Faultstring("N") != want {
		t.Errorf("deploying: %q\nwant %q", e.Faultstring("N"), want)
	}
}

func TestLookupAllowed(t *testing.T) {
	normal := map[proto.ProvisionState]bool{
		"deploying": true, "wait call-back": true, "cleaning": true, "clean wait": true,
		"inspecting": true, "inspect wait": true, "rescuing": true, "rescue wait": true, "service wait": true,
	}
	fast := map[proto.ProvisionState]bool{"enroll": true, "manageable": true, "available": true,
		"servicing": true, "service hold": true}
	for _, s := range append(States(), proto.NoState) {
		if got := LookupAllowed(s, false); got != normal[s] {
			t.Errorf("LookupAllowed(%q, false) = %v", s, got)
		}
		if got := LookupAllowed(s, true); got != (normal[s] || fast[s]) {
			t.Errorf("LookupAllowed(%q, true) = %v", s, got)
		}
	}
}

func TestHeartbeat(t *testing.T) {
	act := map[proto.ProvisionState]bool{"wait call-back": true, "clean wait": true, "rescue wait": true, "service wait": true}
	record := map[proto.ProvisionState]bool{"deploying": true, "cleaning": true, "rescuing": true, "servicing": true,
		"deploy hold": true, "clean hold": true, "service hold": true}
	fastRecord := map[proto.ProvisionState]bool{"enroll": true, "manageable": true, "available": true}
	for _, s := range States() {
		for _, fast := range []bool{false, true} {
			for _, maint := range []bool{false, true} {
				want := HeartbeatIgnore
				switch {
				case act[s] && !maint:
					want = HeartbeatAct
				case act[s] || record[s] || (fast && fastRecord[s]):
					want = HeartbeatRecord
				}
				if got := Heartbeat(s, fast, maint); got != want {
					t.Errorf("Heartbeat(%q, fast=%v, maint=%v) = %v, want %v", s, fast, maint, got, want)
				}
			}
		}
	}
	// Inspection reports through continue_inspection, never heartbeats.
	if Heartbeat(proto.StateInspectWait, true, false) != HeartbeatIgnore {
		t.Error("heartbeat in inspect wait not ignored")
	}
}

func TestPatchAllowed(t *testing.T) {
	cases := []struct {
		n      Node
		minor  int
		onlyIU bool
		ok     bool
	}{
		{Node{State: "enroll"}, 82, false, true},
		{Node{State: "active"}, 82, false, true},
		{Node{State: "deploying", Target: "active"}, 82, false, false},
		{Node{State: "wait call-back", Target: "active"}, 82, false, false},
		{Node{State: "wait call-back", Target: "active", Maintenance: true}, 82, true, true},
		{Node{State: "wait call-back", Target: "active", Maintenance: true}, 82, false, false},
		{Node{State: "wait call-back", Target: "active"}, 82, true, false},
		{Node{State: "deploy failed", Target: "active"}, 82, false, true},
		{Node{State: "clean failed", Target: "available"}, 82, false, true},
		{Node{State: "verifying", Target: "manageable"}, 82, false, true},
		{Node{State: "inspect wait", Target: "manageable"}, 82, false, true},
		{Node{State: "inspecting", Target: "manageable"}, 38, false, true},
		{Node{State: "inspecting", Target: "manageable"}, 39, false, false},
		{Node{State: "service hold", Target: "active"}, 95, false, true},
	}
	for _, c := range cases {
		err := PatchAllowed(c.n, c.minor, c.onlyIU)
		if c.ok != (err == nil) {
			t.Errorf("PatchAllowed(%+v, %d, %v) = %v, want ok=%v", c.n, c.minor, c.onlyIU, err, c.ok)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Status(false) != 409) {
			t.Errorf("PatchAllowed(%+v): %v is not a 409", c.n, err)
		}
	}
	err := PatchAllowed(Node{State: "deploying", Target: "active"}, 82, false)
	if got := err.(*Error).Faultstring("816c"); got != "Node 816c can not be updated while a state transition is in progress." {
		t.Errorf("faultstring %q", got)
	}
}
