package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kilnhq/kiln/agent/steps"
	"github.com/kilnhq/kiln/proto"
)

// apiEnv is an agent that has looked up (so it has a token) with its command
// API on an httptest server.
type apiEnv struct {
	a   *Agent
	srv *httptest.Server
}

func newAPIEnv(t *testing.T, mod func(*Config, *Deps)) *apiEnv {
	t.Helper()
	a := newTestAgent(t, nil, RealClock, mod)
	if err := a.applyLookup(okLookup(testToken, 300).resp); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &apiEnv{a, srv}
}

// call does an HTTP request and decodes JSON into out (if not nil); returns status.
func (e *apiEnv) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "application/json" && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s %s: content type %q", method, path, resp.Header.Get("Content-Type"))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// run posts a command with the token and returns the result.
func (e *apiEnv) run(t *testing.T, name string, params any, wait bool) (int, proto.CommandResult, proto.AgentFault) {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	path := "/v1/commands/?agent_token=" + testToken
	if wait {
		path += "&wait=true"
	}
	var raw json.RawMessage
	code := e.call(t, "POST", path, map[string]any{"name": name, "params": params}, &raw)
	var r proto.CommandResult
	var f proto.AgentFault
	if code == 200 {
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		checkResultKeys(t, raw)
	} else {
		json.Unmarshal(raw, &f)
		if f.Faultstring == "" || (f.Faultcode != "Client" && f.Faultcode != "Server") {
			t.Fatalf("error body %s not IPA's {faultcode, faultstring}", raw)
		}
	}
	return code, r, f
}

// checkResultKeys asserts IPA's result schema: exactly these keys, all present.
func checkResultKeys(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "command_name", "command_status", "command_error", "command_result"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("result %s lacks %q", raw, k)
		}
	}
	if len(m) != 5 {
		t.Fatalf("result %s has extra keys", raw)
	}
}

func succeeded(t *testing.T, r proto.CommandResult, name string) {
	t.Helper()
	if r.CommandStatus != proto.CommandSucceeded || r.CommandError != nil || r.CommandName != name || r.ID == "" {
		t.Fatalf("want %s SUCCEEDED, got %+v (err %+v)", name, r, r.CommandError)
	}
}

func failedWith(t *testing.T, r proto.CommandResult, name, msg string) {
	t.Helper()
	if r.CommandStatus != proto.CommandFailed || r.CommandError == nil || r.CommandName != name {
		t.Fatalf("want %s FAILED, got %+v", name, r)
	}
	if !strings.Contains(r.CommandError.Details, msg) || r.CommandError.Type == "" || r.CommandError.Code == 0 {
		t.Fatalf("error %+v does not say %q", r.CommandError, msg)
	}
}

func TestAPIDocsAndStatus(t *testing.T) {
	e := newAPIEnv(t, nil)
	var root proto.AgentRoot
	if e.call(t, "GET", "/", nil, &root) != 200 || root.DefaultVersion.ID != "v1" || len(root.Versions) != 1 {
		t.Fatalf("root %+v", root)
	}
	var v1 proto.AgentV1
	if e.call(t, "GET", "/v1/", nil, &v1) != 200 || v1.ID != "v1" || len(v1.Commands) != 2 || v1.MediaTypes[0].Type != agentMediaType {
		t.Fatalf("v1 %+v", v1)
	}
	var st proto.AgentStatus
	if e.call(t, "GET", "/v1/status", nil, &st) != 200 || st.Version != Version || st.StartedAt < 1e9 {
		t.Fatalf("status %+v", st)
	}
}

func TestAPIAuthAndErrors(t *testing.T) {
	e := newAPIEnv(t, nil)
	var f proto.AgentFault
	for _, path := range []string{"/v1/commands/?agent_token=wrong", "/v1/commands/x?agent_token=wrong"} {
		if code := e.call(t, "GET", path, nil, &f); code != 401 || f.Faultcode != "Client" {
			t.Fatalf("GET %s: %d %+v", path, code, f)
		}
	}
	if code := e.call(t, "POST", "/v1/commands/", map[string]any{"name": "standby.sync", "params": map[string]any{}}, &f); code != 401 || f.Faultstring != "Token invalid." {
		t.Fatalf("POST without token: %d %+v", code, f)
	}
	for _, c := range []struct {
		body string
		code int
		msg  string
	}{
		{`not json`, 400, "Missing or invalid name or params"},
		{`{"name":"standby.sync"}`, 400, "Missing or invalid name or params"},
		{`{"name":"standby.sync","params":[1]}`, 400, "Missing or invalid name or params"},
		{`{"name":"nosuch.cmd","params":{}}`, 404, "Extension with id nosuch not found"},
		{`{"name":"standby.nosuch","params":{}}`, 404, "Command with id standby.nosuch not found"},
		{`{"name":"sync","params":{}}`, 400, "<extension>.<name>"},
		{`{"name":"standby.prepare_image","params":{"image_info":"nope"}}`, 400, "Invalid command parameters"},
		{`{"name":"standby.prepare_image","params":{"image_info":{"id":"x"}}}`, 400, "needs id and urls"},
		{`{"name":"clean.execute_clean_step","params":{"node":{}}}`, 400, "missing step"},
	} {
		if code := e.call(t, "POST", "/v1/commands/?agent_token="+testToken, c.body, &f); code != c.code || !strings.Contains(f.Faultstring, c.msg) {
			t.Errorf("POST %s: %d %+v, want %d %q", c.body, code, f, c.code, c.msg)
		}
	}
	if code := e.call(t, "GET", "/v1/commands/nosuch?agent_token="+testToken, nil, &f); code != 404 {
		t.Fatalf("unknown command id: %d", code)
	}
	if code := e.call(t, "GET", "/v2/whatever", nil, &f); code != 404 || f.Faultcode != "Client" {
		t.Fatalf("unknown path: %d %+v", code, f)
	}
	// Nothing above may have been recorded as a command.
	var list proto.CommandList
	if e.call(t, "GET", "/v1/commands/?agent_token="+testToken, nil, &list); len(list.Commands) != 0 {
		t.Fatalf("rejected requests recorded: %+v", list)
	}
}

// blockingWriter is an image writer that reports progress and waits for release.
type blockingWriter struct {
	started, release chan struct{}
	got              steps.ImageRequest
}

func (w *blockingWriter) write(ctx context.Context, req steps.ImageRequest) (steps.ImageResult, error) {
	w.got = req
	req.Progress(proto.CommandProgress{BytesDone: 512, BytesTotal: 2048, Stage: "write"})
	close(w.started)
	<-w.release
	return steps.ImageResult{Device: "/dev/loop7", PartitionUUIDs: proto.PartitionUUIDs{RootUUID: "root-uuid"}}, nil
}

func TestAPIPrepareImageBusyProgressWait(t *testing.T) {
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	e := newAPIEnv(t, func(_ *Config, d *Deps) { d.WriteImage = w.write })
	info := map[string]any{"id": "img", "urls": []string{"http://h/img.raw"}, "disk_format": "raw", "stream_raw_images": true,
		"os_hash_algo": "sha256", "os_hash_value": "ab"}
	code, r, _ := e.run(t, proto.CmdPrepareImage, map[string]any{"image_info": info, "configdrive": "H4sI"}, false)
	if code != 200 || r.CommandStatus != proto.CommandRunning || r.CommandName != "prepare_image" {
		t.Fatalf("prepare_image: %d %+v", code, r)
	}
	<-w.started
	if w.got.Info.OSHashAlgo != "sha256" || string(w.got.Configdrive) != `"H4sI"` || w.got.Node["uuid"] != testNode {
		t.Fatalf("writer got %+v", w.got)
	}
	// progress while RUNNING
	var got proto.CommandResult
	e.call(t, "GET", "/v1/commands/"+r.ID+"?agent_token="+testToken, nil, &got)
	var pr proto.CommandProgressResult
	if err := json.Unmarshal(got.CommandResult, &pr); err != nil || pr.Progress.BytesDone != 512 || pr.Progress.BytesTotal != 2048 {
		t.Fatalf("progress %s (%v)", got.CommandResult, err)
	}
	// 409 while busy, for any command
	code, _, f := e.run(t, proto.CmdSync, nil, true)
	if code != 409 || !strings.HasPrefix(f.Faultstring, "Agent is busy") {
		t.Fatalf("busy: %d %+v", code, f)
	}
	// wait=true on GET returns when done
	go func() { time.Sleep(20 * time.Millisecond); close(w.release) }()
	var done proto.CommandResult
	e.call(t, "GET", "/v1/commands/"+r.ID+"?wait=true&agent_token="+testToken, nil, &done)
	succeeded(t, done, "prepare_image")
	if string(done.CommandResult) != `{"result":"prepare_image: image (img) written to device /dev/loop7"}` {
		t.Fatalf("result %s", done.CommandResult)
	}
	// get_partition_uuids now answers what the writer recorded
	_, r, _ = e.run(t, proto.CmdGetPartitionUUIDs, nil, true)
	succeeded(t, r, "get_partition_uuids")
	if string(r.CommandResult) != `{"root uuid":"root-uuid"}` {
		t.Fatalf("uuids %s", r.CommandResult)
	}
	var list proto.CommandList
	e.call(t, "GET", "/v1/commands/?agent_token="+testToken, nil, &list)
	if len(list.Commands) != 2 || list.Commands[0].CommandName != "prepare_image" || list.Commands[1].CommandName != "get_partition_uuids" {
		t.Fatalf("list %+v", list)
	}
}

func TestAPICommandsWithoutHardwareParts(t *testing.T) {
	e := newAPIEnv(t, nil)
	for _, c := range []struct {
		name   string
		params any
		msg    string
	}{
		{proto.CmdPrepareImage, map[string]any{"image_info": map[string]any{"id": "i", "urls": []string{"u"}}}, "not available in this agent build"},
		{proto.CmdGetPartitionUUIDs, nil, "not available in this agent build"},
		{proto.CmdInstallBootloader, map[string]any{"root_uuid": "r", "target_boot_mode": "uefi"}, "not available in this agent build"},
		{proto.CmdGetHardwareInfo, nil, "not available in this agent build"},
		{proto.CmdFinalizeRescue, map[string]any{"rescue_password": "x", "hashed": true}, "not available in this agent build"},
		{proto.CmdPowerOff, nil, "not running in a ramdisk"},
		{proto.CmdRunImage, nil, "not running in a ramdisk"},
	} {
		code, r, f := e.run(t, c.name, c.params, true)
		if code != 200 {
			t.Fatalf("%s: %d %+v", c.name, code, f)
		}
		_, cmd, _ := proto.SplitCommandName(c.name)
		failedWith(t, r, cmd, c.msg)
	}
}

func TestAPISyncLogsLockdownInventoryPower(t *testing.T) {
	var powered []PowerAction
	e := newAPIEnv(t, func(_ *Config, d *Deps) {
		d.Inventory = func(context.Context) (any, error) { return map[string]any{"cpu": map[string]any{"count": 4}}, nil }
		d.Power = func(_ context.Context, a PowerAction) error { powered = append(powered, a); return nil }
		d.LogFiles = []string{"/proc/cmdline", "/nonexistent"}
	})
	_, r, _ := e.run(t, proto.CmdSync, nil, false)
	succeeded(t, r, "sync")
	if string(r.CommandResult) != "null" {
		t.Fatalf("sync result %s", r.CommandResult)
	}
	_, r, _ = e.run(t, proto.CmdGetHardwareInfo, nil, true)
	succeeded(t, r, "get_hardware_info")
	if string(r.CommandResult) != `{"cpu":{"count":4}}` {
		t.Fatalf("inventory %s", r.CommandResult)
	}
	_, r, _ = e.run(t, proto.CmdPowerOff, nil, true)
	succeeded(t, r, "power_off")
	_, r, _ = e.run(t, proto.CmdRunImage, nil, true)
	succeeded(t, r, "run_image")
	if len(powered) != 2 || powered[0] != PowerOff || powered[1] != Reboot {
		t.Fatalf("power actions %v", powered)
	}

	e.a.log.Info("a line the logs must carry")
	_, r, _ = e.run(t, proto.CmdCollectSystemLogs, nil, true)
	succeeded(t, r, "collect_system_logs")
	var logs proto.SystemLogsResult
	json.Unmarshal(r.CommandResult, &logs)
	raw, err := base64.StdEncoding.DecodeString(logs.SystemLogs)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, raw)
	mustContain(t, files["agent.log"], "a line the logs must carry", "command finished")
	if _, ok := files["files/proc/cmdline"]; !ok {
		t.Fatalf("tar lacks /proc/cmdline: %v", keys(files))
	}

	_, r, _ = e.run(t, proto.CmdLockdown, nil, true)
	succeeded(t, r, "lockdown")
	select {
	case <-e.a.lockdown:
	default:
		t.Fatal("lockdown did not stop heartbeats")
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		out[h.Name] = string(c)
	}
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

func TestAPISteps(t *testing.T) {
	gate := make(chan struct{})
	panicky := steps.MustManager("panicky", "1", steps.SupportGeneric, steps.Def{Kind: proto.StepService,
		Step: proto.Step{Step: "explode", Interface: "deploy"}, Run: func(context.Context, steps.Call) (any, error) {
			panic("kaboom")
		}})
	failing := steps.MustManager("failing", "1", steps.SupportGeneric, steps.Def{Kind: proto.StepClean,
		Step: proto.Step{Step: "fail", Interface: "deploy"}, Run: func(context.Context, steps.Call) (any, error) {
			return nil, errors.New("the disk said no")
		}})
	var wrote steps.ImageRequest
	e := newAPIEnv(t, func(_ *Config, d *Deps) {
		d.Managers = []*steps.Manager{quickStep(gate), panicky, failing}
		d.WriteImage = func(_ context.Context, req steps.ImageRequest) (steps.ImageResult, error) {
			wrote = req
			return steps.ImageResult{Device: "/dev/vda"}, nil
		}
	})
	close(gate)
	params := map[string]any{"node": map[string]any{"uuid": testNode}, "ports": []any{}}

	_, r, _ := e.run(t, proto.CmdGetCleanSteps, params, true)
	succeeded(t, r, "get_clean_steps")
	var sr proto.StepsResult
	if err := json.Unmarshal(r.CommandResult, &sr); err != nil {
		t.Fatal(err)
	}
	if sr.Kind != proto.StepClean || len(sr.Steps["test_manager"]) != 1 || sr.HardwareManagerVersion["test_manager"] != "7" ||
		sr.HardwareManagerVersion[GenericManagerName] != GenericManagerVersion {
		t.Fatalf("clean steps %s", r.CommandResult)
	}
	_, r, _ = e.run(t, proto.CmdGetDeploySteps, params, true)
	json.Unmarshal(r.CommandResult, &sr)
	if sr.Kind != proto.StepDeploy || len(sr.Steps[GenericManagerName]) != 1 || sr.Steps[GenericManagerName][0].Step != "write_image" {
		t.Fatalf("deploy steps %s", r.CommandResult)
	}
	_, r, _ = e.run(t, proto.CmdGetServiceSteps, params, true)
	json.Unmarshal(r.CommandResult, &sr)
	if sr.Kind != proto.StepService || sr.Steps["panicky"][0].Step != "explode" {
		t.Fatalf("service steps %s", r.CommandResult)
	}
	versions := sr.HardwareManagerVersion

	exec := func(kind proto.StepKind, step string, args map[string]any, version map[string]string) proto.CommandResult {
		p := proto.ExecuteStepParams{Step: proto.StepCall{Step: proto.Step{Step: step, Interface: "deploy"}, Args: args},
			Node: map[string]any{"uuid": testNode}, Ports: []map[string]any{}, Version: version}
		b, _ := p.MarshalFor(kind)
		code, r, f := e.run(t, string(kind)+".execute_"+string(kind)+"_step", json.RawMessage(b), true)
		if code != 200 {
			t.Fatalf("execute %s: %d %+v", step, code, f)
		}
		return r
	}
	r = exec(proto.StepClean, "quick", nil, versions)
	succeeded(t, r, "execute_clean_step")
	var er proto.ExecuteStepResult
	if err := json.Unmarshal(r.CommandResult, &er); err != nil || er.Kind != proto.StepClean || er.Step.Step.Step != "quick" ||
		er.Result.(map[string]any)["ok"] != true {
		t.Fatalf("execute result %s (%v)", r.CommandResult, err)
	}
	r = exec(proto.StepClean, "quick", nil, map[string]string{"test_manager": "6"})
	if r.CommandStatus != proto.CommandCleanVersionMismatch || r.CommandError == nil || r.CommandError.Type != "VersionMismatch" {
		t.Fatalf("want CLEAN_VERSION_MISMATCH, got %+v", r)
	}
	r = exec(proto.StepClean, "fail", nil, nil)
	failedWith(t, r, "execute_clean_step", "the disk said no")
	r = exec(proto.StepClean, "nosuch", nil, nil)
	failedWith(t, r, "execute_clean_step", "no hardware manager implements it")
	r = exec(proto.StepService, "explode", nil, nil)
	failedWith(t, r, "execute_service_step", "panic: kaboom")
	// the agent survived the panic
	_, r, _ = e.run(t, proto.CmdSync, nil, true)
	succeeded(t, r, "sync")

	r = exec(proto.StepDeploy, "write_image", map[string]any{"image_info": map[string]any{"id": "i", "urls": []string{"http://x/i"}}}, nil)
	succeeded(t, r, "execute_deploy_step")
	if wrote.Info.ID != "i" || wrote.Node["uuid"] != testNode {
		t.Fatalf("write_image step gave writer %+v", wrote)
	}
	r = exec(proto.StepDeploy, "write_image", map[string]any{"image_info": map[string]any{"id": "i"}}, nil)
	failedWith(t, r, "execute_deploy_step", "needs id and urls")
}

func TestRingAndRamdiskDetection(t *testing.T) {
	r := NewRing(8)
	r.Write([]byte("abc"))
	if string(r.Bytes()) != "abc" {
		t.Fatal(string(r.Bytes()))
	}
	r.Write([]byte("defgh"))
	if string(r.Bytes()) != "abcdefgh" {
		t.Fatal(string(r.Bytes()))
	}
	r.Write([]byte("ij"))
	if string(r.Bytes()) != "cdefghij" {
		t.Fatal(string(r.Bytes()))
	}
	r.Write([]byte("0123456789"))
	if string(r.Bytes()) != "23456789" {
		t.Fatal(string(r.Bytes()))
	}
	for _, c := range []struct {
		mounts string
		init   bool
		want   bool
	}{
		{"rootfs / rootfs rw 0 0\nproc /proc proc rw 0 0\n", true, true},
		{"none / tmpfs rw 0 0\n", true, true},
		{"none / ramfs rw 0 0\n", false, false},
		{"/dev/sda1 / ext4 rw 0 0\n", true, false},
		{"rootfs / rootfs rw 0 0\noverlay / overlay rw 0 0\n", true, false},
		{"", true, false},
	} {
		if got := RamdiskRoot(c.mounts, c.init); got != c.want {
			t.Errorf("RamdiskRoot(%q, %v) = %v", c.mounts, c.init, got)
		}
	}
	if s := SafetyFor(Config{Ramdisk: "false", AllowDevices: []string{"/dev/loop3"}}); s.InRamdisk || s.Check("/dev/loop3") != nil || s.Check("/dev/sda") == nil {
		t.Fatalf("safety %+v", s)
	}
	if s := SafetyFor(Config{Ramdisk: "true"}); !s.InRamdisk {
		t.Fatal("--ramdisk=true ignored")
	}
}

func TestSupervise(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	err := Supervise(ctx, newTestAgent(t, nil, RealClock, nil).log, true, time.Millisecond, func(context.Context) error {
		runs++
		switch runs {
		case 1:
			return errors.New("lookup failed")
		case 2:
			panic("bug")
		}
		cancel()
		return nil
	})
	if runs != 3 || !errors.Is(err, context.Canceled) {
		t.Fatalf("runs %d err %v", runs, err)
	}
	err = Supervise(context.Background(), newTestAgent(t, nil, RealClock, nil).log, false, time.Millisecond, func(context.Context) error {
		return errors.New("fatal")
	})
	if err == nil || err.Error() != "fatal" {
		t.Fatalf("outside a ramdisk: %v", err)
	}
}

// TestAPIExamplePlugin runs the shipped example plugin through the command API.
func TestAPIExamplePlugin(t *testing.T) {
	e := newAPIEnv(t, func(c *Config, _ *Deps) { c.PluginDir = "steps/examples" })
	_, r, _ := e.run(t, proto.CmdGetCleanSteps, map[string]any{"node": map[string]any{}, "ports": []any{}}, true)
	var sr proto.StepsResult
	json.Unmarshal(r.CommandResult, &sr)
	if len(sr.Steps["hello_plugin"]) != 1 || sr.HardwareManagerVersion["hello_plugin"] != "1.0" {
		t.Fatalf("plugin steps missing: %s", r.CommandResult)
	}
	p := proto.ExecuteStepParams{Step: proto.StepCall{Step: proto.Step{Step: "hello"}, Args: map[string]any{"greeting": "hi"}},
		Node: map[string]any{"uuid": testNode}, Version: sr.HardwareManagerVersion}
	b, _ := p.MarshalFor(proto.StepClean)
	_, r, _ = e.run(t, proto.CmdExecuteCleanStep, json.RawMessage(b), true)
	succeeded(t, r, "execute_clean_step")
	mustContain(t, string(r.CommandResult), `"clean_result":{"greeted":true}`)
	mustContain(t, string(e.a.ring.Bytes()), "hello from node "+testNode)
}

func TestCommandHistoryBounded(t *testing.T) {
	a := newTestAgent(t, nil, RealClock, nil)
	var first string
	for i := 0; i < maxCommands+5; i++ {
		c, err := a.Execute(proto.CmdSync, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c.Result().ID
		}
	}
	if got := a.Commands(); len(got) != maxCommands || got[0].ID == first {
		t.Fatalf("kept %d commands", len(got))
	}
	if a.command(first) != nil {
		t.Fatal("oldest command still addressable")
	}
}
