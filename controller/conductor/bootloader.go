package conductor

import (
	"context"

	"github.com/kilnhq/kiln/controller/conductor/decide"
	"github.com/kilnhq/kiln/controller/flowstate"
	"github.com/kilnhq/kiln/proto"
)

// installBootloader runs image.install_bootloader on the node's agent with
// the partition UUIDs AgentPartitionUUIDs recorded, as the decision asks,
// and waits for it to end, looking at it when the agent heartbeats
// (agentBeats); a FAILED command is the error.
func (f *flow) installBootloader(ctx context.Context, a decide.AgentInstallBootloader) error {
	p := installBootloaderParams(f.n, a)
	if a.NeedRoot && p.RootUUID == "" {
		f.c.log.Warn("no root UUID from the agent: no boot loader installed; the deploy will likely fail", "node", f.n.UUID)
		return nil
	}
	ag := agentOf(f.n)
	ag.Heartbeats = f.c.beats.listen(f.n.UUID)
	defer f.c.beats.stop(f.n.UUID)
	_, err := f.c.cfg.Agent.InstallBootloader(ctx, ag, p)
	return err
}

// installBootloaderParams are install_bootloader's params for n: the
// decision's, with the partition UUIDs the agent reported after writing
// the image.
func installBootloaderParams(n *proto.Node, a decide.AgentInstallBootloader) proto.InstallBootloaderParams {
	var uuids proto.PartitionUUIDs
	if fs, err := flowstate.Of(n); err == nil && fs.PartitionUUIDs != nil {
		uuids = *fs.PartitionUUIDs
	}
	p := proto.InstallBootloaderParams{RootUUID: a.RootUUID, TargetBootMode: a.TargetBootMode, PrepBootPartUUID: uuids.PRePBootPartUUID}
	if p.RootUUID == "" {
		p.RootUUID = uuids.RootUUID
	}
	if a.SendESP {
		p.EFISystemPartUUID = uuids.EFISystemPartUUID
	}
	return p
}
