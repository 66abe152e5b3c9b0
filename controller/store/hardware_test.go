package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

func str(s string) *string { return &s }

// TestNodeBIOSReplace checks Ironic's caching rules on both backends: new
// names created (no updated_at), changed values updated, missing names
// deleted, unchanged rows untouched, and the rows gone with their node.
func TestNodeBIOSReplace(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newFakeClock()
		st := openT(t, dsn, Options{Now: clk.Now})
		hw, err := NewNodeHardware(st)
		if err != nil {
			t.Fatal(err)
		}
		n := &proto.Node{UUID: "11111111-2222-4333-8444-555555555555", Driver: "fake-hardware"}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		yes := true
		first := []proto.BIOSSetting{
			{Name: "ProcVirtualization", Value: str("Enabled"), AttributeType: str("Enumeration"), AllowableValues: []string{"Enabled", "Disabled"}, ResetRequired: &yes},
			{Name: "BootMode", Value: str("Uefi")},
			{Name: "Gone", Value: str("x")},
		}
		if err := hw.ReplaceBIOS(ctx, n.UUID, first); err != nil {
			t.Fatal(err)
		}
		t0 := clk.Now()
		clk.Advance(time.Minute)
		second := []proto.BIOSSetting{
			{Name: "ProcVirtualization", Value: str("Disabled"), AttributeType: str("Enumeration"), AllowableValues: []string{"Enabled", "Disabled"}, ResetRequired: &yes},
			{Name: "BootMode", Value: str("Uefi")},
			{Name: "New", Value: nil},
		}
		if err := hw.ReplaceBIOS(ctx, n.UUID, second); err != nil {
			t.Fatal(err)
		}
		got, err := hw.ListBIOS(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Name)
		}
		if strings.Join(names, ",") != "BootMode,New,ProcVirtualization" {
			t.Fatalf("names %v, want BootMode,New,ProcVirtualization", names)
		}
		boot, newer, proc := got[0], got[1], got[2]
		if boot.UpdatedAt != nil || boot.CreatedAt == nil || !boot.CreatedAt.Equal(t0.Truncate(time.Microsecond)) {
			t.Errorf("unchanged BootMode: created %v updated %v, want created %v and no update", boot.CreatedAt, boot.UpdatedAt, t0)
		}
		if proc.UpdatedAt == nil || !proc.UpdatedAt.Equal(clk.Now().Truncate(time.Microsecond)) || *proc.Value != "Disabled" {
			t.Errorf("changed ProcVirtualization: %+v", proc)
		}
		if proc.ResetRequired == nil || !*proc.ResetRequired || len(proc.AllowableValues) != 2 || *proc.AttributeType != "Enumeration" {
			t.Errorf("registry fields lost: %+v", proc)
		}
		if newer.Value != nil || newer.UpdatedAt != nil {
			t.Errorf("new setting: %+v", newer)
		}
		one, err := hw.GetBIOS(ctx, n.UUID, "ProcVirtualization")
		if err != nil || *one.Value != "Disabled" {
			t.Fatalf("GetBIOS: %+v, %v", one, err)
		}
		if _, err := hw.GetBIOS(ctx, n.UUID, "Gone"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetBIOS of a deleted name: %v, want ErrNotFound", err)
		}
		if err := hw.ReplaceBIOS(ctx, n.UUID, []proto.BIOSSetting{{Name: "a"}, {Name: "a"}}); err == nil {
			t.Error("a duplicate name was accepted")
		}
		if _, err := hw.ListBIOS(ctx, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ListBIOS of a missing node: %v, want ErrNotFound", err)
		}
		fw := []proto.FirmwareComponent{{Component: "bios", InitialVersion: "1.0", CurrentVersion: str("1.1")}, {Component: "bmc", InitialVersion: "5"}}
		if err := hw.ReplaceFirmware(ctx, n.UUID, fw); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteNode(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		s := hw.s
		for _, table := range []string{"node_bios", "node_firmware"} {
			var count int
			if err := s.queryRow(ctx, s.rdb, "SELECT COUNT(*) FROM "+table).Scan(&count); err != nil {
				t.Fatal(err)
			}
			if count != 0 {
				t.Errorf("%s keeps %d rows of a deleted node", table, count)
			}
		}
	})
}

// TestNodeFirmwareIdentity: vendor, model and serial_number (API 1.114)
// round-trip on both backends, null stays null, and a changed model is an
// update of its component alone.
func TestNodeFirmwareIdentity(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newFakeClock()
		st := openT(t, dsn, Options{Now: clk.Now})
		hw, err := NewNodeHardware(st)
		if err != nil {
			t.Fatal(err)
		}
		n := &proto.Node{UUID: "11111111-2222-4333-8444-555555555555", Driver: "fake-hardware"}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		nic := proto.FirmwareComponent{Component: "NIC:ABC12345", InitialVersion: "22.0.9", CurrentVersion: str("22.5.0"),
			Vendor: str("Intel Corporation"), Model: str("Intel(R) 25GbE 2P XXV710 Adptr"), SerialNumber: str("ABC12345")}
		bmc := proto.FirmwareComponent{Component: "bmc", InitialVersion: "5", CurrentVersion: str("5"), Model: str("iDRAC 9")}
		if err := hw.ReplaceFirmware(ctx, n.UUID, []proto.FirmwareComponent{nic, bmc}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		bmc.Model = str("iDRAC 10")
		if err := hw.ReplaceFirmware(ctx, n.UUID, []proto.FirmwareComponent{nic, bmc}); err != nil {
			t.Fatal(err)
		}
		got, err := hw.ListFirmware(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Component != "NIC:ABC12345" || got[1].Component != "bmc" {
			t.Fatalf("components %+v", got)
		}
		g := got[0]
		if g.Vendor == nil || *g.Vendor != "Intel Corporation" || g.Model == nil || *g.Model != "Intel(R) 25GbE 2P XXV710 Adptr" ||
			g.SerialNumber == nil || *g.SerialNumber != "ABC12345" || g.UpdatedAt != nil {
			t.Errorf("unchanged NIC read back as %+v", g)
		}
		b := got[1]
		if b.Model == nil || *b.Model != "iDRAC 10" || b.Vendor != nil || b.SerialNumber != nil {
			t.Errorf("bmc read back as %+v, want model iDRAC 10 and no vendor or serial number", b)
		}
		if b.UpdatedAt == nil || !b.UpdatedAt.Equal(clk.Now().Truncate(time.Microsecond)) {
			t.Errorf("bmc updated_at %v after its model changed, want %v", b.UpdatedAt, clk.Now())
		}
	})
}

// TestNodeHardwareLimit: a BMC reporting too many attributes stores nothing.
func TestNodeHardwareLimit(t *testing.T) {
	ctx := context.Background()
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{})
	hw, _ := NewNodeHardware(st)
	n := &proto.Node{UUID: "11111111-2222-4333-8444-555555555555", Driver: "fake-hardware"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	many := make([]proto.BIOSSetting, MaxBIOSSettings+1)
	for i := range many {
		many[i].Name = strings.Repeat("x", 1+i%7) + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	if err := hw.ReplaceBIOS(ctx, n.UUID, many); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("ReplaceBIOS of %d settings: %v", len(many), err)
	}
	if got, _ := hw.ListBIOS(ctx, n.UUID); len(got) != 0 {
		t.Errorf("%d settings stored", len(got))
	}
}

// TestNodeHardwarePlans: the per-node lists are served by the primary key.
func TestNodeHardwarePlans(t *testing.T) {
	st := openT(t, "sqlite://"+t.TempDir()+"/k.db", Options{}).(*sqlStore)
	for _, q := range []string{
		"SELECT created_at, updated_at, doc FROM node_bios WHERE node_id = ? ORDER BY name",
		"SELECT created_at, updated_at, doc FROM node_bios WHERE node_id = ? AND name = ? ORDER BY name",
		"SELECT created_at, updated_at, doc FROM node_firmware WHERE node_id = ? ORDER BY component",
	} {
		args := []any{1}
		if strings.Count(q, "?") == 2 {
			args = append(args, "x")
		}
		plan := explainSQLite(t, st, q, args)
		if strings.Contains(plan, "TEMP B-TREE") || !strings.Contains(plan, "SEARCH") {
			t.Errorf("%s is not index-served:\n%s", q, plan)
		}
	}
}
