package conductor

import (
	"context"
	"encoding/json"

	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// commandProgress reads the progress a RUNNING agent command reports in its
// command_result ({"progress": {...}}, a Kiln agent extension; IPA reports
// none and ok is false).
func commandProgress(cmd proto.CommandResult) (p proto.CommandProgress, ok bool) {
	if cmd.CommandStatus != proto.CommandRunning || len(cmd.CommandResult) == 0 {
		return p, false
	}
	var r struct {
		Progress *proto.CommandProgress `json:"progress"`
	}
	if err := json.Unmarshal(cmd.CommandResult, &r); err != nil || r.Progress == nil {
		return p, false
	}
	return *r.Progress, true
}

// recordProgress keeps the running step's progress, as the agent reported it
// in cmd, on the node (driver_internal_info.kiln_progress), where the API,
// the event stream and the metrics read it. Nothing is written when the
// agent reports no progress or the same progress as before.
func (f *flow) recordProgress(ctx context.Context, cur proto.StepCall, cmd proto.CommandResult) error {
	p, ok := commandProgress(cmd)
	if !ok {
		return nil
	}
	label := stepLabel(cur)
	fs, _ := flowstate.Read(f.n, flowstate.PartProgress)
	if old := fs.Progress; old != nil && old.Step == label && old.BytesDone == p.BytesDone &&
		old.BytesTotal == p.BytesTotal && old.Stage == p.Stage {
		return nil
	}
	return f.updateFlow(ctx, func(_ *proto.Node, s *flowstate.State) {
		s.Progress = &flowstate.Progress{
			Step: label, BytesDone: p.BytesDone, BytesTotal: p.BytesTotal, Stage: p.Stage, UpdatedAt: proto.Now(),
		}
	})
}
