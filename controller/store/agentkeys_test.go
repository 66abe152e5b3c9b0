package store

import (
	"testing"
	"time"
)

// TestAgentKeysHeartbeat: the last heartbeat's version, CA and time are
// read with the token, from compact and jsonb-spaced documents alike.
func TestAgentKeysHeartbeat(t *testing.T) {
	want := agentInfo{token: "tok", url: "http://h:9999", hasURL: true, version: "10.1", verifyCA: "PEM", lastHeartbeat: "2026-12-02T04:00:00.5Z"}
	for _, doc := range []string{
		`{"driver_internal_info":{"agent_secret_token":"tok","agent_url":"http://h:9999","agent_version":"10.1","agent_verify_ca":"PEM","agent_last_heartbeat":"2026-12-02T04:00:00.5Z"}}`,
		`{"driver_internal_info": {"agent_last_heartbeat": "2026-12-02T04:00:00.5Z", "agent_secret_token": "tok", "agent_url": "http://h:9999", "agent_verify_ca": "PEM", "agent_version": "10.1"}}`,
	} {
		if got, err := agentKeys([]byte(doc)); err != nil || got != want {
			t.Errorf("agentKeys(%s) = %+v, %v; want %+v", doc, got, err, want)
		}
	}
	for _, tc := range []struct {
		stamp string
		want  time.Time
	}{
		{"2026-12-02T04:00:00.5Z", time.Date(2026, 12, 2, 4, 0, 0, 5e8, time.UTC)},
		{"2026-12-02T05:00:00.000000+01:00", time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)},
		{"", time.Time{}},
		{"yesterday", time.Time{}},
	} {
		if got := parseStamp(tc.stamp); !got.Equal(tc.want) {
			t.Errorf("parseStamp(%q) = %v, want %v", tc.stamp, got, tc.want)
		}
	}
}

// TestAgentKeys: the agent token and URL read from a stored document are
// what json_extract gave, for compact documents and others alike.
func TestAgentKeys(t *testing.T) {
	for _, tc := range []struct {
		doc, token, url string
		hasURL          bool
	}{
		{doc: `{"uuid":"u","driver_internal_info":{"agent_secret_token":"tok","agent_url":"http://h:9999"}}`, token: "tok", url: "http://h:9999", hasURL: true},
		{doc: `{"driver_internal_info":{"agent_url":""}}`, hasURL: true},
		{doc: `{"driver_internal_info":{"agent_url":null,"agent_secret_token":null}}`},
		{doc: `{"driver_internal_info":{}}`},
		{doc: `{"driver_internal_info":null}`},
		{doc: `{"uuid":"u"}`},
		{doc: `{"driver_internal_info":{"x":{"agent_url":"nested"},"agent_secret_token":"t\"\u00e9"}}`, token: "t\"é"},
		{doc: `{"driver_internal_info":{"agent_url":5}}`, url: "5", hasURL: true},
		// PostgreSQL's jsonb text: spaces, keys reordered.
		{doc: `{"uuid": "u", "driver_internal_info": {"agent_url": "http://h:1", "agent_secret_token": "tok"}}`, token: "tok", url: "http://h:1", hasURL: true},
	} {
		a, err := agentKeys([]byte(tc.doc))
		if err != nil || a.token != tc.token || a.url != tc.url || a.hasURL != tc.hasURL {
			t.Errorf("agentKeys(%s) = %q, %q, %v, %v; want %q, %q, %v", tc.doc, a.token, a.url, a.hasURL, err, tc.token, tc.url, tc.hasURL)
		}
	}
	if _, err := agentKeys([]byte(`{"driver_internal_info":`)); err == nil {
		t.Error("agentKeys of a broken document gave no error")
	}
}
