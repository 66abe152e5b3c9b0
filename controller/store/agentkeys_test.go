package store

import "testing"

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
		token, url, hasURL, err := agentKeys([]byte(tc.doc))
		if err != nil || token != tc.token || url != tc.url || hasURL != tc.hasURL {
			t.Errorf("agentKeys(%s) = %q, %q, %v, %v; want %q, %q, %v", tc.doc, token, url, hasURL, err, tc.token, tc.url, tc.hasURL)
		}
	}
	if _, _, _, err := agentKeys([]byte(`{"driver_internal_info":`)); err == nil {
		t.Error("agentKeys of a broken document gave no error")
	}
}
