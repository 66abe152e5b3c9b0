package api

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestDecodeHeartbeat: the per-field decoding gives what decodeInto gives,
// values and errors alike.
func TestDecodeHeartbeat(t *testing.T) {
	for _, body := range []string{
		`{"callback_url":"http://10.0.0.9:9999","agent_version":"10.0.0","agent_token":"t\u00e9\"x"}`,
		`{"callback_url":"https://[fd00::9]:9999","agent_version":"10","agent_token":"t","agent_verify_ca":"-----BEGIN\nX","agent_status":"ok","agent_status_message":"<&>"}`,
		`{"callback_url":null,"agent_version":"10"}`,
		`{"callback_url":"http://h:1","agent_version":10}`,
		`{"callback_url":["x"],"agent_version":"10"}`,
		`{"callback_url":"http://h:1","agent_version":{"a":1e999}}`,
	} {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatal(err)
		}
		var want proto.HeartbeatRequest
		wantErr := decodeInto(obj, &want, "heartbeat")
		got, err := decodeHeartbeat(obj)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, want %v", body, err, wantErr)
			continue
		}
		if err == nil && *got != want {
			t.Errorf("%s: %+v, want %+v", body, *got, want)
		}
	}
}
