package steps

import (
	"encoding/json"
	"log/slog"

	"github.com/kilnhq/kiln/proto"
)

// ImageRequest is what an image writer is asked to do.
type ImageRequest struct {
	Info proto.ImageInfo
	// Configdrive is the configdrive param as sent (string or dict), or nil.
	Configdrive json.RawMessage
	Node        Node
	Safety      Safety
	// Progress publishes bytes written so far in the command result.
	Progress func(proto.CommandProgress)
	Log      *slog.Logger
	// Lookup is the "config" of the controller's lookup answer (md5 policy,
	// permitted image formats, …); zero before a lookup.
	Lookup proto.LookupConfig
}

// ImageResult is what an image writer reports.
type ImageResult struct {
	Device         string
	PartitionUUIDs proto.PartitionUUIDs
}
