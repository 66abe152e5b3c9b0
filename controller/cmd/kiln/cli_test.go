package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kilnhq/kiln/controller/client"
	"github.com/kilnhq/kiln/proto"
	"github.com/kilnhq/kiln/test/kilnproc"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var kilnBin string

func TestMain(m *testing.M) {
	flag.Parse()
	bin, cleanup, err := kilnproc.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kilnBin = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// controller starts a real `kiln serve` on a fresh database and isolates
// the CLI from the environment and config file of whoever runs the tests.
func controller(t *testing.T) *kilnproc.Proc {
	t.Helper()
	for _, k := range []string{"KILN_URL", "OS_ENDPOINT", "OS_AUTH_TYPE", "OS_USERNAME", "OS_PASSWORD"} {
		t.Setenv(k, "")
	}
	t.Setenv("KILN_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	return kilnproc.Start(t, kilnBin, filepath.Join(t.TempDir(), "kiln.db"), "--conductor", "test-conductor", "--power-sync-interval", "0")
}

// cli runs the kiln command line in process against p.
func cli(t *testing.T, p *kilnproc.Proc, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append(args, "--url", p.URL), &out, &errb)
	return out.String(), errb.String(), code
}

func mustCLI(t *testing.T, p *kilnproc.Proc, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, p, args...)
	if code != 0 {
		t.Fatalf("kiln %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	urlRE  = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
)

func normalize(s string) string {
	s = uuidRE.ReplaceAllString(s, "<uuid>")
	s = timeRE.ReplaceAllString(s, "<time>")
	return urlRE.ReplaceAllString(s, "<url>")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got = normalize(got)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func TestCLIOutputGolden(t *testing.T) {
	p := controller(t)
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "rack1-n1",
		"--driver-info", "fake_deploy_delay=0.1", "--driver-info", "fake_password=s3cret", "--property", "cpu_arch=x86_64")
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "rack1-n2", "--resource-class", "baremetal")
	mustCLI(t, p, "port", "create", "52:54:00:12:34:56", "--node", "rack1-n1")
	golden(t, "node-list.table", mustCLI(t, p, "node", "list"))
	golden(t, "node-list.json", mustCLI(t, p, "node", "list", "-o", "json"))
	golden(t, "node-list.yaml", mustCLI(t, p, "node", "list", "-o", "yaml"))
	golden(t, "node-show.json", mustCLI(t, p, "node", "show", "rack1-n2", "-o", "json"))
	golden(t, "node-show.table", mustCLI(t, p, "node", "show", "rack1-n1"))
	golden(t, "port-list.table", mustCLI(t, p, "port", "list", "--node", "rack1-n1"))
	golden(t, "driver-list.table", mustCLI(t, p, "driver", "list"))
	golden(t, "node-update.json", mustCLI(t, p, "node", "update", "rack1-n2", "-o", "json",
		"--set", "extra/rack=7", "--set", "instance_info/image_source=http://img/x.raw", "--set", "description=spare"))
	golden(t, "node-history.table", mustCLI(t, p, "node", "history", "rack1-n1"))
}

func TestCLIExitCodesAndErrors(t *testing.T) {
	p := controller(t)
	for _, tc := range []struct {
		args       []string
		code       int
		stderrPart string
	}{
		{[]string{"node", "show", "nope"}, 1, "kiln: Node nope could not be found.\n"},
		{[]string{"node", "create", "--driver", "no-such-driver"}, 1, "no-such-driver"},
		{[]string{"node", "list", "-o", "xml"}, 1, `invalid --output "xml"`},
		{[]string{"node", "update", "x"}, 1, "nothing to change"},
		{[]string{"node", "update", "x", "--set", "novalue"}, 1, "want PATH=VALUE"},
		{[]string{"node", "clean", "x"}, 1, "--clean-steps is required"},
		{[]string{"node", "delete", "a", "b"}, 1, "2 of 2 nodes failed"},
		{[]string{"node", "list", "--auth-type", "http_basic"}, 1, "needs a user name"},
		{[]string{"driver", "list"}, 0, ""},
	} {
		_, errOut, code := cli(t, p, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderrPart) {
			t.Errorf("kiln %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.stderrPart)
		}
	}
	// A controller that does not answer.
	var out, errb bytes.Buffer
	if code := run([]string{"node", "list", "--url", "http://127.0.0.1:1"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "connection refused") {
		t.Errorf("unreachable controller: exit %d, %q", code, errb.String())
	}
	// Endpoint from OS_ENDPOINT, as `baremetal` users set it, with basic auth.
	t.Setenv("OS_ENDPOINT", p.URL+"/v1/")
	t.Setenv("OS_AUTH_TYPE", "http_basic")
	t.Setenv("OS_USERNAME", "admin")
	t.Setenv("OS_PASSWORD", "pw")
	out.Reset()
	errb.Reset()
	if code := run([]string{"driver", "list", "-o", "json"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "fake-hardware") {
		t.Errorf("OS_ENDPOINT: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	// And from the config file.
	t.Setenv("OS_ENDPOINT", "")
	t.Setenv("OS_AUTH_TYPE", "")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("url: "+p.URL+"\nauth_type: none\n"), 0o600)
	t.Setenv("KILN_CONFIG", cfg)
	out.Reset()
	if code := run([]string{"driver", "list"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "fake-hardware") {
		t.Errorf("config file: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestCLIBulkCreate(t *testing.T) {
	p := controller(t)
	file := filepath.Join(t.TempDir(), "nodes.yaml")
	os.WriteFile(file, []byte(`nodes:
  - name: good-1
    driver: fake-hardware
    driver_info: {fake_deploy_delay: 1}
    ports:
      - address: "52:54:00:aa:00:01"
      - address: "not-a-mac"
  - name: bad-driver
    driver: warp-drive
  - name: good-2
    driver: fake-hardware
    properties: {cpu_arch: x86_64}
  - name: bad-field
    driver: fake-hardware
    colour: blue
  - name: good-1
    driver: fake-hardware
`), 0o644)
	out, errOut, code := cli(t, p, "node", "create", "-f", file)
	if code == 0 {
		t.Fatalf("exit 0 although entries failed; stderr %s", errOut)
	}
	golden(t, "bulk-create.stdout", out)
	golden(t, "bulk-create.stderr", errOut)
	list := mustCLI(t, p, "node", "list", "-o", "json")
	if !strings.Contains(list, `"good-1"`) || !strings.Contains(list, `"good-2"`) || strings.Count(list, `"uuid"`) != 2 {
		t.Errorf("nodes after bulk create:\n%s", list)
	}
	if ports := mustCLI(t, p, "port", "list"); !strings.Contains(ports, "52:54:00:aa:00:01") {
		t.Errorf("port of good-1 missing:\n%s", ports)
	}
	// JSON works too, as a bare list, and all-good files exit 0.
	jf := filepath.Join(t.TempDir(), "nodes.json")
	os.WriteFile(jf, []byte(`[{"name":"j1","driver":"fake-hardware"},{"name":"j2","driver":"fake-hardware"}]`), 0o644)
	mustCLI(t, p, "node", "create", "-f", jf)
}

func TestCLIWaitSuccessAndFailure(t *testing.T) {
	p := controller(t)
	for _, n := range []string{"w1", "w2"} {
		mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", n, "--driver-info", "fake_deploy_delay=1")
	}
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "badpower", "--driver-info", "fake_power_error=BMC said no")
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "baddeploy", "--driver-info", "fake_deploy_error=disk on fire")

	out := mustCLI(t, p, "node", "manage", "--wait", "w1", "w2", "baddeploy")
	for _, n := range []string{"w1", "w2", "baddeploy"} {
		if !strings.Contains(out, n+": manageable, power off — done") {
			t.Errorf("manage --wait output lacks %s done:\n%s", n, out)
		}
	}
	// provide of baddeploy cleans with the fake deploy interface: it fails.
	mustCLI(t, p, "node", "provide", "--wait", "w1", "w2")
	out = mustCLI(t, p, "node", "deploy", "--wait", "w1", "w2")
	golden(t, "deploy-wait.stdout", sortedLines(out))

	// Failure at manage: the BMC refuses the credentials.
	out, errOut, code := cli(t, p, "node", "manage", "--wait", "badpower")
	if code != 1 || !strings.Contains(out, "badpower: enroll — FAILED: ") || !strings.Contains(out, "BMC said no") ||
		!strings.Contains(errOut, "1 of 1 nodes failed: badpower") {
		t.Errorf("manage --wait of a bad BMC: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// Failure during cleaning (provide), then the deploy-fail path through the API.
	out, errOut, code = cli(t, p, "node", "provide", "--wait", "baddeploy")
	if code != 1 || !strings.Contains(out, "clean failed") || !strings.Contains(out, "disk on fire") {
		t.Errorf("provide --wait of a failing node: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// Power with --wait.
	out = mustCLI(t, p, "node", "power", "off", "--wait", "w1")
	if !strings.Contains(out, "w1: active, power off — done") {
		t.Errorf("power off --wait:\n%s", out)
	}
	// A deploy that fails: fake_deploy_error set on an available node.
	mustCLI(t, p, "node", "undeploy", "--wait", "w2")
	mustCLI(t, p, "node", "update", "w2", "--set", "driver_info/fake_deploy_error=no image")
	out, _, code = cli(t, p, "node", "deploy", "--wait", "w2")
	if code != 1 || !strings.Contains(out, "w2: deploy failed → active, power off — FAILED: Deploy of node") || !strings.Contains(out, "no image") {
		t.Errorf("failing deploy --wait: exit %d\n%s", code, out)
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	// Two nodes progress concurrently: compare each node's own sequence.
	var w1, w2 []string
	for _, l := range lines {
		if strings.HasPrefix(l, "w1") {
			w1 = append(w1, l)
		} else {
			w2 = append(w2, l)
		}
	}
	return strings.Join(append(w1, w2...), "\n") + "\n"
}

// The event stream carries a fake-hardware deploy's transitions in order.
func TestEventsOfADeployInOrder(t *testing.T) {
	p := controller(t)
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "e1", "--driver-info", "fake_deploy_delay=0.5")
	mustCLI(t, p, "node", "manage", "--wait", "e1")
	mustCLI(t, p, "node", "provide", "--wait", "e1")
	c, err := client.New(p.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var states []string
	done := errors.New("done")
	go func() {
		// Once the stream sent the snapshot, ask for the deploy.
		for i := 0; i < 100 && len(statesSnapshot(&states)) == 0; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if err := c.SetProvisionState(ctx, "e1", proto.ProvisionRequest{Target: proto.VerbActive}); err != nil {
			t.Error(err)
		}
	}()
	err = c.Events(ctx, []string{"e1"}, func(m client.StreamMessage) error {
		if m.Kind != "node" {
			return fmt.Errorf("unexpected %s message", m.Kind)
		}
		s := string(m.Event.ProvisionState)
		if m.Event.PowerState != nil {
			s += "/" + string(*m.Event.PowerState)
		}
		appendState(&states, s)
		if m.Event.ProvisionState == proto.StateActive {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("events: %v (seen %v)", err, states)
	}
	want := "[available/power off deploying/power off deploying/power on active/power on]"
	if got := fmt.Sprint(statesSnapshot(&states)); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

var statesMu = make(chan struct{}, 1)

func appendState(s *[]string, v string) {
	statesMu <- struct{}{}
	*s = append(*s, v)
	<-statesMu
}

func statesSnapshot(s *[]string) []string {
	statesMu <- struct{}{}
	defer func() { <-statesMu }()
	return append([]string(nil), *s...)
}

// /metrics parses as Prometheus text and its counters move when nodes move.
func TestMetricsEndpoint(t *testing.T) {
	p := controller(t)
	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("parse /metrics: %v", err)
		}
		out := map[string]float64{}
		for name, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := name
				for _, l := range m.GetLabel() {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
				switch {
				case m.Counter != nil:
					out[key] = m.GetCounter().GetValue()
				case m.Gauge != nil:
					out[key] = m.GetGauge().GetValue()
				case m.Histogram != nil:
					out[key] = float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return out
	}
	before := scrape()
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "m1")
	mustCLI(t, p, "node", "create", "--driver", "fake-hardware", "--name", "m2", "--driver-info", "fake_power_error=nope")
	mustCLI(t, p, "node", "manage", "--wait", "m1")
	cli(t, p, "node", "manage", "--wait", "m2")
	mustCLI(t, p, "node", "provide", "--wait", "m1")
	mustCLI(t, p, "node", "deploy", "--wait", "m1")
	after := scrape()
	for key, min := range map[string]float64{
		"kiln_bmc_requests_total,driver=fake-hardware":                                                 2,
		"kiln_bmc_request_errors_total,driver=fake-hardware":                                           1,
		"kiln_node_transitions_total,to=active":                                                        1,
		"kiln_flow_duration_seconds,result=success,verb=active":                                        1,
		"kiln_flow_duration_seconds,result=failed,verb=manage":                                         1,
		"kiln_nodes,maintenance=false,power_state=power on,provision_state=active":                     1,
		"kiln_nodes,maintenance=false,power_state=None,provision_state=enroll":                         1,
		"kiln_api_request_duration_seconds,code=202,method=PUT,route=/v1/nodes/:node/states/provision": 4,
		"kiln_api_request_duration_seconds,code=201,method=POST,route=/v1/nodes":                       2,
	} {
		if after[key]-before[key] < min {
			t.Errorf("%s moved by %v, want at least %v", key, after[key]-before[key], min)
		}
	}
}
