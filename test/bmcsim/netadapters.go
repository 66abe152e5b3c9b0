package bmcsim

import "net/http"

// NetworkAdapter is the one network adapter every simulated chassis
// holds (Chassis/<id>/NetworkAdapters), carrying the system's NICs: its
// Manufacturer, Model and SerialNumber (the system's serial with "-NIC1")
// and its controller's FirmwarePackageVersion are what Ironic's redfish
// firmware interface reports as a NIC firmware component.
var NetworkAdapter = struct {
	ID, Manufacturer, Model, FirmwarePackageVersion string
}{"NIC.Slot.1", "Intel Corporation", "Intel(R) Ethernet 25G 2P XXV710 Adapter", "22.5.7"}

// NICSerial is the SerialNumber of a system's network adapter.
func NICSerial(inv Inventory) string { return inv.SerialNumber + "-NIC1" }

func (s *Service) routeNetworkAdapters(w http.ResponseWriter, r *http.Request, sys *system, seg []string) *apiError {
	path := root + "/Chassis/" + sys.id + "/NetworkAdapters"
	switch {
	case len(seg) == 0:
		return only(r, "GET", func() *apiError {
			writeResource(w, r, collection(path, "#NetworkAdapterCollection.NetworkAdapterCollection",
				"Network Adapter Collection", []string{path + "/" + NetworkAdapter.ID}))
			return nil
		})
	case len(seg) == 1 && seg[0] == NetworkAdapter.ID:
		return only(r, "GET", func() *apiError {
			inv := sys.backend.Inventory()
			m := odata(path+"/"+NetworkAdapter.ID, "#NetworkAdapter.v1_9_0.NetworkAdapter")
			m["Id"] = NetworkAdapter.ID
			m["Name"] = "Network Adapter"
			m["Manufacturer"] = NetworkAdapter.Manufacturer
			m["Model"] = NetworkAdapter.Model
			m["SerialNumber"] = NICSerial(inv)
			m["Status"] = status()
			m["Controllers"] = []any{map[string]any{
				"FirmwarePackageVersion": NetworkAdapter.FirmwarePackageVersion,
				"ControllerCapabilities": map[string]any{"NetworkPortCount": len(inv.NICs)},
			}}
			writeResource(w, r, m)
			return nil
		})
	}
	return errNotFound(r.URL.Path)
}
