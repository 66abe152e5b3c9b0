package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/proto"
)

// defaultCollectors is IPA's default ipa-inspection-collectors.
var defaultCollectors = []string{"default", "logs"}

// inspectionURL is where inspection data goes, or "" when inspection is off.
// As IPA: ipa-inspection-callback-url (ironic-inspector's /v1/continue under
// Ironic 2023.1, Ironic's own /v1/continue_inspection from 2023.2), else,
// when collectors were named, ipa-api-url's /v1/continue_inspection.
func (a *Agent) inspectionURL() string {
	if a.cfg.InspectionCallbackURL != "" {
		return a.cfg.InspectionCallbackURL
	}
	if len(a.cfg.InspectionCollectors) > 0 && a.cfg.APIURL != "" {
		return strings.TrimRight(a.cfg.APIURL, "/") + "/v1/continue_inspection"
	}
	return ""
}

func (a *Agent) collectorNames() []string {
	if len(a.cfg.InspectionCollectors) == 0 {
		return defaultCollectors
	}
	return a.cfg.InspectionCollectors
}

// collector adds its part to the inspection data. An error is reported in
// the data's "error" and the other collectors still run, as IPA does.
type collector func(ctx context.Context, req *proto.InspectionRequest) error

// collectors are IPA's collector names that kiln-agent implements.
func (a *Agent) collectors() map[string]collector {
	return map[string]collector{
		"default":     a.collectDefault,
		"logs":        a.collectLogs,
		"pci-devices": a.collectPCIDevices,
		"dmi-decode":  a.collectDMI,
		"lldp":        a.collectLLDP,
	}
}

// collectInspection runs the named collectors in order ("logs" last, as IPA
// advises, so the log holds what the others did).
func (a *Agent) collectInspection(ctx context.Context) proto.InspectionRequest {
	req := proto.InspectionRequest{Inventory: json.RawMessage(`{}`)}
	var failures []string
	names := a.collectorNames()
	ordered := make([]string, 0, len(names))
	for _, n := range names {
		if n != "logs" {
			ordered = append(ordered, n)
		}
	}
	for _, n := range names {
		if n == "logs" {
			ordered = append(ordered, n)
			break
		}
	}
	known := a.collectors()
	for _, name := range ordered {
		c, ok := known[name]
		if !ok {
			a.log.Warn("inspection collector not available in this agent build", "collector", name)
			failures = append(failures, fmt.Sprintf("collector %s is not available in this agent build", name))
			continue
		}
		if err := c(ctx, &req); err != nil {
			a.log.Warn("inspection collector failed", "collector", name, "err", err)
			failures = append(failures, fmt.Sprintf("collector %s failed: %v", name, err))
		}
	}
	if len(failures) > 0 {
		msg := "The following errors were encountered:\n* " + strings.Join(failures, "\n* ")
		req.Error = &msg
	}
	return req
}

// collectDefault is IPA's "default": inventory, root_disk, boot_interface
// and configuration.
func (a *Agent) collectDefault(ctx context.Context, req *proto.InspectionRequest) error {
	req.BootInterface = a.cfg.BootIF
	req.Configuration = &proto.InspectionConfiguration{Collectors: a.collectorNames(), Managers: []proto.InspectionManager{}}
	for _, m := range a.set.Managers() {
		req.Configuration.Managers = append(req.Configuration.Managers, proto.InspectionManager{Name: m.Name(), Version: m.Version()})
	}
	if a.deps.Inventory == nil {
		return errors.New("hardware inventory is not available in this agent build")
	}
	inv, err := a.deps.Inventory(ctx)
	if err != nil {
		return fmt.Errorf("collect inventory: %w", err)
	}
	b, err := json.Marshal(inv)
	if err != nil {
		return fmt.Errorf("encode inventory: %w", err)
	}
	req.Inventory = b
	var doc struct {
		Disks []json.RawMessage `json:"disks"`
		Boot  struct {
			PXEInterface string `json:"pxe_interface"`
		} `json:"boot"`
	}
	if json.Unmarshal(b, &doc) == nil {
		if doc.Boot.PXEInterface != "" {
			req.BootInterface = doc.Boot.PXEInterface
		}
		req.RootDisk = guessRootDisk(doc.Disks)
	}
	return nil
}

// guessRootDisk is IPA's default root device without hints: the smallest
// disk of at least 4 GiB.
func guessRootDisk(disks []json.RawMessage) json.RawMessage {
	var best json.RawMessage
	var bestSize int64
	for _, d := range disks {
		var s struct {
			Size int64 `json:"size"`
		}
		if json.Unmarshal(d, &s) != nil || s.Size < 4<<30 {
			continue
		}
		if best == nil || s.Size < bestSize {
			best, bestSize = d, s.Size
		}
	}
	return best
}

// collectLogs is IPA's "logs": the system logs as base64 tar.gz.
func (a *Agent) collectLogs(_ context.Context, req *proto.InspectionRequest) error {
	b, err := a.CollectLogs()
	if err != nil {
		return err
	}
	req.Logs = base64.StdEncoding.EncodeToString(b)
	return nil
}

// collectPCIDevices is IPA's "pci-devices": vendor, device and class IDs of
// every PCI function, from sysfs.
func (a *Agent) collectPCIDevices(_ context.Context, req *proto.InspectionRequest) error {
	dir := a.deps.PCIDevicesDir
	if dir == "" {
		dir = "/sys/bus/pci/devices"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list PCI devices: %w", err)
	}
	hexID := func(dev, name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, dev, name))
		if err != nil {
			return "", err
		}
		_, v, ok := strings.Cut(strings.TrimSpace(string(b)), "x")
		if !ok {
			return "", fmt.Errorf("%s/%s: %q is not 0x-hex", dev, name, b)
		}
		return v, nil
	}
	out := []proto.PCIDevice{}
	for _, e := range ents {
		bus := e.Name()
		if st, err := os.Stat(filepath.Join(dir, bus)); err != nil || !st.IsDir() {
			continue
		}
		d := proto.PCIDevice{Bus: bus}
		var errs []error
		var err error
		d.VendorID, err = hexID(bus, "vendor")
		errs = append(errs, err)
		d.ProductID, err = hexID(bus, "device")
		errs = append(errs, err)
		d.Class, err = hexID(bus, "class")
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			a.log.Warn("skipping a PCI device", "bus", bus, "err", err)
			continue
		}
		if r, err := hexID(bus, "revision"); err == nil {
			d.Revision = &r
		}
		if b, err := os.ReadFile(filepath.Join(dir, bus, "numa_node")); err == nil {
			n := strings.TrimSpace(string(b))
			d.NumaNodeID = &n
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bus < out[j].Bus })
	req.PCIDevices = out
	return nil
}

// collectDMI is IPA's "dmi-decode": BIOS, processor and memory tables from
// dmidecode's text output.
func (a *Agent) collectDMI(ctx context.Context, req *proto.InspectionRequest) error {
	run := a.deps.DMIDecode
	if run == nil {
		run = func(ctx context.Context) (string, error) {
			out, err := exec.CommandContext(ctx, "dmidecode", "-t", "bios", "-t", "processor", "-t", "memory").Output()
			return string(out), err
		}
	}
	out, err := run(ctx)
	if err != nil {
		return fmt.Errorf("run dmidecode: %w", err)
	}
	dmi, err := ParseDMIDecode(out)
	if err != nil {
		return err
	}
	req.DMI = dmi
	return nil
}

// ParseDMIDecode turns dmidecode's text into the dmi-decode collector's
// shape: "bios" (type 0), "cpu" (type 4, a list), "memory" (type 16, with
// "Number Of Devices" summed over the arrays and the type 17 entries as
// "devices"). A field with an empty value followed by indented lines is a list.
func ParseDMIDecode(text string) (map[string]any, error) {
	bios := map[string]any{}
	cpus := []any{}
	var arrays []map[string]any
	devices := []any{}
	for _, block := range strings.Split(text, "\n\n") {
		block = strings.TrimLeft(block, "\n")
		if !strings.HasPrefix(block, "Handle 0x") {
			continue
		}
		first, _, _ := strings.Cut(block, "\n")
		parts := strings.SplitN(first, ",", 3)
		if len(parts) < 2 {
			continue
		}
		typ, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(parts[1]), "DMI type")))
		if err != nil {
			continue
		}
		if typ != 0 && typ != 4 && typ != 16 && typ != 17 {
			continue
		}
		rows := parseDMIBlock(block)
		switch typ {
		case 0:
			bios = rows
		case 4:
			cpus = append(cpus, rows)
		case 16:
			arrays = append(arrays, rows)
		case 17:
			devices = append(devices, rows)
		}
	}
	memory := map[string]any{"devices": []any{}}
	if len(arrays) > 0 {
		total := 0
		for _, m := range arrays {
			s, _ := m["Number Of Devices"].(string)
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("dmidecode memory array: Number Of Devices %q: %w", s, err)
			}
			total += n
		}
		memory = arrays[0]
		memory["Number Of Devices"] = total
		delete(memory, "Handle")
		memory["devices"] = []any{}
	}
	if len(devices) > 0 {
		memory["devices"] = devices
	}
	return map[string]any{"bios": bios, "cpu": cpus, "memory": memory}, nil
}

func parseDMIBlock(block string) map[string]any {
	rows := map[string]any{}
	var listKey string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.Contains(line, ":"):
			k, v, _ := strings.Cut(line, ":")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if v != "" {
				rows[k], listKey = v, ""
			} else {
				rows[k], listKey = []any{}, k
			}
		case strings.HasPrefix(line, "Handle 0x"):
			rows["Handle"] = line
		case listKey != "" && line != "":
			rows[listKey] = append(rows[listKey].([]any), line)
		}
	}
	return rows
}

// collectLLDP is IPA's "lldp": the raw TLVs heard on each interface, as
// lldp_raw {interface: [[type, "hex"], …]}.
func (a *Agent) collectLLDP(ctx context.Context, req *proto.InspectionRequest) error {
	if a.deps.ListenLLDP == nil {
		return errors.New("LLDP collection is not available in this agent build")
	}
	var ifaces []string
	var inv struct {
		Interfaces []struct {
			Name string `json:"name"`
		} `json:"interfaces"`
	}
	if json.Unmarshal(req.Inventory, &inv) == nil {
		for _, i := range inv.Interfaces {
			ifaces = append(ifaces, i.Name)
		}
	}
	got, err := a.deps.ListenLLDP(ctx, ifaces)
	req.LLDPRaw = map[string][][2]any{}
	for name, tlvs := range got {
		raw := make([][2]any, 0, len(tlvs))
		for _, t := range tlvs {
			raw = append(raw, [2]any{t.Type, t.Value})
		}
		req.LLDPRaw[name] = raw
	}
	return err
}

// inspect collects and posts the inspection data and returns the node UUID
// from the answer. As IPA: up to InspectionAttempts posts, retried on
// connection errors, 409 and 5xx; any other refusal is logged and the agent
// goes on to the lookup ("" returned, no error).
func (a *Agent) inspect(ctx context.Context) (string, error) {
	url := a.inspectionURL()
	req := a.collectInspection(ctx)
	a.log.Info("inspection data collected", "collectors", a.collectorNames(), "url", url)
	for n := 1; ; n++ {
		resp, code, err := a.client.inspect(ctx, url, req)
		if err == nil {
			if resp.Config != nil && resp.Node != nil {
				_ = a.applyLookup(proto.LookupResponse{Node: *resp.Node, Config: *resp.Config})
			}
			a.log.Info("inspection data sent", "node", resp.NodeUUID())
			return resp.NodeUUID(), nil
		}
		if code != 0 && code != http.StatusConflict && code < 500 {
			a.log.Error("inspection data refused; proceeding with lookup", "err", err)
			return "", nil
		}
		if n >= InspectionAttempts {
			return "", err
		}
		wait := InspectionRetryWait(n)
		a.log.Warn("inspection callback failed; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-a.clock.After(wait):
		}
	}
}
