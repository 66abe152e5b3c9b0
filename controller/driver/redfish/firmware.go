package redfish

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// Firmware is the "redfish" firmware interface: components from
// UpdateService/FirmwareInventory, updates by #UpdateService.SimpleUpdate
// followed through its task monitor. A BIOS image runs after the machine
// reboots; a BMC image after the BMC resets (#Manager.Reset), during which
// it answers nothing for a while: the step waits until it answers again.
type Firmware struct{ Pool *Pool }

// DefaultBMCRebootWait bounds the wait for a BMC to answer after a reset.
const DefaultBMCRebootWait = 10 * time.Minute

type inventoryItem struct {
	ID           string    `json:"Id"`
	ODataID      string    `json:"@odata.id"`
	Version      string    `json:"Version"`
	Manufacturer string    `json:"Manufacturer"`
	RelatedItem  []odataID `json:"RelatedItem"`
}

// componentName is Ironic's name for an inventory member: bios and bmc
// for the system firmware and the BMC, the member's Id otherwise.
func componentName(id string) string {
	switch l := strings.ToLower(id); {
	case l == "bios" || strings.HasPrefix(l, "bios-") || strings.HasPrefix(l, "bios."):
		return "bios"
	case l == "bmc" || strings.Contains(l, "idrac") || strings.Contains(l, "ilo"):
		return "bmc"
	}
	return id
}

func (s *session) inventory(ctx context.Context) ([]inventoryItem, error) {
	var us struct {
		FirmwareInventory odataID `json:"FirmwareInventory"`
	}
	if _, err := s.getJSON(ctx, "/redfish/v1/UpdateService", &us); err != nil {
		return nil, s.fail("read the UpdateService", err)
	}
	var coll struct {
		Members []odataID `json:"Members"`
	}
	if _, err := s.getJSON(ctx, us.FirmwareInventory.ID, &coll); err != nil {
		return nil, s.fail("list the firmware inventory", err)
	}
	var out []inventoryItem
	for _, m := range coll.Members {
		var it inventoryItem
		if _, err := s.getJSON(ctx, m.ID, &it); err != nil {
			return nil, s.fail("read firmware "+m.ID, err)
		}
		out = append(out, it)
	}
	return out, nil
}

// Components reads the firmware inventory and the network adapters'
// firmware. Vendor, model and serial number come from where Ironic's
// redfish firmware interface takes them: none for the BIOS, the Manager's
// Model for the BMC, the NetworkAdapter's own for a NIC; other inventory
// members carry their SoftwareInventory Manufacturer.
func (f *Firmware) Components(ctx context.Context, n *proto.Node) ([]driver.FirmwareVersion, error) {
	s, err := f.Pool.open(ctx, n)
	if err != nil {
		return nil, err
	}
	inv, err := s.inventory(ctx)
	if err != nil {
		return nil, err
	}
	var out []driver.FirmwareVersion
	bmcModel, readModel := "", false
	for _, it := range inv {
		v := driver.FirmwareVersion{Component: componentName(it.ID), Version: it.Version}
		switch v.Component {
		case "bios":
		case "bmc":
			if !readModel {
				if bmcModel, err = s.managerModel(ctx, it.RelatedItem); err != nil {
					return nil, err
				}
				readModel = true
			}
			v.Model = bmcModel
		default:
			v.Vendor = it.Manufacturer
		}
		out = append(out, v)
	}
	// As in Ironic, a BMC that cannot list its network adapters (some
	// answer 400 until the OS has booted) still reports the rest.
	nics, _ := s.nicComponents(ctx)
	return append(out, nics...), nil
}

// nicComponents are the network adapters' firmware, as Ironic's redfish
// interface reads them: one "NIC:<serial number, else Id>" component per
// controller that reports a FirmwarePackageVersion, from the system's
// chassis' NetworkAdapters, with the adapter's Manufacturer, Model and
// SerialNumber. A chassis without NetworkAdapters has none.
func (s *session) nicComponents(ctx context.Context) ([]driver.FirmwareVersion, error) {
	path, err := s.systemPath()
	if err != nil {
		return nil, err
	}
	var sys struct {
		Links struct {
			Chassis []odataID `json:"Chassis"`
		} `json:"Links"`
	}
	if _, err := s.getJSON(ctx, path, &sys); err != nil || len(sys.Links.Chassis) == 0 {
		return nil, err
	}
	var ch struct {
		NetworkAdapters odataID `json:"NetworkAdapters"`
	}
	if _, err := s.getJSON(ctx, sys.Links.Chassis[0].ID, &ch); err != nil || ch.NetworkAdapters.ID == "" {
		return nil, err
	}
	var coll struct {
		Members []odataID `json:"Members"`
	}
	if _, err := s.getJSON(ctx, ch.NetworkAdapters.ID, &coll); err != nil {
		return nil, err
	}
	var out []driver.FirmwareVersion
	for _, m := range coll.Members {
		var ad struct {
			ID           string `json:"Id"`
			Manufacturer string `json:"Manufacturer"`
			Model        string `json:"Model"`
			SerialNumber string `json:"SerialNumber"`
			Controllers  []struct {
				FirmwarePackageVersion string `json:"FirmwarePackageVersion"`
			} `json:"Controllers"`
		}
		if _, err := s.getJSON(ctx, m.ID, &ad); err != nil {
			return out, err
		}
		id := ad.SerialNumber
		if id == "" {
			id = ad.ID
		}
		for _, c := range ad.Controllers {
			if c.FirmwarePackageVersion != "" {
				out = append(out, driver.FirmwareVersion{Component: "NIC:" + id, Version: c.FirmwarePackageVersion,
					Vendor: ad.Manufacturer, Model: ad.Model, SerialNumber: ad.SerialNumber})
			}
		}
	}
	return out, nil
}

// managerModel is the Model of the BMC's manager: the Manager among the
// inventory member's related items, else the first of /Managers.
func (s *session) managerModel(ctx context.Context, related []odataID) (string, error) {
	path := ""
	for _, r := range related {
		if strings.Contains(r.ID, "/Managers/") {
			path = r.ID
			break
		}
	}
	if path == "" {
		var coll struct {
			Members []odataID `json:"Members"`
		}
		if _, err := s.getJSON(ctx, "/redfish/v1/Managers", &coll); err != nil {
			return "", s.fail("list managers", err)
		}
		if len(coll.Members) == 0 {
			return "", nil
		}
		path = coll.Members[0].ID
	}
	var mgr struct {
		Model string `json:"Model"`
	}
	if _, err := s.getJSON(ctx, path, &mgr); err != nil {
		return "", s.fail("read manager "+path, err)
	}
	return mgr.Model, nil
}

// Update flashes each component in turn.
func (f *Firmware) Update(ctx context.Context, n *proto.Node, updates []driver.FirmwareUpdate, env driver.StepEnv) error {
	s, err := f.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	inv, err := s.inventory(ctx)
	if err != nil {
		return err
	}
	for _, u := range updates {
		i := slices.IndexFunc(inv, func(it inventoryItem) bool { return componentName(it.ID) == u.Component || it.ID == u.Component })
		if i < 0 {
			var names []string
			for _, it := range inv {
				names = append(names, componentName(it.ID))
			}
			return fmt.Errorf("BMC %s has no firmware component %s (it has %s)", s.endpoint, u.Component, strings.Join(names, ", "))
		}
		body := map[string]any{"ImageURI": u.URL, "Targets": []string{inv[i].ODataID}}
		if strings.HasPrefix(u.URL, "https:") {
			body["TransferProtocol"] = "HTTPS"
		} else {
			body["TransferProtocol"] = "HTTP"
		}
		what := "update firmware " + u.Component + " from " + u.URL
		resp, err := s.do(ctx, http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", body, nil)
		if err != nil {
			return s.fail(what, err)
		}
		if mon := accepted(resp); mon != "" {
			if err := s.waitTask(ctx, mon, what, env); err != nil {
				return err
			}
		}
		switch componentName(inv[i].ID) {
		case "bmc":
			if err := s.resetManager(ctx, env); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		default:
			if env.Reboot == nil {
				return fmt.Errorf("%s: the new image runs after a reboot, and none was offered", what)
			}
			if err := env.Reboot(ctx); err != nil {
				return fmt.Errorf("%s: reboot: %w", what, err)
			}
		}
	}
	return nil
}

// resetManager resets the BMC (#Manager.Reset, GracefulRestart where
// allowed) and waits until its service root answers again.
func (s *session) resetManager(ctx context.Context, env driver.StepEnv) error {
	var coll struct {
		Members []odataID `json:"Members"`
	}
	if _, err := s.getJSON(ctx, "/redfish/v1/Managers", &coll); err != nil {
		return s.fail("list managers", err)
	}
	if len(coll.Members) == 0 {
		return fmt.Errorf("BMC %s lists no manager to reset", s.endpoint)
	}
	var mgr struct {
		Actions struct {
			Reset struct {
				Target  string   `json:"target"`
				Allowed []string `json:"ResetType@Redfish.AllowableValues"`
			} `json:"#Manager.Reset"`
		} `json:"Actions"`
	}
	if _, err := s.getJSON(ctx, coll.Members[0].ID, &mgr); err != nil {
		return s.fail("read manager "+coll.Members[0].ID, err)
	}
	target := mgr.Actions.Reset.Target
	if target == "" {
		return fmt.Errorf("BMC %s: manager %s has no #Manager.Reset action", s.endpoint, coll.Members[0].ID)
	}
	rt := "GracefulRestart"
	if len(mgr.Actions.Reset.Allowed) > 0 && !slices.Contains(mgr.Actions.Reset.Allowed, rt) {
		rt = mgr.Actions.Reset.Allowed[0]
	}
	resp, err := s.do(ctx, http.MethodPost, target, map[string]any{"ResetType": rt}, nil)
	if err != nil {
		return s.fail("reset the BMC", err)
	}
	drain(resp)
	return s.waitBMC(ctx, env)
}

// waitBMC polls the service root until it answers (a BMC that resets
// drops connections meanwhile), within the step's deadline.
func (s *session) waitBMC(ctx context.Context, env driver.StepEnv) error {
	wait := env.Wait
	if wait == nil {
		wait = driver.Sleep
	}
	limit := env.Deadline
	if limit <= 0 {
		limit = DefaultBMCRebootWait
	}
	for waited := time.Duration(0); ; waited += taskPoll {
		var root map[string]any
		_, err := s.getJSON(ctx, "/redfish/v1/Systems", &root)
		if err == nil {
			return nil
		}
		if waited >= limit {
			return fmt.Errorf("BMC %s did not answer within %s of its reset: %w", s.endpoint, limit, err)
		}
		if err := wait(ctx, taskPoll); err != nil {
			return fmt.Errorf("waiting for BMC %s to come back: %w", s.endpoint, err)
		}
	}
}
