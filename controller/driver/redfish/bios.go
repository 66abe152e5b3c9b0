package redfish

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kilnhq/kiln/controller/driver"
	"github.com/kilnhq/kiln/proto"
)

// BIOS is the "redfish" bios interface: Systems/<id>/Bios, its attribute
// registry and its @Redfish.Settings object. Changes are staged in the
// settings object (with If-Match, as Supermicro requires, and
// @Redfish.SettingsApplyTime OnReset where the service lists it), the
// machine is rebooted, and the settings are read back: what the firmware
// did not apply fails the step, named.
type BIOS struct{ Pool *Pool }

// DefaultApplyWait bounds the wait for staged settings to apply after the
// reboot (firmware applies them during POST).
const DefaultApplyWait = 10 * time.Minute

// applyPoll is the pause between two reads while settings are pending.
const applyPoll = 5 * time.Second

// biosDoc is the part of a Bios resource the driver reads.
type biosDoc struct {
	AttributeRegistry string         `json:"AttributeRegistry"`
	Attributes        map[string]any `json:"Attributes"`
	Settings          struct {
		SettingsObject      odataID  `json:"SettingsObject"`
		SupportedApplyTimes []string `json:"SupportedApplyTimes"`
	} `json:"@Redfish.Settings"`
	Actions struct {
		ResetBios struct {
			Target string `json:"target"`
		} `json:"#Bios.ResetBios"`
	} `json:"Actions"`
}

// registryAttr is one AttributeRegistry entry.
type registryAttr struct {
	AttributeName string `json:"AttributeName"`
	Type          string `json:"Type"`
	Value         []struct {
		ValueName string `json:"ValueName"`
	} `json:"Value"`
	LowerBound             *int64 `json:"LowerBound"`
	UpperBound             *int64 `json:"UpperBound"`
	MinLength              *int64 `json:"MinLength"`
	MaxLength              *int64 `json:"MaxLength"`
	ReadOnly               *bool  `json:"ReadOnly"`
	ResetRequired          *bool  `json:"ResetRequired"`
	IsSystemUniqueProperty *bool  `json:"IsSystemUniqueProperty"`
}

func (s *session) bios(ctx context.Context) (biosDoc, string, error) {
	sp, err := s.systemPath()
	if err != nil {
		return biosDoc{}, "", err
	}
	var sys struct {
		Bios odataID `json:"Bios"`
	}
	if _, err := s.getJSON(ctx, sp, &sys); err != nil {
		return biosDoc{}, "", s.fail("read system "+sp, err)
	}
	if sys.Bios.ID == "" {
		return biosDoc{}, "", fmt.Errorf("BMC %s: system %s has no Bios resource", s.endpoint, sp)
	}
	var b biosDoc
	if _, err := s.getJSON(ctx, sys.Bios.ID, &b); err != nil {
		return biosDoc{}, "", s.fail("read BIOS settings", err)
	}
	return b, sys.Bios.ID, nil
}

// registry finds the attribute registry the Bios names, through
// /redfish/v1/Registries; a BMC without one yields none (settings are then
// listed without registry fields, as Ironic does).
func (s *session) registry(ctx context.Context, id string) map[string]registryAttr {
	if id == "" {
		return nil
	}
	var coll struct {
		Members []odataID `json:"Members"`
	}
	if _, err := s.getJSON(ctx, "/redfish/v1/Registries", &coll); err != nil {
		return nil
	}
	for _, m := range coll.Members {
		if !strings.HasSuffix(m.ID, "/"+id) && !strings.HasSuffix(m.ID, "/"+strings.Split(id, ".")[0]) {
			continue
		}
		var file struct {
			ID       string `json:"Id"`
			Location []struct {
				Language string `json:"Language"`
				URI      string `json:"Uri"`
			} `json:"Location"`
		}
		if _, err := s.getJSON(ctx, m.ID, &file); err != nil {
			return nil
		}
		for _, loc := range file.Location {
			if loc.URI == "" || (loc.Language != "" && loc.Language != "en") {
				continue
			}
			var reg struct {
				Entries struct {
					Attributes []registryAttr `json:"Attributes"`
				} `json:"RegistryEntries"`
			}
			if _, err := s.getJSON(ctx, loc.URI, &reg); err != nil {
				return nil
			}
			out := make(map[string]registryAttr, len(reg.Entries.Attributes))
			for _, a := range reg.Entries.Attributes {
				out[a.AttributeName] = a
			}
			return out
		}
	}
	return nil
}

// Settings reads the Bios attributes and the registry's word on each.
func (b *BIOS) Settings(ctx context.Context, n *proto.Node) ([]proto.BIOSSetting, error) {
	s, err := b.Pool.open(ctx, n)
	if err != nil {
		return nil, err
	}
	doc, _, err := s.bios(ctx)
	if err != nil {
		return nil, err
	}
	return biosSettings(doc.Attributes, s.registry(ctx, doc.AttributeRegistry)), nil
}

// biosSettings joins attributes with their registry entries, by name.
func biosSettings(attrs map[string]any, reg map[string]registryAttr) []proto.BIOSSetting {
	out := make([]proto.BIOSSetting, 0, len(attrs))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		st := proto.BIOSSetting{Name: name, Value: driver.BIOSText(attrs[name])}
		if a, ok := reg[name]; ok {
			if a.Type != "" {
				t := a.Type
				st.AttributeType = &t
			}
			for _, v := range a.Value {
				st.AllowableValues = append(st.AllowableValues, v.ValueName)
			}
			st.LowerBound, st.UpperBound, st.MinLength, st.MaxLength = a.LowerBound, a.UpperBound, a.MinLength, a.MaxLength
			st.ReadOnly, st.ResetRequired, st.Unique = a.ReadOnly, a.ResetRequired, a.IsSystemUniqueProperty
		}
		out = append(out, st)
	}
	return out
}

// Apply stages values, reboots and verifies.
func (b *BIOS) Apply(ctx context.Context, n *proto.Node, values []driver.BIOSValue, env driver.StepEnv) error {
	s, err := b.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	doc, _, err := s.bios(ctx)
	if err != nil {
		return err
	}
	want := map[string]any{}
	for _, v := range values {
		if _, ok := doc.Attributes[v.Name]; !ok {
			return fmt.Errorf("BMC %s has no BIOS attribute %s", s.endpoint, v.Name)
		}
		want[v.Name] = v.Value
	}
	settings := doc.Settings.SettingsObject.ID
	if settings == "" {
		return fmt.Errorf("BMC %s: the Bios resource has no @Redfish.Settings object to stage changes in", s.endpoint)
	}
	var cur map[string]any
	etag, err := s.getJSON(ctx, settings, &cur)
	if err != nil {
		return s.fail("read the BIOS settings object", err)
	}
	body := map[string]any{"Attributes": want}
	if slices.Contains(doc.Settings.SupportedApplyTimes, "OnReset") {
		body["@Redfish.SettingsApplyTime"] = map[string]any{"ApplyTime": "OnReset"}
	}
	hdr := map[string]string{}
	if etag != "" {
		hdr["If-Match"] = etag
	}
	resp, err := s.do(ctx, "PATCH", settings, body, hdr)
	if err != nil {
		return s.fail("stage BIOS settings", err)
	}
	drain(resp)
	return s.rebootAndVerify(ctx, env, want)
}

// FactoryReset posts #Bios.ResetBios, reboots, and waits for nothing to be
// pending.
func (b *BIOS) FactoryReset(ctx context.Context, n *proto.Node, env driver.StepEnv) error {
	s, err := b.Pool.open(ctx, n)
	if err != nil {
		return err
	}
	doc, bpath, err := s.bios(ctx)
	if err != nil {
		return err
	}
	target := doc.Actions.ResetBios.Target
	if target == "" {
		target = bpath + "/Actions/Bios.ResetBios"
	}
	resp, err := s.do(ctx, "POST", target, map[string]any{}, nil)
	if err != nil {
		return s.fail("reset the BIOS to its defaults", err)
	}
	drain(resp)
	return s.rebootAndVerify(ctx, env, nil)
}

// rebootAndVerify reboots so staged settings apply, waits while the
// settings object still holds changes, and fails naming every wanted
// value the firmware did not take.
func (s *session) rebootAndVerify(ctx context.Context, env driver.StepEnv, want map[string]any) error {
	if env.Reboot == nil {
		return errors.New("applying BIOS settings needs a reboot, and none was offered")
	}
	if err := env.Reboot(ctx); err != nil {
		return fmt.Errorf("reboot to apply BIOS settings: %w", err)
	}
	wait := env.Wait
	if wait == nil {
		wait = driver.Sleep
	}
	limit := env.Deadline
	if limit <= 0 {
		limit = DefaultApplyWait
	}
	for waited := time.Duration(0); ; waited += applyPoll {
		doc, _, err := s.bios(ctx)
		if err != nil {
			return err
		}
		pending, err := s.pending(ctx, doc)
		if err != nil {
			return err
		}
		if len(pending) == 0 || waited >= limit {
			var bad []string
			for _, name := range slices.Sorted(maps.Keys(want)) {
				if !sameValue(doc.Attributes[name], want[name]) {
					bad = append(bad, fmt.Sprintf("%s (wanted %v, is %v)", name, want[name], doc.Attributes[name]))
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("BMC %s did not apply the BIOS settings %s", s.endpoint, strings.Join(bad, ", "))
			}
			if len(pending) > 0 {
				return fmt.Errorf("BMC %s: BIOS settings %s still pending after %s", s.endpoint, strings.Join(pending, ", "), limit)
			}
			return nil
		}
		if err := wait(ctx, applyPoll); err != nil {
			return fmt.Errorf("waiting for the BIOS settings to apply: %w", err)
		}
	}
}

// pending names the settings object's attributes that differ from the
// current ones (iLO lists every attribute there, changed or not).
func (s *session) pending(ctx context.Context, doc biosDoc) ([]string, error) {
	if doc.Settings.SettingsObject.ID == "" {
		return nil, nil
	}
	var so struct {
		Attributes map[string]any `json:"Attributes"`
	}
	if _, err := s.getJSON(ctx, doc.Settings.SettingsObject.ID, &so); err != nil {
		return nil, s.fail("read the BIOS settings object", err)
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(so.Attributes)) {
		if !sameValue(so.Attributes[k], doc.Attributes[k]) {
			out = append(out, k)
		}
	}
	return out, nil
}

// sameValue compares JSON values, a number equal to its text ("60" = 60)
// as operators write them in step arguments.
func sameValue(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	x, y := driver.BIOSText(a), driver.BIOSText(b)
	return x != nil && y != nil && strings.EqualFold(*x, *y)
}
