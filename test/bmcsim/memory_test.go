package bmcsim

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestMemoryResetSemantics(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		start   PowerState
		reset   ResetType
		ignore  bool
		want    PowerState
		boots   int
		wantErr error
	}{
		{"On from off", PowerOff, ResetOn, false, PowerOn, 1, nil},
		{"On when on", PowerOn, ResetOn, false, PowerOn, 0, nil},
		{"ForceOn", PowerOff, ResetForceOn, false, PowerOn, 1, nil},
		{"ForceOff", PowerOn, ResetForceOff, true, PowerOff, 0, nil},
		{"GracefulShutdown", PowerOn, ResetGracefulShutdown, false, PowerOff, 0, nil},
		{"GracefulShutdown ignored", PowerOn, ResetGracefulShutdown, true, PowerOn, 0, nil},
		{"GracefulRestart", PowerOn, ResetGracefulRestart, false, PowerOn, 1, nil},
		{"GracefulRestart ignored", PowerOn, ResetGracefulRestart, true, PowerOn, 0, nil},
		{"GracefulRestart when off", PowerOff, ResetGracefulRestart, false, PowerOff, 0, ErrPoweredOff},
		{"ForceRestart", PowerOn, ResetForceRestart, true, PowerOn, 1, nil},
		{"PowerCycle from off", PowerOff, ResetPowerCycle, false, PowerOn, 1, nil},
		{"PushPowerButton on", PowerOn, ResetPushPowerButton, false, PowerOff, 0, nil},
		{"PushPowerButton off", PowerOff, ResetPushPowerButton, false, PowerOn, 1, nil},
		{"Nmi", PowerOn, ResetNmi, false, PowerOn, 0, nil},
		{"Nmi when off", PowerOff, ResetNmi, false, PowerOff, 0, ErrPoweredOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(1, Inventory{})
			if tc.start == PowerOn {
				_ = m.Reset(ctx, ResetOn)
			}
			before := len(m.Boots())
			m.SetBehavior(MemoryBehavior{IgnoreGraceful: tc.ignore})
			if err := m.Reset(ctx, tc.reset); err != tc.wantErr {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if ps, _ := m.PowerState(ctx); ps != tc.want {
				t.Errorf("power %s, want %s", ps, tc.want)
			}
			if got := len(m.Boots()) - before; got != tc.boots {
				t.Errorf("boots %d, want %d", got, tc.boots)
			}
		})
	}
}

func TestMemoryOnceOverrideAndMedia(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(2, Inventory{})
	_ = m.SetBootOverride(ctx, BootOverride{Enabled: OverrideOnce, Target: TargetCd, Mode: ModeUEFI})
	if err := m.InsertMedia(ctx, "http://h/x.iso", true); err != nil {
		t.Fatal(err)
	}
	if err := m.InsertMedia(ctx, "http://h/y.iso", true); err != ErrMediaInserted {
		t.Errorf("second insert: %v", err)
	}
	_ = m.Reset(ctx, ResetOn)
	m.GuestReboot()
	_ = m.EjectMedia(ctx)
	if err := m.EjectMedia(ctx); err != ErrMediaNotInserted {
		t.Errorf("second eject: %v", err)
	}
	m.GuestReboot()
	var got []string
	for _, b := range m.Boots() {
		got = append(got, b.Target+"|"+b.Media)
	}
	if want := []string{"Cd|http://h/x.iso", "None|http://h/x.iso", "None|"}; !slices.Equal(got, want) {
		t.Errorf("boots %v, want %v", got, want)
	}
	m.GuestPowerOff()
	if ps, _ := m.PowerState(ctx); ps != PowerOff {
		t.Errorf("after guest power-off: %s", ps)
	}
}

func TestMemoryTransitionDelay(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(3, Inventory{})
	m.SetBehavior(MemoryBehavior{TransitionDelay: time.Hour})
	_ = m.Reset(ctx, ResetOn)
	if ps, _ := m.PowerState(ctx); ps != PowerPoweringOn {
		t.Errorf("during power-on: %s", ps)
	}
	_ = m.Reset(ctx, ResetForceOff)
	if ps, _ := m.PowerState(ctx); ps != PowerPoweringOff {
		t.Errorf("during power-off: %s", ps)
	}
	m.SetBehavior(MemoryBehavior{})
	if ps, _ := m.PowerState(ctx); ps != PowerOff {
		t.Errorf("without delay: %s", ps)
	}
}

func TestDefaultInventoryUnique(t *testing.T) {
	a, b := DefaultInventory(1, Inventory{}), DefaultInventory(2, Inventory{})
	if a.UUID == b.UUID || a.SerialNumber == b.SerialNumber || a.NICs[0].MAC == b.NICs[0].MAC {
		t.Errorf("not unique: %+v %+v", a, b)
	}
	if MACForIndex(0x010203) != "52:54:00:01:02:03" {
		t.Errorf("MAC %s", MACForIndex(0x010203))
	}
	if c := DefaultInventory(1, Inventory{Model: "X", CPUCount: 64}); c.Model != "X" || c.CPUCount != 64 {
		t.Errorf("overrides lost: %+v", c)
	}
}
