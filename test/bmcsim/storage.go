package bmcsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// raidDrives is how many drives each supported RAID level takes (min, max;
// max 0 = any), and raidCapacity how much of them a volume can use.
var raidLevels = []string{"RAID0", "RAID1", "RAID5", "RAID10"}

func raidDrivesOK(level string, n int) bool {
	switch level {
	case "RAID0":
		return n >= 1
	case "RAID1":
		return n == 2
	case "RAID5":
		return n >= 3
	case "RAID10":
		return n >= 4 && n%2 == 0
	}
	return false
}

func raidCapacity(level string, n int, smallest int64) int64 {
	switch level {
	case "RAID0":
		return int64(n) * smallest
	case "RAID1":
		return smallest
	case "RAID5":
		return int64(n-1) * smallest
	case "RAID10":
		return int64(n/2) * smallest
	}
	return 0
}

// volumeType is the legacy VolumeType matching a RAID level.
func volumeType(level string) string {
	switch level {
	case "RAID0":
		return "NonRedundant"
	case "RAID1":
		return "Mirrored"
	case "RAID5":
		return "StripedWithParity"
	}
	return "SpannedMirrors"
}

// drive is one physical disk behind the simulated RAID controller.
type drive struct {
	id   string
	size int64
}

// volume is one logical disk.
type volume struct {
	id       string
	name     string
	level    string
	drives   []string // drive IDs
	capacity int64
}

// storageDrives are the RAID controller's disks: the inventory's, so that
// Storage and SimpleStorage agree (LabConfig.Disks gives simulated machines
// the two a RAID-1 needs).
func storageDrives(inv Inventory) []drive {
	var d []drive
	for i, disk := range inv.Disks {
		d = append(d, drive{id: "Disk.Bay." + strconv.Itoa(i), size: disk.SizeBytes})
	}
	return d
}

func (p *Personality) storageID() string {
	if p.StorageID != "" {
		return p.StorageID
	}
	return "1"
}

// routeStorage serves Systems/<id>/Storage: one RAID controller with its
// drives and volumes. Creating and deleting a volume is a task; the volume
// appears (or goes) when the task completes.
func (s *Service) routeStorage(w http.ResponseWriter, r *http.Request, sys *system, spath string, seg []string) *apiError {
	cpath := spath + "/Storage"
	sid := s.p.storageID()
	stpath := cpath + "/" + sid
	h := sys.hw
	s.advanceTasks()
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(cpath, "#StorageCollection.StorageCollection", "Storage Collection", []string{stpath}))
			return nil
		})
	case seg[0] != sid:
		return errNotFound(r.URL.Path)
	case len(seg) == 1:
		return only(r, "GET", func() *apiError {
			h.mu.Lock()
			defer h.mu.Unlock()
			m := odata(stpath, "#Storage.v1_15_0.Storage")
			m["Id"] = sid
			m["Name"] = "RAID Controller"
			var drives []any
			for _, d := range h.drives {
				drives = append(drives, link(stpath+"/Drives/"+d.id))
			}
			m["Drives"] = drives
			m["Drives@odata.count"] = len(drives)
			m["Volumes"] = link(stpath + "/Volumes")
			m["Controllers"] = link(stpath + "/Controllers")
			m["StorageControllers"] = []any{map[string]any{
				"@odata.id":                    stpath + "#/StorageControllers/0",
				"MemberId":                     "0",
				"Name":                         "RAID Controller 0",
				"Status":                       status(),
				"SupportedRAIDTypes":           raidLevels,
				"SupportedControllerProtocols": []string{"PCIe"},
				"SupportedDeviceProtocols":     []string{"SAS", "SATA"},
				"SpeedGbps":                    12,
			}}
			m["Status"] = status()
			writeResource(w, r, m)
			return nil
		})
	case seg[1] == "Controllers":
		return s.storageControllers(w, r, stpath, seg[2:])
	case seg[1] == "Drives" && len(seg) == 3:
		return only(r, "GET", func() *apiError {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, d := range h.drives {
				if d.id != seg[2] {
					continue
				}
				m := odata(stpath+"/Drives/"+d.id, "#Drive.v1_17_0.Drive")
				m["Id"] = d.id
				m["Name"] = "Physical Disk " + strings.TrimPrefix(d.id, "Disk.Bay.")
				m["CapacityBytes"] = d.size
				m["BlockSizeBytes"] = 512
				m["MediaType"] = "SSD"
				m["Protocol"] = "SATA"
				m["Model"] = "SIM-SSD"
				m["SerialNumber"] = sys.backend.Inventory().SerialNumber + "-" + d.id
				m["IndicatorLED"] = LEDOff
				m["Status"] = status()
				var vols []any
				for _, v := range h.volumes {
					if contains(v.drives, d.id) {
						vols = append(vols, link(stpath+"/Volumes/"+v.id))
					}
				}
				m["Links"] = map[string]any{"Volumes": vols}
				writeResource(w, r, m)
				return nil
			}
			return errNotFound(r.URL.Path)
		})
	case seg[1] == "Volumes" && len(seg) == 2:
		return only(r, "GET,POST", func() *apiError {
			if r.Method == http.MethodPost {
				return s.createVolume(w, r, sys, stpath)
			}
			h.mu.Lock()
			var ids []string
			for _, v := range h.volumes {
				ids = append(ids, stpath+"/Volumes/"+v.id)
			}
			h.mu.Unlock()
			m := collection(stpath+"/Volumes", "#VolumeCollection.VolumeCollection", "Volume Collection", ids)
			m["@Redfish.OperationApplyTimeSupport"] = map[string]any{
				"@odata.type":     "#Settings.v1_3_5.OperationApplyTimeSupport",
				"SupportedValues": []string{"Immediate"},
			}
			writeResource(w, r, m)
			return nil
		})
	case seg[1] == "Volumes" && len(seg) == 3:
		return only(r, "GET,DELETE", func() *apiError {
			h.mu.Lock()
			var v *volume
			for _, x := range h.volumes {
				if x.id == seg[2] {
					v = x
				}
			}
			h.mu.Unlock()
			if v == nil {
				return errNotFound(r.URL.Path)
			}
			if r.Method == http.MethodDelete {
				t := s.newTask("Delete volume "+v.id, "RAIDConfiguration", func() {
					h.mu.Lock()
					defer h.mu.Unlock()
					for i, x := range h.volumes {
						if x == v {
							h.volumes = append(h.volumes[:i], h.volumes[i+1:]...)
							break
						}
					}
				})
				s.writeAccepted(w, t)
				return nil
			}
			m := odata(stpath+"/Volumes/"+v.id, "#Volume.v1_9_0.Volume")
			m["Id"] = v.id
			m["Name"] = v.name
			m["RAIDType"] = v.level
			m["VolumeType"] = volumeType(v.level)
			m["CapacityBytes"] = v.capacity
			m["BlockSizeBytes"] = 512
			m["Encrypted"] = false
			m["Status"] = status()
			var drives []any
			for _, d := range v.drives {
				drives = append(drives, link(stpath+"/Drives/"+d))
			}
			m["Links"] = map[string]any{"Drives": drives, "Drives@odata.count": len(drives)}
			writeResource(w, r, m)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

func (s *Service) storageControllers(w http.ResponseWriter, r *http.Request, stpath string, seg []string) *apiError {
	cpath := stpath + "/Controllers"
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(cpath, "#StorageControllerCollection.StorageControllerCollection",
				"Storage Controller Collection", []string{cpath + "/0"}))
			return nil
		})
	case len(seg) == 1 && seg[0] == "0":
		return only(r, "GET", func() *apiError {
			m := odata(cpath+"/0", "#StorageController.v1_7_0.StorageController")
			m["Id"] = "0"
			m["Name"] = "RAID Controller 0"
			m["SupportedRAIDTypes"] = raidLevels
			m["SupportedControllerProtocols"] = []string{"PCIe"}
			m["SupportedDeviceProtocols"] = []string{"SAS", "SATA"}
			m["SpeedGbps"] = 12
			m["Status"] = status()
			writeResource(w, r, m)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}

// createVolume validates a volume POST (RAIDType, Links.Drives, optional
// CapacityBytes and Name) and starts the task that creates it. Nothing
// changes on a refused request.
func (s *Service) createVolume(w http.ResponseWriter, r *http.Request, sys *system, stpath string) *apiError {
	body, e := readBody(r)
	if e != nil {
		return e
	}
	v := &volume{}
	var capacity int64
	var haveLinks bool
	for k, raw := range body {
		switch {
		case k == "RAIDType":
			if err := json.Unmarshal(raw, &v.level); err != nil {
				return errValueType(k, string(raw))
			}
			if !contains(raidLevels, v.level) {
				return errValueNotInList(k, v.level)
			}
		case k == "Name":
			if err := json.Unmarshal(raw, &v.name); err != nil {
				return errValueType(k, string(raw))
			}
		case k == "CapacityBytes":
			if err := json.Unmarshal(raw, &capacity); err != nil || capacity < 0 {
				return errValueType(k, string(raw))
			}
		case k == "Links":
			var l struct {
				Drives []struct {
					ID string `json:"@odata.id"`
				}
			}
			if err := json.Unmarshal(raw, &l); err != nil {
				return errValueType(k, string(raw))
			}
			haveLinks = true
			for _, d := range l.Drives {
				id := strings.TrimPrefix(d.ID, stpath+"/Drives/")
				if id == d.ID || strings.Contains(id, "/") {
					return errValueNotInList("Links/Drives", d.ID)
				}
				v.drives = append(v.drives, id)
			}
		case strings.HasPrefix(k, "@"):
		case k == "VolumeType" || k == "Encrypted" || k == "BlockSizeBytes":
			return errPropertyNotWritable(k)
		default:
			return errPropertyUnknown(k)
		}
	}
	if v.level == "" {
		return baseError(http.StatusBadRequest, "PropertyMissing",
			"The property RAIDType is a required property and must be included in the request.",
			"Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.",
			[]string{"#/RAIDType"}, "RAIDType")
	}
	if !haveLinks || !raidDrivesOK(v.level, len(v.drives)) {
		return baseError(http.StatusBadRequest, "PropertyValueIncorrect",
			"The number of drives in Links/Drives does not suit RAIDType "+v.level+".",
			"Link the number of drives the RAID level takes.", []string{"#/Links/Drives"}, "Links/Drives")
	}
	h := sys.hw
	h.mu.Lock()
	defer h.mu.Unlock()
	var smallest int64
	for i, id := range v.drives {
		var d *drive
		for j := range h.drives {
			if h.drives[j].id == id {
				d = &h.drives[j]
			}
		}
		if d == nil || contains(v.drives[:i], id) {
			return errValueNotInList("Links/Drives", stpath+"/Drives/"+id)
		}
		for _, x := range append(h.volumes[:len(h.volumes):len(h.volumes)], h.creating...) {
			if contains(x.drives, id) {
				e := errResourceInUse()
				e.Text = "Drive " + id + " already belongs to volume " + x.id + "."
				e.Info[0].Message = e.Text
				return e
			}
		}
		if smallest == 0 || d.size < smallest {
			smallest = d.size
		}
	}
	max := raidCapacity(v.level, len(v.drives), smallest)
	if capacity > max {
		return errValueOutOfRange("CapacityBytes", strconv.FormatInt(capacity, 10))
	}
	if capacity == 0 {
		capacity = max
	}
	v.capacity = capacity
	h.nextVolume++
	v.id = "Volume" + strconv.Itoa(h.nextVolume)
	if v.name == "" {
		v.name = v.id
	}
	// The drives are taken from now on; the volume becomes visible when the
	// task completes, and the drives are free again if it fails.
	h.creating = append(h.creating, v)
	t := s.newTask("Create volume "+v.id, "RAIDConfiguration", func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.creating = slices.DeleteFunc(h.creating, func(x *volume) bool { return x == v })
		h.volumes = append(h.volumes, v)
	})
	s.taskMu.Lock()
	t.failed = func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.creating = slices.DeleteFunc(h.creating, func(x *volume) bool { return x == v })
	}
	s.taskMu.Unlock()
	s.writeAccepted(w, t)
	return nil
}
