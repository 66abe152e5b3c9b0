package api_test

import (
	"net/http"
	"slices"
	"testing"
)

// TestShardsMatchAPIReference: GET /v1/shards (1.82) has the shape of
// Ironic's sample: name and count of each shard.
func TestShardsMatchAPIReference(t *testing.T) {
	srv, _ := newNodeAPI(t)
	for _, b := range []string{
		`{"driver":"fake-hardware","shard":"example_shard1"}`,
		`{"driver":"fake-hardware","shard":"example_shard1"}`,
		`{"driver":"fake-hardware","shard":"example_shard2"}`,
	} {
		mustNode(t, srv, b)
	}
	got := mustCall(t, srv, http.StatusOK, "GET", "/v1/shards", "1.82", "")
	sameShape(t, "shards", apiRefJSON(t, "shards-list-response.json"), got)
	var counts []any
	for _, s := range got["shards"].([]any) {
		counts = append(counts, s.(map[string]any)["name"], s.(map[string]any)["count"])
	}
	if !slices.Equal(counts, []any{"example_shard1", float64(2), "example_shard2", float64(1)}) {
		t.Errorf("shards %v", got)
	}
}

// TestPortgroupPortDetailMatchesAPIReference: the detailed ports of a
// port group have the shape of Ironic's sample, which shows the port
// fields of 1.53 (is_smartnic, before name at 1.88).
func TestPortgroupPortDetailMatchesAPIReference(t *testing.T) {
	srv, _ := newNodeAPI(t)
	const node = "6d85703a-565d-469a-96ce-30b6de53079d"
	mustNode(t, srv, `{"driver":"fake-hardware","uuid":"`+node+`"}`)
	pg := mustCall(t, srv, http.StatusCreated, "POST", "/v1/portgroups", "1.53",
		`{"node_uuid":"`+node+`","address":"22:22:22:22:22:20","name":"pg1"}`)
	mustCall(t, srv, http.StatusCreated, "POST", "/v1/ports", "1.53", `{"node_uuid":"`+node+`","address":"22:22:22:22:22:22",
		"portgroup_uuid":"`+pg["uuid"].(string)+`","physical_network":"physnet1","pxe_enabled":true,
		"local_link_connection":{"port_id":"Ethernet3/1","switch_id":"0a:1b:2c:3d:4e:5f","switch_info":"switch1"}}`)
	got := mustCall(t, srv, http.StatusOK, "GET", "/v1/portgroups/"+pg["uuid"].(string)+"/ports/detail", "1.53", "")
	sameShape(t, "port group's ports detail", apiRefJSON(t, "portgroup-port-detail-response.json"), got)
}

// TestDriverPropertiesMatchAPIReference: Ironic's sample is the ipmi
// hardware type's properties. Kiln's ipmi driver describes, as strings,
// those of the sample it honours; it leaves out the ones it does not
// (bridging, terminal port, protocol version, proxies, …) rather than
// accept them and ignore them.
func TestDriverPropertiesMatchAPIReference(t *testing.T) {
	srv, _ := newNodeAPI(t)
	got := mustCall(t, srv, http.StatusOK, "GET", "/v1/drivers/ipmi/properties", "1.115", "")
	sample := apiRefJSON(t, "driver-property-response.json")
	for _, k := range []string{"ipmi_address", "ipmi_username", "ipmi_password", "ipmi_port", "ipmi_priv_level", "deploy_kernel", "deploy_ramdisk"} {
		if _, inSample := sample[k]; !inSample {
			t.Fatalf("%s is not in Ironic's sample", k)
		}
		if _, ok := got[k].(string); !ok {
			t.Errorf("ipmi properties: %s is %v, want a description", k, got[k])
		}
	}
	for k, v := range got {
		if _, ok := v.(string); !ok {
			t.Errorf("ipmi property %s: %v is not a description", k, v)
		}
	}
}
