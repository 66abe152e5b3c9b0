package conductor

import (
	"encoding/json"
	"testing"

	"github.com/kilnhq/kiln/proto"
)

func TestCommandProgress(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status proto.CommandStatus
		result string
		want   proto.CommandProgress
		ok     bool
	}{
		{"running with progress", proto.CommandRunning, `{"progress":{"bytes_done":512,"bytes_total":2048,"stage":"write"}}`, proto.CommandProgress{BytesDone: 512, BytesTotal: 2048, Stage: "write"}, true},
		{"running, IPA (null result)", proto.CommandRunning, `null`, proto.CommandProgress{}, false},
		{"running, no result", proto.CommandRunning, ``, proto.CommandProgress{}, false},
		{"running, other result", proto.CommandRunning, `{"clean_result":{}}`, proto.CommandProgress{}, false},
		{"succeeded", proto.CommandSucceeded, `{"progress":{"bytes_done":1}}`, proto.CommandProgress{}, false},
		{"garbage", proto.CommandRunning, `{"progress":"half"}`, proto.CommandProgress{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := commandProgress(proto.CommandResult{CommandStatus: tc.status, CommandResult: json.RawMessage(tc.result)})
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
