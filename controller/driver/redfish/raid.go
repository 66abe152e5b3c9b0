package redfish

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// RAID is the "redfish" raid interface: logical disks are Volumes of the
// system's Storage, created by POST to the Volumes collection with the
// drives in Links and deleted by DELETE, each an asynchronous task the
// step waits for through its task monitor.
type RAID struct{ Pool *Pool }

// storageDoc is the part of a Storage resource the driver reads.
type storageDoc struct {
	ID          string    `json:"Id"`
	ODataID     string    `json:"@odata.id"`
	Drives      []odataID `json:"Drives"`
	Volumes     odataID   `json:"Volumes"`
	Controllers []struct {
		SupportedRAIDTypes []string `json:"SupportedRAIDTypes"`
	} `json:"StorageControllers"`
}

type driveDoc struct {
	ID            string `json:"Id"`
	ODataID       string `json:"@odata.id"`
	CapacityBytes int64  `json:"CapacityBytes"`
	Links         struct {
		Volumes []odataID `json:"Volumes"`
	} `json:"Links"`
}

type volumeDoc struct {
	ID            string `json:"Id"`
	ODataID       string `json:"@odata.id"`
	Name          string `json:"Name"`
	RAIDType      string `json:"RAIDType"`
	CapacityBytes int64  `json:"CapacityBytes"`
	Identifiers   []struct {
		DurableName       string `json:"DurableName"`
		DurableNameFormat string `json:"DurableNameFormat"`
	} `json:"Identifiers"`
	Links struct {
		Drives []odataID `json:"Drives"`
	} `json:"Links"`
}

// storages reads the system's Storage resources.
func (s *session) storages(ctx context.Context) ([]storageDoc, error) {
	sp, err := s.systemPath()
	if err != nil {
		return nil, err
	}
	var sys struct {
		Storage odataID `json:"Storage"`
	}
	if _, err := s.getJSON(ctx, sp, &sys); err != nil {
		return nil, s.fail("read system "+sp, err)
	}
	if sys.Storage.ID == "" {
		return nil, fmt.Errorf("BMC %s: system %s has no Storage", s.endpoint, sp)
	}
	var coll struct {
		Members []odataID `json:"Members"`
	}
	if _, err := s.getJSON(ctx, sys.Storage.ID, &coll); err != nil {
		return nil, s.fail("list storage", err)
	}
	var out []storageDoc
	for _, m := range coll.Members {
		var st storageDoc
		if _, err := s.getJSON(ctx, m.ID, &st); err != nil {
			return nil, s.fail("read storage "+m.ID, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *session) volumes(ctx context.Context, st storageDoc) ([]volumeDoc, error) {
	if st.Volumes.ID == "" {
		return nil, nil
	}
	var coll struct {
		Members []odataID `json:"Members"`
	}
	if _, err := s.getJSON(ctx, st.Volumes.ID, &coll); err != nil {
		return nil, s.fail("list volumes", err)
	}
	var out []volumeDoc
	for _, m := range coll.Members {
		var v volumeDoc
		if _, err := s.getJSON(ctx, m.ID, &v); err != nil {
			return nil, s.fail("read volume "+m.ID, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// pickStorage chooses the controller a logical disk goes to: the one it
// names, else the first that supports its level.
func pickStorage(all []storageDoc, d driver.LogicalDisk) (storageDoc, error) {
	level := driver.RAIDLevelName(d.RAIDLevel)
	for _, st := range all {
		if d.Controller != "" && d.Controller != st.ID && d.Controller != st.ODataID {
			continue
		}
		for _, c := range st.Controllers {
			if slices.Contains(c.SupportedRAIDTypes, level) {
				return st, nil
			}
		}
		if d.Controller != "" {
			return storageDoc{}, fmt.Errorf("controller %s does not support %s", d.Controller, level)
		}
	}
	if d.Controller != "" {
		return storageDoc{}, fmt.Errorf("the BMC has no storage controller %s", d.Controller)
	}
	return storageDoc{}, fmt.Errorf("no storage controller supports %s", level)
}

// CreateConfiguration builds each logical disk in turn, root volume first.
func (r *RAID) CreateConfiguration(ctx context.Context, n *proto.Node, target []driver.LogicalDisk, env driver.StepEnv) (driver.RAIDResult, error) {
	s, err := r.Pool.open(ctx, n)
	if err != nil {
		return driver.RAIDResult{}, err
	}
	all, err := s.storages(ctx)
	if err != nil {
		return driver.RAIDResult{}, err
	}
	order := slices.Clone(target)
	slices.SortStableFunc(order, func(a, b driver.LogicalDisk) int {
		if a.Root != b.Root {
			if a.Root {
				return -1
			}
			return 1
		}
		return 0
	})
	res := driver.RAIDResult{RAIDConfig: proto.Dict{}}
	var built []any
	for i, d := range order {
		what := fmt.Sprintf("logical disk %d (RAID %s, %s)", i, d.RAIDLevel, sizeText(d.SizeGB))
		st, err := pickStorage(all, d)
		if err != nil {
			return res, fmt.Errorf("%s: BMC %s: %w", what, s.endpoint, err)
		}
		before, err := s.volumes(ctx, st)
		if err != nil {
			return res, err
		}
		drives, err := s.pickDrives(ctx, st, d)
		if err != nil {
			return res, fmt.Errorf("%s: %w", what, err)
		}
		body := map[string]any{"RAIDType": driver.RAIDLevelName(d.RAIDLevel)}
		var links []map[string]string
		for _, dr := range drives {
			links = append(links, map[string]string{"@odata.id": dr.ODataID})
		}
		body["Links"] = map[string]any{"Drives": links}
		if d.SizeGB > 0 {
			body["CapacityBytes"] = d.SizeGB << 30
		}
		if d.Name != "" {
			body["Name"] = d.Name
		}
		resp, err := s.do(ctx, http.MethodPost, st.Volumes.ID, body, nil)
		if err != nil {
			return res, fmt.Errorf("%s: %w", what, s.fail("create volume", err))
		}
		if mon := accepted(resp); mon != "" {
			if err := s.waitTask(ctx, mon, "create "+what, env); err != nil {
				return res, err
			}
		}
		after, err := s.volumes(ctx, st)
		if err != nil {
			return res, err
		}
		v, ok := newVolume(before, after)
		if !ok {
			return res, fmt.Errorf("create %s: BMC %s reported success but lists no new volume", what, s.endpoint)
		}
		var ids []any
		for _, dr := range drives {
			ids = append(ids, dr.ID)
		}
		ld := proto.Dict{
			"size_gb": v.CapacityBytes >> 30, "raid_level": d.RAIDLevel, "is_root_volume": d.Root,
			"controller": st.ID, "physical_disks": ids, "volume_name": v.Name,
		}
		if d.Root {
			hint := rootHint(v)
			ld["root_device_hint"] = hint
			res.RootDevice = hint
		}
		built = append(built, ld)
	}
	res.RAIDConfig["logical_disks"] = built
	return res, nil
}

// rootHint finds a volume from the ramdisk: its WWN when the BMC reports
// one, else its size.
func rootHint(v volumeDoc) proto.Dict {
	for _, id := range v.Identifiers {
		if id.DurableName != "" && (id.DurableNameFormat == "NAA" || id.DurableNameFormat == "EUI") {
			return proto.Dict{"wwn": "0x" + strings.ToLower(strings.TrimPrefix(id.DurableName, "0x"))}
		}
	}
	return proto.Dict{"size": v.CapacityBytes >> 30}
}

func newVolume(before, after []volumeDoc) (volumeDoc, bool) {
	for _, v := range after {
		if !slices.ContainsFunc(before, func(b volumeDoc) bool { return b.ODataID == v.ODataID }) {
			return v, true
		}
	}
	return volumeDoc{}, false
}

func sizeText(gb int64) string {
	if gb == 0 {
		return "MAX"
	}
	return fmt.Sprintf("%d GiB", gb)
}

// pickDrives returns the drives a logical disk is built on: those it
// names, else the level's minimum of free drives.
func (s *session) pickDrives(ctx context.Context, st storageDoc, d driver.LogicalDisk) ([]driveDoc, error) {
	var free []driveDoc
	var named []driveDoc
	for _, l := range st.Drives {
		var dr driveDoc
		if _, err := s.getJSON(ctx, l.ID, &dr); err != nil {
			return nil, s.fail("read drive "+l.ID, err)
		}
		if slices.Contains(d.PhysicalDisks, dr.ID) || slices.Contains(d.PhysicalDisks, dr.ODataID) {
			if len(dr.Links.Volumes) > 0 {
				return nil, fmt.Errorf("BMC %s: drive %s already belongs to volume %s", s.endpoint, dr.ID, dr.Links.Volumes[0].ID)
			}
			named = append(named, dr)
		}
		if len(dr.Links.Volumes) == 0 {
			free = append(free, dr)
		}
	}
	if len(d.PhysicalDisks) > 0 {
		if len(named) != len(d.PhysicalDisks) {
			return nil, fmt.Errorf("BMC %s: physical_disks %v: only %d of them are drives of controller %s", s.endpoint, d.PhysicalDisks, len(named), st.ID)
		}
		return named, nil
	}
	need := d.MinDisks()
	if len(free) < need {
		return nil, fmt.Errorf("BMC %s: RAID %s needs %d free drives; controller %s has %d", s.endpoint, d.RAIDLevel, need, st.ID, len(free))
	}
	return free[:need], nil
}

// DeleteConfiguration deletes every volume of every controller.
func (r *RAID) DeleteConfiguration(ctx context.Context, n *proto.Node, env driver.StepEnv) (driver.RAIDResult, error) {
	s, err := r.Pool.open(ctx, n)
	if err != nil {
		return driver.RAIDResult{}, err
	}
	all, err := s.storages(ctx)
	if err != nil {
		return driver.RAIDResult{}, err
	}
	for _, st := range all {
		vols, err := s.volumes(ctx, st)
		if err != nil {
			return driver.RAIDResult{}, err
		}
		for _, v := range vols {
			resp, err := s.do(ctx, http.MethodDelete, v.ODataID, nil, nil)
			if err != nil {
				return driver.RAIDResult{}, s.fail("delete volume "+v.ODataID, err)
			}
			if mon := accepted(resp); mon != "" {
				if err := s.waitTask(ctx, mon, "delete volume "+v.ID, env); err != nil {
					return driver.RAIDResult{}, err
				}
			}
		}
	}
	return driver.RAIDResult{RAIDConfig: proto.Dict{}}, nil
}
