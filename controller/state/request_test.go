package state

import (
	"errors"
	"net/http"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

const maxMinor = 200 // above every gate

// verbEvents maps each API verb to the event of expectedArrows it starts,
// written independently of the verbs table.
var verbEvents = map[proto.Verb]Event{
	"manage": "manage", "provide": "provide", "inspect": "inspect", "adopt": "adopt",
	"abort": "abort", "clean": "clean", "active": "deploy", "deploy": "deploy",
	"rebuild": "rebuild", "deleted": "delete", "undeploy": "delete", "rescue": "rescue",
	"unrescue": "unrescue", "unhold": "unhold", "service": "service",
}

// TestRequestMatrix tries every verb from every state (and non-states) at
// a high microversion: it must succeed exactly where expectedArrows has an
// arrow for the verb's event, except that "clean" from deleting is the
// conductor's, and give the same destination and target.
func TestRequestMatrix(t *testing.T) {
	type key struct {
		from proto.ProvisionState
		ev   Event
	}
	want := map[key]arrowCase{}
	for _, c := range parseArrows(t, expectedArrows) {
		if c.from == proto.StateDeleting && c.event == EvClean {
			continue
		}
		if _, dup := want[key{c.from, c.event}]; !dup {
			want[key{c.from, c.event}] = c
		}
	}
	if len(Verbs()) != len(verbEvents) {
		t.Fatalf("Verbs() = %v, test knows %d verbs", Verbs(), len(verbEvents))
	}
	states := append(States(), proto.NoState, proto.StateDeleted, "bogus")
	for verb, ev := range verbEvents {
		if got, ok := EventOf(verb); !ok || got != ev {
			t.Errorf("EventOf(%q) = %q, %v; want %q", verb, got, ok, ev)
		}
		for _, s := range states {
			c, allowed := want[key{s, ev}]
			n := Node{State: s, Target: c.before}
			tr, err := Request(n, verb, maxMinor)
			if !allowed {
				var e *Error
				if !errors.As(err, &e) || e.Kind != InvalidState {
					t.Errorf("Request(%q, %q) = %+v, %v; want InvalidState", s, verb, tr, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("Request(%q, %q): %v", s, verb, err)
				continue
			}
			if tr.From != s || tr.Event != ev || tr.To != c.to || tr.Target != c.target {
				t.Errorf("Request(%q, %q) = %+v, want to %q target %q", s, verb, tr, c.to, c.target)
			}
		}
	}
}

// TestRequestExamples are arrows quoted in the brief and the spec.
func TestRequestExamples(t *testing.T) {
	cases := []struct {
		n      Node
		verb   proto.Verb
		to     proto.ProvisionState
		target proto.ProvisionState
		defer_ bool
	}{
		{Node{State: "manageable"}, "provide", "cleaning", "available", false},
		{Node{State: "manageable"}, "clean", "cleaning", "manageable", false},
		{Node{State: "available"}, "deploy", "deploying", "active", false},
		{Node{State: "available"}, "active", "deploying", "active", false},
		{Node{State: "enroll"}, "manage", "verifying", "manageable", false},
		{Node{State: "active"}, "deleted", "deleting", "available", false},
		{Node{State: "active"}, "undeploy", "deleting", "available", false},
		{Node{State: "clean wait", Target: "manageable"}, "abort", "clean failed", "manageable", true},
		{Node{State: "clean hold", Target: "available"}, "abort", "clean failed", "available", true},
		{Node{State: "clean hold", Target: "manageable"}, "unhold", "clean wait", "manageable", false},
		{Node{State: "service wait", Target: "active"}, "abort", "service failed", "active", true},
		{Node{State: "wait call-back", Target: "active"}, "abort", "deploy failed", "active", false},
		{Node{State: "inspect wait", Target: "manageable"}, "abort", "inspect failed", "manageable", false},
		{Node{State: "service failed", Target: "active"}, "abort", "active", "", false},
		{Node{State: "clean failed", Target: "available"}, "manage", "manageable", "", false},
		{Node{State: "deploy failed", Target: "active"}, "deleted", "deleting", "available", false},
	}
	for _, c := range cases {
		tr, err := Request(c.n, c.verb, maxMinor)
		if err != nil {
			t.Errorf("Request(%+v, %q): %v", c.n, c.verb, err)
			continue
		}
		if tr.To != c.to || tr.Target != c.target || tr.Deferrable != c.defer_ {
			t.Errorf("Request(%+v, %q) = %+v, want to %q target %q deferrable %v", c.n, c.verb, tr, c.to, c.target, c.defer_)
		}
	}
}

// TestRequestMicroversions checks each verb just below and at its minimum,
// from a state where the verb is valid.
func TestRequestMicroversions(t *testing.T) {
	cases := []struct {
		from proto.ProvisionState
		verb proto.Verb
		min  int
	}{
		{"enroll", "manage", 4},
		{"manageable", "provide", 4},
		{"manageable", "inspect", 6},
		{"clean wait", "abort", 13},
		{"rescue wait", "abort", 13},
		{"deploy hold", "abort", 13},
		{"service failed", "abort", 13},
		{"inspect wait", "abort", 41},
		{"wait call-back", "abort", 110},
		{"manageable", "clean", 15},
		{"manageable", "adopt", 17},
		{"available", "active", 1},
		{"available", "deploy", 73},
		{"active", "rebuild", 1},
		{"active", "deleted", 1},
		{"active", "undeploy", 73},
		{"active", "rescue", 38},
		{"rescue", "unrescue", 38},
		{"clean hold", "unhold", 85},
		{"deploy hold", "unhold", 85},
		{"service hold", "unhold", 85},
		{"active", "service", 87},
		{"service hold", "service", 87},
		{"service failed", "service", 87},
	}
	for _, c := range cases {
		n := Node{State: c.from, Target: DefaultTarget(c.from)}
		if _, err := Request(n, c.verb, c.min); err != nil {
			t.Errorf("Request(%q, %q, 1.%d): %v", c.from, c.verb, c.min, err)
		}
		if c.min <= 1 {
			continue
		}
		_, err := Request(n, c.verb, c.min-1)
		var e *Error
		if !errors.As(err, &e) || e.Kind != NotAcceptable || e.MinMinor != c.min || e.Status(true) != http.StatusNotAcceptable {
			t.Errorf("Request(%q, %q, 1.%d) = %v, want NotAcceptable needing 1.%d", c.from, c.verb, c.min-1, err, c.min)
		}
	}
	// Our advertised maximum (1.95) cannot abort a deploy in wait call-back.
	if _, err := Request(Node{State: "wait call-back", Target: "active"}, "abort", 95); err == nil {
		t.Error("abort from wait call-back accepted at 1.95")
	}
	want := map[proto.Verb]int{"manage": 4, "provide": 4, "inspect": 6, "abort": 13, "clean": 15,
		"adopt": 17, "active": 1, "deploy": 73, "rebuild": 1, "deleted": 1, "undeploy": 73,
		"rescue": 38, "unrescue": 38, "unhold": 85, "service": 87, "bogus": 0}
	for v, m := range want {
		if got := MinMinor(v); got != m {
			t.Errorf("MinMinor(%q) = %d, want %d", v, got, m)
		}
	}
}

// TestRequestOrder checks which error wins when several apply, as in Ironic:
// version, then maintenance, then state, then per-arrow version.
func TestRequestOrder(t *testing.T) {
	cases := []struct {
		name  string
		n     Node
		verb  proto.Verb
		minor int
		kind  ErrKind
		fault string
	}{
		{"unknown verb", Node{State: "enroll"}, "explode", maxMinor, BadRequest,
			`The requested action "explode" can not be performed on node "N" while it is in state "enroll".`},
		{"too old beats state", Node{State: "active"}, "manage", 3, NotAcceptable, "Request not acceptable."},
		{"too old beats maintenance", Node{State: "available", Maintenance: true}, "deploy", 72, NotAcceptable, "Request not acceptable."},
		{"invalid state", Node{State: "enroll"}, "deleted", 82, InvalidState,
			`The requested action "deleted" can not be performed on node "N" while it is in state "enroll".`},
		{"maintenance active", Node{State: "available", Maintenance: true}, "active", 1, BadRequest,
			"The provisioning operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance deploy alias", Node{State: "available", Maintenance: true}, "deploy", 73, BadRequest,
			"The provisioning operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance rebuild", Node{State: "active", Maintenance: true}, "rebuild", 1, BadRequest,
			"The provisioning operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance beats state", Node{State: "enroll", Maintenance: true}, "active", 1, BadRequest,
			"The provisioning operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance clean", Node{State: "manageable", Maintenance: true}, "clean", 15, BadRequest,
			"The cleaning operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance rescue", Node{State: "active", Maintenance: true}, "rescue", 38, BadRequest,
			"The rescuing operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance unrescue", Node{State: "rescue", Maintenance: true}, "unrescue", 38, BadRequest,
			"The unrescuing operation can't be performed on node N because it's in maintenance mode."},
		{"maintenance service", Node{State: "active", Maintenance: true}, "service", 87, BadRequest,
			"The service operation can't be performed on node N because it's in maintenance mode."},
		{"state beats arrow version", Node{State: "active"}, "unhold", 1, InvalidState,
			`The requested action "unhold" can not be performed on node "N" while it is in state "active".`},
		{"arrow version", Node{State: "deploy hold", Target: "active"}, "unhold", 84, NotAcceptable, "Request not acceptable."},
		{"protected rebuild", Node{State: "active", Protected: true}, "rebuild", 1, Forbidden,
			"Node N is protected and cannot be undeployed, rebuilt or deleted"},
		{"protected undeploy", Node{State: "active", Protected: true}, "deleted", 1, Forbidden,
			"Node N is protected and cannot be undeployed, rebuilt or deleted"},
		{"retired provide", Node{State: "manageable", Retired: true}, "provide", 4, BadRequest,
			"The providing operation can't be performed on node N because it is retired."},
	}
	for _, c := range cases {
		_, err := Request(c.n, c.verb, c.minor)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err = %v, want *Error", c.name, err)
			continue
		}
		if e.Kind != c.kind || e.Faultstring("N") != c.fault {
			t.Errorf("%s: got %v %q, want %v %q", c.name, e.Kind, e.Faultstring("N"), c.kind, c.fault)
		}
		if e.Error() == "" {
			t.Errorf("%s: empty Error()", c.name)
		}
	}
	// Verbs that maintenance does not stop.
	for _, c := range []struct {
		n    Node
		verb proto.Verb
	}{
		{Node{State: "active", Maintenance: true}, "deleted"},
		{Node{State: "enroll", Maintenance: true}, "manage"},
		{Node{State: "manageable", Maintenance: true}, "provide"},
		{Node{State: "manageable", Maintenance: true}, "inspect"},
		{Node{State: "clean wait", Target: "available", Maintenance: true}, "abort"},
		{Node{State: "active", Protected: true}, "rescue"},
		{Node{State: "manageable", Retired: true}, "clean"},
	} {
		if _, err := Request(c.n, c.verb, maxMinor); err != nil {
			t.Errorf("Request(%+v, %q): %v", c.n, c.verb, err)
		}
	}
}

func TestErrorStatus(t *testing.T) {
	cases := []struct {
		kind                 ErrKind
		reserved, unreserved int
	}{
		{BadRequest, 400, 400},
		{NotAcceptable, 406, 406},
		{InvalidState, 409, 400},
		{Conflict, 409, 409},
		{Forbidden, 403, 403},
	}
	for _, c := range cases {
		e := &Error{Kind: c.kind}
		if e.Status(true) != c.reserved || e.Status(false) != c.unreserved {
			t.Errorf("%v: Status = %d/%d, want %d/%d", c.kind, e.Status(true), e.Status(false), c.reserved, c.unreserved)
		}
	}
}

func TestCheckBody(t *testing.T) {
	pw := func(s string) *string { return &s }
	cases := []struct {
		name  string
		verb  proto.Verb
		minor int
		b     Body
		kind  ErrKind // 0 = accepted
		fault string
	}{
		{"active plain", "active", 1, Body{}, 0, ""},
		{"active configdrive string", "active", 1, Body{Configdrive: ConfigdriveString}, 0, ""},
		{"deploy configdrive dict", "deploy", 95, Body{Configdrive: ConfigdriveDict, ConfigdriveVendorData: true, DeploySteps: true}, 0, ""},
		{"configdrive dict too old", "active", 55, Body{Configdrive: ConfigdriveDict}, BadRequest,
			"Providing a JSON object for configdrive is only supported starting with API version 1.56"},
		{"configdrive dict at 1.56", "active", 56, Body{Configdrive: ConfigdriveDict}, 0, ""},
		{"vendor_data too old", "active", 58, Body{Configdrive: ConfigdriveDict, ConfigdriveVendorData: true}, BadRequest,
			"Providing vendor_data in configdrive is only supported starting with API version 1.59"},
		{"rebuild configdrive too old", "rebuild", 34, Body{Configdrive: ConfigdriveString}, BadRequest,
			"Adding a config drive is only supported when setting provision state to active"},
		{"rebuild configdrive", "rebuild", 35, Body{Configdrive: ConfigdriveString}, 0, ""},
		{"configdrive with provide", "provide", 95, Body{Configdrive: ConfigdriveString}, BadRequest,
			"Adding a config drive is only supported when setting provision state to active, rebuild"},
		{"deploy_steps too old", "active", 68, Body{DeploySteps: true}, NotAcceptable,
			"Request not acceptable. The minimal required API version should be 1.69"},
		{"deploy_steps rebuild", "rebuild", 69, Body{DeploySteps: true}, 0, ""},
		{"deploy_steps with clean", "clean", 95, Body{DeploySteps: true, CleanSteps: true}, BadRequest,
			`"deploy_steps" is only valid when setting target provision state to active or rebuild`},
		{"clean", "clean", 15, Body{CleanSteps: true}, 0, ""},
		{"clean without steps", "clean", 15, Body{}, BadRequest,
			`"clean_steps" is required when setting target provision state to clean`},
		{"clean with runbook only", "clean", 92, Body{Runbook: true}, 0, ""},
		{"runbook too old", "clean", 91, Body{Runbook: true}, NotAcceptable, "Request not acceptable."},
		{"runbook with deploy", "active", 95, Body{Runbook: true}, BadRequest,
			`"runbooks" is only valid when setting target provision state to any of ['clean', 'service']`},
		{"clean disable_ramdisk too old", "clean", 69, Body{CleanSteps: true, DisableRamdisk: true}, NotAcceptable,
			"Request not acceptable."},
		{"clean disable_ramdisk", "clean", 70, Body{CleanSteps: true, DisableRamdisk: true}, 0, ""},
		{"service disable_ramdisk too old", "service", 107, Body{ServiceSteps: true, DisableRamdisk: true}, NotAcceptable,
			"Request not acceptable."},
		{"service disable_ramdisk", "service", 108, Body{ServiceSteps: true, DisableRamdisk: true}, 0, ""},
		{"disable_ramdisk with deploy", "active", 95, Body{DisableRamdisk: true}, BadRequest,
			"disable_ramdisk is supported only with manual cleaning or servicing"},
		{"clean_steps with provide", "provide", 95, Body{CleanSteps: true}, BadRequest,
			`"clean_steps" is only valid when setting target provision state to clean`},
		{"rescue", "rescue", 38, Body{RescuePassword: pw("s3cret")}, 0, ""},
		{"rescue blank password", "rescue", 38, Body{RescuePassword: pw(" \t")}, BadRequest,
			`A non-empty "rescue_password" is required when setting target provision state to rescue`},
		{"rescue no password", "rescue", 38, Body{}, BadRequest,
			`A non-empty "rescue_password" is required when setting target provision state to rescue`},
		{"rescue_password with unrescue", "unrescue", 38, Body{RescuePassword: pw("x")}, BadRequest,
			`"rescue_password" is only valid when setting target provision state to rescue`},
		{"service", "service", 87, Body{ServiceSteps: true}, 0, ""},
		{"service without steps", "service", 87, Body{}, BadRequest,
			`"service_steps" is required when setting target provision state to service`},
		{"service_steps with clean", "clean", 95, Body{CleanSteps: true, ServiceSteps: true}, BadRequest,
			`"service_steps" is only valid when setting target provision state to service`},
	}
	for _, c := range cases {
		err := CheckBody(c.verb, c.minor, c.b)
		if c.kind == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || e.Faultstring("N") != c.fault {
			t.Errorf("%s: got %v, want %v %q", c.name, err, c.kind, c.fault)
		}
	}
}
