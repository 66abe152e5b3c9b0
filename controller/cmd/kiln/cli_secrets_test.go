package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

// TestCLIOutputMasksSecrets: whatever a controller answers, the CLI prints
// no secret and no agent token, in every output format.
func TestCLIOutputMasksSecrets(t *testing.T) {
	le := `get_clean_steps failed: Post "http://10.0.0.9:9999/v1/commands/?agent_token=TOKEN-LEAK": EOF`
	node := proto.Node{UUID: "3f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", Driver: "fake-hardware", LastError: &le,
		DriverInfo: proto.Dict{"redfish_password": "PW-LEAK", "nested": map[string]any{"x": map[string]any{"passphrase": "PP-LEAK"}},
			"keyboard": "us-layout"},
		DriverInternalInfo: proto.Dict{"agent_secret_token": "TOKEN-LEAK"},
		InstanceInfo:       proto.Dict{"configdrive": "CD-LEAK"}}
	port := proto.Port{UUID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Extra: proto.Dict{"api_key": "KEY-LEAK"}}
	hist := []proto.HistoryEvent{{Event: le}}
	for _, format := range []string{"table", "json", "yaml"} {
		for _, v := range []any{&node, node, []proto.Node{node}, &port, []proto.Port{port}, hist} {
			var buf bytes.Buffer
			p := printer{w: &buf, format: format}
			var err error
			if h, ok := v.([]proto.HistoryEvent); ok && format == "table" {
				err = p.list([]column{{"event", "EVENT"}}, []row{{"event": h[0].Event}})
			} else {
				err = p.object(v)
			}
			if err != nil {
				t.Fatalf("%s %T: %v", format, v, err)
			}
			for _, leak := range []string{"PW-LEAK", "PP-LEAK", "TOKEN-LEAK", "CD-LEAK", "KEY-LEAK"} {
				if strings.Contains(buf.String(), leak) {
					t.Errorf("%s output of %T shows %s:\n%s", format, v, leak, buf.String())
				}
			}
			if _, isNode := v.(*proto.Node); isNode && !strings.Contains(buf.String(), "us-layout") {
				t.Errorf("%s output of a node hides values that are not secret:\n%s", format, buf.String())
			}
		}
	}
}
