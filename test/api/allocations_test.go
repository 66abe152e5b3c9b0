package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/allocations"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// availableNodes enrolls n fake-hardware nodes named prefix0… of resource
// class gold and moves them to available through the real conductor.
func availableNodes(t *testing.T, c *gophercloud.ServiceClient, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		nd, err := nodes.Create(ctx, c, nodes.CreateOpts{Driver: "fake-hardware", Name: fmt.Sprintf("%s%d", prefix, i), ResourceClass: "gold"}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, nd.UUID)
		if err := nodes.ChangeProvisionState(ctx, c, nd.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetManage}).ExtractErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitFor(t, c, id, "manageable", func(n *nodes.Node) bool { return n.ProvisionState == "manageable" })
		if err := nodes.ChangeProvisionState(ctx, c, id, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}).ExtractErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitFor(t, c, id, "available", func(n *nodes.Node) bool { return n.ProvisionState == "available" && n.Reservation == "" })
	}
	return ids
}

// settled waits until no allocation is allocating any more (a safety-net
// deadline only: the conductor is woken at once) and returns them all.
func settled(t *testing.T, c *gophercloud.ServiceClient) []allocations.Allocation {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var all []allocations.Allocation
		err := allocations.List(c, allocations.ListOpts{}).EachPage(context.Background(), func(_ context.Context, p pagination.Page) (bool, error) {
			as, err := allocations.ExtractAllocations(p)
			all = append(all, as...)
			return true, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(all, func(a allocations.Allocation) bool { return a.State == "allocating" }) {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocations still allocating after 30 s: %+v", all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAllocationsOverHTTP drives allocations and node traits on a real
// kiln serve: 20 allocations racing for 10 nodes, trait and candidate
// matching, gophercloud's allocation client, and release on delete.
func TestAllocationsOverHTTP(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	c := newClient(t, k, "1.60")
	ctx := context.Background()
	ids := availableNodes(t, c, "n", 10)

	// GET /v1/ links the collection from 1.52.
	if code, _, b := k.call("GET", "/v1/", ""); code != http.StatusOK || !strings.Contains(string(b), k.URL+"/v1/allocations/") {
		t.Fatalf("GET /v1/: %d %s", code, b)
	}

	// 20 allocations at once for 10 nodes.
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range 20 {
		wg.Go(func() {
			codes[i], _, _ = k.call("POST", "/v1/allocations", fmt.Sprintf(`{"name":"race%d","resource_class":"gold"}`, i))
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusCreated {
			t.Fatalf("allocation %d: %d", i, code)
		}
	}
	all := settled(t, c)
	held := map[string]string{}
	failed := 0
	for _, a := range all {
		switch a.State {
		case "active":
			if other, ok := held[a.NodeUUID]; ok {
				t.Errorf("node %s given to %s and %s", a.NodeUUID, other, a.Name)
			}
			held[a.NodeUUID] = a.UUID
		case "error":
			failed++
			if !strings.HasPrefix(a.LastError, "Failed to process allocation "+a.UUID+": ") || a.NodeUUID != "" {
				t.Errorf("failed allocation %+v", a)
			}
		}
	}
	if len(held) != 10 || failed != 10 {
		t.Fatalf("%d nodes held, %d failed; want 10 and 10", len(held), failed)
	}
	for _, id := range ids {
		n, err := nodes.Get(ctx, c, id).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if n.AllocationUUID != held[id] || n.InstanceUUID != held[id] {
			t.Errorf("node %s: allocation_uuid %q instance_uuid %q, want %q", id, n.AllocationUUID, n.InstanceUUID, held[id])
		}
	}
	// gophercloud: filters and paging through next.
	var active []string
	err := allocations.List(c, allocations.ListOpts{State: allocations.AllocationState(allocations.Active), Limit: 3, SortKey: "name"}).EachPage(ctx, func(_ context.Context, p pagination.Page) (bool, error) {
		as, err := allocations.ExtractAllocations(p)
		for _, a := range as {
			active = append(active, a.Name)
		}
		return true, err
	})
	if err != nil || len(active) != 10 || !slices.IsSorted(active) {
		t.Errorf("active allocations, 3 a page: %v %v", active, err)
	}
	page, err := allocations.List(c, allocations.ListOpts{Node: "n3"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if as, _ := allocations.ExtractAllocations(page); len(as) != 1 || as[0].NodeUUID != ids[3] {
		t.Errorf("allocations of n3: %+v", as)
	}
	// Deleting every allocation frees every node.
	for _, a := range all {
		if err := allocations.Delete(ctx, c, a.UUID).ExtractErr(); err != nil {
			t.Fatalf("delete %s: %v", a.Name, err)
		}
	}
	for _, id := range ids {
		n, _ := nodes.Get(ctx, c, id).Extract()
		if n.AllocationUUID != "" || n.InstanceUUID != "" {
			t.Errorf("node %s still held: %q %q", id, n.AllocationUUID, n.InstanceUUID)
		}
	}

	// Traits: only n7 has CUSTOM_GPU; only n2, n5 are candidates.
	if code, _, b := k.call("PUT", "/v1/nodes/n7/traits", `{"traits":["CUSTOM_GPU","HW_CPU_X86_AVX2"]}`); code != http.StatusNoContent {
		t.Fatalf("PUT traits: %d %s", code, b)
	}
	if code, _, b := k.call("PUT", "/v1/nodes/n7/traits/CUSTOM_BAD-NAME", ""); code != http.StatusBadRequest ||
		faultstring(t, b) != "Schema error for trait: 'CUSTOM_BAD-NAME' is not valid under any of the given schemas" {
		t.Errorf("bad trait: %d %s", code, b)
	}
	if n, _ := nodes.Get(ctx, c, ids[7]).Extract(); !slices.Equal(n.Traits, []string{"CUSTOM_GPU", "HW_CPU_X86_AVX2"}) {
		t.Errorf("gophercloud node traits: %v", n.Traits)
	}
	gpu, err := allocations.Create(ctx, c, allocations.CreateOpts{Name: "gpu", ResourceClass: "gold", Traits: []string{"CUSTOM_GPU"}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	cand, err := allocations.Create(ctx, c, allocations.CreateOpts{Name: "cand", ResourceClass: "gold", CandidateNodes: []string{"n2", ids[5]}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cand.CandidateNodes, []string{ids[2], ids[5]}) {
		t.Errorf("candidate_nodes stored as %v, want UUIDs", cand.CandidateNodes)
	}
	none, err := allocations.Create(ctx, c, allocations.CreateOpts{Name: "none", ResourceClass: "gold", Traits: []string{"CUSTOM_FPGA"}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	settled(t, c)
	if a, _ := allocations.Get(ctx, c, gpu.UUID).Extract(); a.State != "active" || a.NodeUUID != ids[7] {
		t.Errorf("gpu allocation: %+v", a)
	}
	if a, _ := allocations.Get(ctx, c, cand.UUID).Extract(); a.State != "active" || (a.NodeUUID != ids[2] && a.NodeUUID != ids[5]) {
		t.Errorf("candidate allocation: %+v", a)
	}
	if a, _ := allocations.Get(ctx, c, none.UUID).Extract(); a.State != "error" ||
		a.LastError != "Failed to process allocation "+none.UUID+": no suitable nodes have the requested traits CUSTOM_FPGA." {
		t.Errorf("unmatched allocation: %+v", a)
	}
	// The node's allocation sub-resource, and a node that may not go.
	code, _, b := k.call("GET", "/v1/nodes/n7/allocation", "")
	if code != http.StatusOK || mustJSON(t, b)["uuid"] != gpu.UUID {
		t.Errorf("GET n7/allocation: %d %s", code, b)
	}
	if code, _, b := k.call("DELETE", "/v1/nodes/n7", ""); code != http.StatusConflict || !strings.Contains(faultstring(t, b), "is associated with instance "+gpu.UUID) {
		t.Errorf("DELETE a node with an allocation: %d %s", code, b)
	}
	if code, _, b := k.call("DELETE", "/v1/nodes/n7/allocation", ""); code != http.StatusNoContent {
		t.Errorf("DELETE n7/allocation: %d %s", code, b)
	}
	if code, _, _ := k.call("GET", "/v1/allocations/gpu", ""); code != http.StatusNotFound {
		t.Errorf("deleted allocation: %d", code)
	}
	// Deploying the allocated node and tearing it down ends the allocation,
	// as in Ironic.
	cn, _ := allocations.Get(ctx, c, cand.UUID).Extract()
	if err := nodes.ChangeProvisionState(ctx, c, cn.NodeUUID, nodes.ProvisionStateOpts{Target: nodes.TargetActive}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, cn.NodeUUID, "active", func(n *nodes.Node) bool { return n.ProvisionState == "active" && n.Reservation == "" })
	if n, _ := nodes.Get(ctx, c, cn.NodeUUID).Extract(); n.AllocationUUID != cand.UUID || n.InstanceUUID != cand.UUID {
		t.Errorf("deployed node: allocation %q instance %q", n.AllocationUUID, n.InstanceUUID)
	}
	if err := nodes.ChangeProvisionState(ctx, c, cn.NodeUUID, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	torn := waitFor(t, c, cn.NodeUUID, "available after undeploy", func(n *nodes.Node) bool { return n.ProvisionState == "available" && n.Reservation == "" })
	if torn.AllocationUUID != "" || torn.InstanceUUID != "" {
		t.Errorf("torn-down node: allocation %q instance %q", torn.AllocationUUID, torn.InstanceUUID)
	}
	_, err = allocations.Get(ctx, c, cand.UUID).Extract()
	wantStatus(t, err, http.StatusNotFound)
	// Ironic's answers below the microversions.
	if code, _, b := k.call("GET", "/v1/allocations", "", "X-OpenStack-Ironic-API-Version", "1.51"); code != http.StatusNotFound {
		t.Errorf("GET at 1.51: %d %s", code, b)
	}
	if code, _, b := k.call("POST", "/v1/allocations", `{"resource_class":"gold"}`, "X-OpenStack-Ironic-API-Version", "1.51"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST at 1.51: %d %s", code, b)
	}
	if code, _, b := k.call("GET", "/v1/nodes/n7/traits", "", "X-OpenStack-Ironic-API-Version", "1.36"); code != http.StatusNotFound {
		t.Errorf("GET traits at 1.36: %d %s", code, b)
	}
}

// TestAllocationsOpenstackClient runs `openstack baremetal allocation …`
// and `node … trait` against a real kiln serve and checks what each prints.
func TestAllocationsOpenstackClient(t *testing.T) {
	t.Parallel()
	k := startKiln(t, filepath.Join(t.TempDir(), "kiln.db"))
	ids := availableNodes(t, newClient(t, k, "1.60"), "node", 2)
	run, jsonInto := stepsOSC(t, k)
	jsonOut := func(args ...string) map[string]any {
		t.Helper()
		var m map[string]any
		jsonInto(&m, args...)
		return m
	}

	if out := run(true, "node", "add", "trait", "node1", "CUSTOM_GPU", "HW_CPU_X86_AVX2"); !strings.Contains(out, "Added trait CUSTOM_GPU") ||
		!strings.Contains(out, "Added trait HW_CPU_X86_AVX2") {
		t.Errorf("node add trait printed %q", out)
	}
	if out := run(true, "node", "trait", "list", "node1", "-f", "value"); out != "CUSTOM_GPU\nHW_CPU_X86_AVX2\n" {
		t.Errorf("node trait list printed %q", out)
	}
	if out := run(false, "node", "add", "trait", "node1", "custom_lower"); !strings.Contains(out, "'custom_lower' is not valid under any of the given schemas") {
		t.Errorf("node add trait of a bad name printed %q", out)
	}

	a := jsonOut("allocation", "create", "--resource-class", "gold", "--trait", "CUSTOM_GPU", "--name", "alloc1", "--extra", "k=v", "--wait", "30")
	if a["state"] != "active" || a["node_uuid"] != ids[1] || a["name"] != "alloc1" || fmt.Sprint(a["traits"]) != "[CUSTOM_GPU]" || fmt.Sprint(a["extra"]) != "map[k:v]" {
		t.Fatalf("allocation create --wait printed %v", a)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(run(true, "allocation", "list", "-f", "json")), &list); err != nil || len(list) != 1 ||
		list[0]["Name"] != "alloc1" || list[0]["State"] != "active" || list[0]["Node UUID"] != ids[1] {
		t.Errorf("allocation list: %v %v", list, err)
	}
	run(true, "allocation", "set", "alloc1", "--name", "alloc2", "--extra", "x=y")
	run(true, "allocation", "unset", "alloc2", "--extra", "k")
	shown := jsonOut("allocation", "show", "alloc2")
	if shown["name"] != "alloc2" || fmt.Sprint(shown["extra"]) != "map[x:y]" || shown["updated_at"] == nil {
		t.Errorf("allocation show after set/unset: %v", shown)
	}
	// (Each openstack command costs seconds: the node is read raw.)
	_, _, b := k.call("GET", "/v1/nodes/node1?fields=allocation_uuid,instance_uuid", "")
	if node := mustJSON(t, b); node["allocation_uuid"] != a["uuid"] || node["instance_uuid"] != a["uuid"] {
		t.Errorf("allocated node: %v", node)
	}
	if out := run(false, "allocation", "create", "--resource-class", "gold", "--trait", "CUSTOM_FPGA", "--name", "nomatch", "--wait", "30"); !strings.Contains(out, "no suitable nodes have the requested traits CUSTOM_FPGA") {
		t.Errorf("allocation create without a match printed %q", out)
	}
	if out := run(true, "allocation", "delete", "alloc2", "nomatch"); !strings.Contains(out, "Deleted allocation alloc2") || !strings.Contains(out, "Deleted allocation nomatch") {
		t.Errorf("allocation delete printed %q", out)
	}
	if code, _, b := k.call("GET", "/v1/allocations/alloc2", ""); code != http.StatusNotFound || faultstring(t, b) != "Allocation alloc2 could not be found." {
		t.Errorf("deleted allocation: %d %s", code, b)
	}
	_, _, b = k.call("GET", "/v1/nodes/node1?fields=allocation_uuid,instance_uuid", "")
	if node := mustJSON(t, b); node["allocation_uuid"] != nil || node["instance_uuid"] != nil {
		t.Errorf("node after its allocation was deleted: %v", node)
	}
	if out := run(true, "node", "remove", "trait", "node1", "CUSTOM_GPU"); !strings.Contains(out, "Removed trait CUSTOM_GPU") {
		t.Errorf("node remove trait printed %q", out)
	}
	if out := run(false, "node", "remove", "trait", "node1", "CUSTOM_GPU"); !strings.Contains(out, "doesn't have a trait 'CUSTOM_GPU'") {
		t.Errorf("node remove trait of a missing trait printed %q", out)
	}
	run(true, "node", "remove", "trait", "node1", "--all")
	if out := run(true, "node", "trait", "list", "node1", "-f", "value"); out != "" {
		t.Errorf("after remove --all: %q", out)
	}
}
