package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/kilnhq/kiln/proto"
)

// ListBIOS reads a node's BIOS settings with their registry details.
func (c *Client) ListBIOS(ctx context.Context, ident string) ([]proto.BIOSSetting, error) {
	var out struct {
		BIOS []proto.BIOSSetting `json:"bios"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident)+"/bios?detail=true", nil, &out)
	return out.BIOS, err
}

// ListFirmware reads a node's firmware components.
func (c *Client) ListFirmware(ctx context.Context, ident string) ([]proto.FirmwareComponent, error) {
	var out struct {
		Firmware []proto.FirmwareComponent `json:"firmware"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(ident)+"/firmware", nil, &out)
	return out.Firmware, err
}

// SetTargetRAID sets a node's target_raid_config (PUT …/states/raid).
func (c *Client) SetTargetRAID(ctx context.Context, ident string, cfg proto.Dict) error {
	return c.do(ctx, http.MethodPut, "/v1/nodes/"+url.PathEscape(ident)+"/states/raid", cfg, nil)
}
