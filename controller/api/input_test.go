package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/controller/api/jsonpatch"
	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

func TestLoneSurrogate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{"a":"plain"}`, -1},
		{`{"a":"\ud83d\ude00"}`, -1},
		{`{"a":"\uD83D\uDE00"}`, -1},
		{`{"a":"\u00e9\u0041"}`, -1},
		{`{"a":"\\ud800"}`, -1}, // an escaped backslash, then text
		{`{"a":"\ud800"}`, 6},
		{`{"a":"\udc00"}`, 6},
		{`{"a":"\ud800\u0041"}`, 6},
		{`{"a":"x\ud83d\ude00\ud83d"}`, 19},
		{`{"a":"\ud800`, 6},
		{`\u12`, -1},
	} {
		if got := loneSurrogate([]byte(tc.in)); got != tc.want {
			t.Errorf("loneSurrogate(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestCheckNumbers(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"a":1,"b":[1.5e300,-2]}`, true},
		{`{"a":1e999}`, false},
		{`{"a":[` + strings.Repeat("9", 400) + `]}`, false},
		{`{"a":-1e-999}`, true}, // underflows to zero: representable
		{`{"a":"1e999"}`, true}, // a string, not a number
	} {
		if err := checkNumbers([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("checkNumbers(%.60s) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestBodyLimitClass(t *testing.T) {
	for _, tc := range []struct{ method, route, want string }{
		{"POST", "/v1/nodes", "node"},
		{"PATCH", "/v1/nodes/:node", "node"},
		{"PUT", "/v1/nodes/:node/states/provision", "provision"},
		{"POST", "/v1/heartbeat/:node", "agent"},
		{"POST", "/v1/continue_inspection", "agent"},
		{"POST", "/v1/ports", "default"},
		{"PUT", "/v1/nodes/:node/states/power", "default"},
		{"GET", "/v1/nodes", "default"},
		{"PUT", "", "default"},
	} {
		if got := bodyLimitClass(tc.method, tc.route); got != tc.want {
			t.Errorf("bodyLimitClass(%s %s) = %s, want %s", tc.method, tc.route, got, tc.want)
		}
	}
	if _, err := bodyLimits(map[string]int64{"nodes": 5}); err == nil {
		t.Error("an unknown class was accepted")
	}
	if _, err := bodyLimits(map[string]int64{"node": 0}); err == nil {
		t.Error("a zero limit was accepted")
	}
	got, err := bodyLimits(map[string]int64{"provision": 1 << 30})
	if err != nil || got["provision"] != 1<<30 || got["default"] != DefaultBodyLimits["default"] {
		t.Errorf("bodyLimits(provision=1GiB) = %v, %v", got, err)
	}
}

func TestCheckProtected(t *testing.T) {
	reason := "keep"
	for _, tc := range []struct {
		name       string
		old, upd   proto.Node
		code       int
		wantReason bool
	}{
		{"protect an active node", proto.Node{ProvisionState: proto.StateActive}, proto.Node{Protected: true, ProtectedReason: &reason}, 0, true},
		{"protect an enroll node", proto.Node{ProvisionState: proto.StateEnroll}, proto.Node{Protected: true}, http.StatusConflict, false},
		{"protect an available node", proto.Node{ProvisionState: proto.StateAvailable}, proto.Node{Protected: true}, http.StatusConflict, false},
		{"already protected, reason changes", proto.Node{ProvisionState: proto.StateActive, Protected: true}, proto.Node{Protected: true, ProtectedReason: &reason}, 0, true},
		{"unprotect clears the reason", proto.Node{ProvisionState: proto.StateActive, Protected: true, ProtectedReason: &reason}, proto.Node{ProtectedReason: &reason}, 0, false},
		{"reason without protection", proto.Node{ProvisionState: proto.StateActive}, proto.Node{ProtectedReason: &reason}, http.StatusBadRequest, true},
	} {
		err := checkProtected(&tc.old, &tc.upd)
		var e *Error
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.code != 0 && (!errors.As(err, &e) || e.Code != tc.code):
			t.Errorf("%s: %v, want %d", tc.name, err, tc.code)
		case tc.code == 0 && (tc.upd.ProtectedReason != nil) != tc.wantReason:
			t.Errorf("%s: protected_reason = %v, want set=%v", tc.name, tc.upd.ProtectedReason, tc.wantReason)
		}
	}
}

func TestCheckMandatoryRemovals(t *testing.T) {
	for _, tc := range []struct {
		ops []jsonpatch.Op
		ok  bool
	}{
		{[]jsonpatch.Op{{Op: "remove", Path: "/address"}}, false},
		{[]jsonpatch.Op{{Op: "remove", Path: "/node_uuid"}}, false},
		{[]jsonpatch.Op{{Op: "move", From: "/address", Path: "/extra/a"}}, false},
		{[]jsonpatch.Op{{Op: "remove", Path: "/extra/address"}}, true},
		{[]jsonpatch.Op{{Op: "replace", Path: "/address", Value: "52:54:00:00:00:01"}}, true},
		{[]jsonpatch.Op{{Op: "copy", From: "/address", Path: "/extra/a"}}, true},
	} {
		if err := checkMandatoryRemovals(tc.ops, portMandatory); (err == nil) != tc.ok {
			t.Errorf("checkMandatoryRemovals(%+v) = %v, want ok=%v", tc.ops, err, tc.ok)
		}
	}
}

func TestValidateNodeStrings(t *testing.T) {
	s := func(n int, c string) *string { v := strings.Repeat(c, n); return &v }
	for _, tc := range []struct {
		name string
		n    proto.Node
		ok   bool
	}{
		{"empty", proto.Node{}, true},
		{"resource_class 80", proto.Node{ResourceClass: s(80, "r")}, true},
		{"resource_class 81", proto.Node{ResourceClass: s(81, "r")}, false},
		{"description 4096 two-byte characters", proto.Node{Description: s(4096, "é")}, true},
		{"description 4097", proto.Node{Description: s(4097, "d")}, false},
		{"owner 256", proto.Node{Owner: s(256, "o")}, false},
		{"lessee 256", proto.Node{Lessee: s(256, "l")}, false},
		{"shard 256", proto.Node{Shard: s(256, "s")}, false},
		{"shard empty", proto.Node{Shard: s(0, "")}, false},
		{"retired_reason 65536", proto.Node{RetiredReason: s(65536, "x")}, false},
		{"protected_reason 65535", proto.Node{ProtectedReason: s(65535, "x")}, true},
		{"conductor_group charset", proto.Node{ConductorGroup: "rack-1_a.b"}, true},
		{"conductor_group space", proto.Node{ConductorGroup: "rack 1"}, false},
		{"conductor_group 256", proto.Node{ConductorGroup: *s(256, "g")}, false},
	} {
		if err := validateNodeStrings(&tc.n); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// The API's bound on a power timeout is the drivers' own: a longer timeout
// would be silently replaced, so the API refuses it instead.
func TestMaxPowerTimeoutMatchesDrivers(t *testing.T) {
	if driver.Seconds(maxPowerTimeout) == 0 {
		t.Errorf("drivers ignore a timeout of %d s, which the API accepts", maxPowerTimeout)
	}
	if driver.Seconds(maxPowerTimeout+1) != 0 {
		t.Errorf("drivers honour %d s; raise maxPowerTimeout to match", maxPowerTimeout+1)
	}
}
