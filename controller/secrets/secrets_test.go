package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestIsSecretKey(t *testing.T) {
	for _, tc := range []struct {
		key    string
		secret bool
	}{
		{"password", true},
		{"redfish_password", true},
		{"ipmi_password", true},
		{"IPMI_PASSWORD", true},
		{"bmc_passwd", true},
		{"passphrase", true},
		{"luks_passphrase", true},
		{"sys_pswd", true},
		{"adminPass", true},
		{"secret", true},
		{"client_secret", true},
		{"secret_uuid", true},
		{"token", true},
		{"auth_token", true},
		{"agent_secret_token", true},
		{"snmp_community", true},
		{"snmp_community_read", true},
		{"configdrive", true},
		{"rescue_password", true},
		{"key", true},
		{"ssh_key", true},
		{"private_key", true},
		{"api_key", true},
		{"apiKey", true},
		{"private-key", true},
		{"deploy.key", true},
		{"sslkey", true},
		{"fernetkey", true},
		{"cephxkey", true},
		{"keyboard", false},
		{"monkey_business", false},
		{"monkey", false},
		{"key_id", false},
		{"keys", false},
		{"turkey", false},
		{"redfish_address", false},
		{"redfish_username", false},
		{"ipmi_address", false},
		{"deploy_kernel", false},
		{"image_source", false},
		{"root_device", false},
		{"capabilities", false},
		{"", false},
	} {
		if got := IsSecretKey(tc.key); got != tc.secret {
			t.Errorf("IsSecretKey(%q) = %v, want %v", tc.key, got, tc.secret)
		}
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"top level", `{"redfish_password":"p","redfish_address":"a"}`, `{"redfish_password":"******","redfish_address":"a"}`},
		{"passphrase and passwd", `{"passphrase":"p","bmc_passwd":"q"}`, `{"passphrase":"******","bmc_passwd":"******"}`},
		{"nested map", `{"x":{"password":"p","user":"u"}}`, `{"x":{"password":"******","user":"u"}}`},
		{"deep list", `{"a":[{"b":[{"ssh_key":"k","keyboard":"us"}]}]}`, `{"a":[{"b":[{"ssh_key":"******","keyboard":"us"}]}]}`},
		{"secret subtree hidden whole", `{"secret":{"a":1}}`, `{"secret":"******"}`},
		{"number hidden", `{"ipmi_password":1234}`, `{"ipmi_password":"******"}`},
		{"bool and null kept", `{"agent_secret_token_pregenerated":true,"token":null}`, `{"agent_secret_token_pregenerated":true,"token":null}`},
		{"nothing secret", `{"a":{"b":[1,"two",{"c":null}]}}`, `{"a":{"b":[1,"two",{"c":null}]}}`},
		{"configdrive and community", `{"configdrive":"H4sI","snmp_community":"public"}`, `{"configdrive":"******","snmp_community":"******"}`},
		{"scalar", `"password"`, `"password"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := decode(t, tc.in)
			before, _ := json.Marshal(in)
			got := Mask(in)
			if want := decode(t, tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("Mask(%s) = %v, want %s", tc.in, got, tc.want)
			}
			if after, _ := json.Marshal(in); !bytes.Equal(before, after) {
				t.Errorf("Mask changed its input: %s became %s", before, after)
			}
			if HoldsSecret(in) != (tc.in != tc.want) {
				t.Errorf("HoldsSecret(%s) = %v", tc.in, HoldsSecret(in))
			}
		})
	}
	if MaskDict(nil) != nil {
		t.Error("MaskDict(nil) is not nil")
	}
}

func TestKeepMasked(t *testing.T) {
	for _, tc := range []struct {
		name, stored, updated, want string
	}{
		{"top level kept", `{"redfish_password":"p","a":1}`, `{"redfish_password":"******","a":2}`, `{"redfish_password":"p","a":2}`},
		{"new value written", `{"redfish_password":"p"}`, `{"redfish_password":"new"}`, `{"redfish_password":"new"}`},
		{"nested kept", `{"x":{"y":[{"passphrase":"s","n":1}]}}`, `{"x":{"y":[{"passphrase":"******","n":2}]}}`, `{"x":{"y":[{"passphrase":"s","n":2}]}}`},
		{"masked without stored stays", `{}`, `{"password":"******"}`, `{"password":"******"}`},
		{"non-secret key literal kept", `{"note":"x"}`, `{"note":"******"}`, `{"note":"******"}`},
		{"removed key stays removed", `{"password":"p","a":1}`, `{"a":1}`, `{"a":1}`},
		{"masked subtree restored", `{"secret":{"a":1}}`, `{"secret":"******"}`, `{"secret":{"a":1}}`},
		{"list grown", `{"l":[{"token":"t"}]}`, `{"l":[{"token":"******"},{"token":"******"}]}`, `{"l":[{"token":"t"},{"token":"******"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := KeepMasked(decode(t, tc.stored), decode(t, tc.updated))
			if want := decode(t, tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("KeepMasked = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`Post "http://10.0.0.9:9999/v1/commands/?agent_token=abc123&wait=true": connection refused`,
			`Post "http://10.0.0.9:9999/v1/commands/?agent_token=******&wait=true": connection refused`},
		{`GET http://h/v1/commands/?wait=1&agent_token=abc123`, `GET http://h/v1/commands/?wait=1&agent_token=******`},
		{`AGENT_TOKEN=abc def`, `AGENT_TOKEN=****** def`},
		{`{"agent_token": "abc", "x": 1}`, `{"agent_token": "******", "x": 1}`},
		{`https://admin:hunter2@bmc.example/redfish/v1`, `https://******@bmc.example/redfish/v1`},
		{`fetch https://ghp_tok@github.com/x failed`, `fetch https://******@github.com/x failed`},
		{`two: http://a:b@h1/ and ftp://c:d@h2`, `two: http://******@h1/ and ftp://******@h2`},
		{`no userinfo: http://host/path?q=a@b`, `no userinfo: http://host/path?q=a@b`},
		{`mail bob@example.com`, `mail bob@example.com`},
		{`plain error`, `plain error`},
		{``, ``},
	} {
		if got := Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

type stringer struct{}

func (stringer) String() string { return "http://u:p@h" }

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil)))
	log = log.With("base", "http://u:pw1@h")
	log.WithGroup("g").Warn("call http://h/?agent_token=tok1 failed",
		"err", errors.New(`Get "http://h/v1/commands/?agent_token=tok2": EOF`),
		"url", "https://x:pw2@bmc", "s", stringer{},
		slog.Group("sub", "agent", "http://h/?agent_token=tok3"),
		"info", map[string]any{"redfish_password": "pw3"}, "n", 3, "list", []string{"a", "b"},
		"urls", []string{"http://u:pw4@h"})
	out := buf.String()
	for _, leak := range []string{"tok1", "tok2", "tok3", "pw1", "pw2", "pw3", "pw4", ":p@"} {
		if strings.Contains(out, leak) {
			t.Errorf("log line leaks %q: %s", leak, out)
		}
	}
	if !strings.Contains(out, `"n":3`) || !strings.Contains(out, `"list":["a","b"]`) || !strings.Contains(out, "agent_token=******") {
		t.Errorf("log line lost its content: %s", out)
	}
}

func BenchmarkMaskTypicalNode(b *testing.B) {
	di := map[string]any{"redfish_address": "https://10.0.0.5", "redfish_username": "admin", "redfish_password": "pw",
		"redfish_verify_ca": false, "deploy_kernel": "http://k", "deploy_ramdisk": "http://r"}
	ii := map[string]any{"image_source": "http://i", "image_checksum": "abc", "root_gb": 10,
		"capabilities": map[string]any{"boot_mode": "uefi"}}
	b.ReportAllocs()
	for b.Loop() {
		Mask(di)
		Mask(ii)
	}
}
