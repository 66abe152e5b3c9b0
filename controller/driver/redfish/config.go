package redfish

import (
	"errors"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// CheckConfig implements driver.ConfigChecker: driver_info parses.
func (p *Power) CheckConfig(n *proto.Node) error { return checkInfo(n) }

// CheckConfig implements driver.ConfigChecker: driver_info parses.
func (m *Management) CheckConfig(n *proto.Node) error { return checkInfo(n) }

// CheckConfig implements driver.ConfigChecker: driver_info parses.
func (i *Inspect) CheckConfig(n *proto.Node) error { return checkInfo(n) }

// CheckConfig implements driver.ConfigChecker: driver_info, the agent image
// inputs and the network data the ISO would carry; whether the BMC has a
// virtual CD drive is left to Validate.
func (b *VirtualMediaBoot) CheckConfig(n *proto.Node) error {
	if err := checkInfo(n); err != nil {
		return err
	}
	_, hasISO := n.DriverInfo["deploy_iso"].(string)
	k, _ := n.DriverInfo["deploy_kernel"].(string)
	r, _ := n.DriverInfo["deploy_ramdisk"].(string)
	if !hasISO && (k == "" || r == "") {
		return errors.New("redfish-virtual-media needs driver_info deploy_kernel and deploy_ramdisk, or deploy_iso")
	}
	if _, err := driver.NetworkData(n); err != nil {
		return err
	}
	if v, ok := b.ISO.(ISOValidator); ok {
		if err := v.ValidateISO(n); err != nil {
			return err
		}
	}
	return nil
}

func checkInfo(n *proto.Node) error {
	_, err := ParseInfo(n)
	return err
}
