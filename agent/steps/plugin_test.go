package steps

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnhq/kiln/proto"
)

func writePlugin(t *testing.T, dir, name, script string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestExamplePlugin(t *testing.T) {
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p, err := DescribePlugin(context.Background(), "examples/hello", log)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "hello_plugin" || p.Version() != "1.0" || p.Evaluate(context.Background()) != SupportMainline {
		t.Fatalf("described %+v", p.desc)
	}
	if s := p.Steps(proto.StepClean); len(s) != 1 || s[0].Step != "hello" || s[0].ArgsInfo["greeting"].Description == "" {
		t.Fatalf("steps %+v", s)
	}
	var prog []proto.CommandProgress
	res, err := p.Execute(context.Background(), Call{
		Kind:     proto.StepClean,
		Step:     proto.StepCall{Step: proto.Step{Step: "hello"}, Args: map[string]any{"greeting": "hi"}},
		Node:     Node{"uuid": "node-1"},
		Progress: func(pr proto.CommandProgress) { prog = append(prog, pr) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := res.(map[string]any); !ok || m["greeted"] != true {
		t.Fatalf("result %v", res)
	}
	if len(prog) != 1 || prog[0].Stage != "greeted" {
		t.Fatalf("progress %v", prog)
	}
	if !strings.Contains(logs.String(), `hello from node node-1 (clean step), args: {\"greeting\":\"hi\"}`) {
		t.Fatalf("stdout not streamed to the log:\n%s", logs.String())
	}
	// deploy kind is not offered: next manager.
	if _, err := p.Execute(context.Background(), Call{Kind: proto.StepDeploy, Step: proto.StepCall{Step: proto.Step{Step: "hello"}}}); err == nil {
		t.Fatal("deploy hello ran")
	}
}

func TestPluginFailureAndTimeout(t *testing.T) {
	dir := t.TempDir()
	writePlugin(t, dir, "fail", `
case "$1" in
describe) echo '{"steps":{"clean":[{"step":"boom"},{"step":"slow","timeout":1}]}}';;
run)
  if [ "$2" = boom ]; then echo "working" ; echo "first error line" >&2; echo "disk /dev/x is on fire" >&2; exit 3; fi
  # slow: a child in the same group that would outlive us
  sleep 30 & sleep 30; echo never;;
esac`)
	var logs syncBuf
	ps, err := LoadPlugins(context.Background(), dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || len(ps) != 1 {
		t.Fatalf("load: %v %v", ps, err)
	}
	p := ps[0]
	if p.Name() != "fail" || p.Steps(proto.StepClean)[0].Interface != "deploy" {
		t.Fatalf("defaults not applied: %+v", p.desc)
	}
	_, err = p.Execute(context.Background(), Call{Kind: proto.StepClean, Step: proto.StepCall{Step: proto.Step{Step: "boom"}}})
	if err == nil || !strings.Contains(err.Error(), "disk /dev/x is on fire") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("failure error: %v", err)
	}
	if !strings.Contains(logs.String(), "working") || !strings.Contains(logs.String(), "first error line") {
		t.Fatalf("lines not streamed:\n%s", logs.String())
	}
	start := time.Now()
	_, err = p.Execute(context.Background(), Call{Kind: proto.StepClean, Step: proto.StepCall{Step: proto.Step{Step: "slow"}}})
	if err == nil || !strings.Contains(err.Error(), "timed out after 1s") {
		t.Fatalf("timeout error: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("timeout took %s: process group not killed", d)
	}
}

func TestLoadPluginsSkipsBroken(t *testing.T) {
	dir := t.TempDir()
	writePlugin(t, dir, "badjson", `echo '{"steps": [not json'`)
	writePlugin(t, dir, "badkind", `echo '{"steps": {"reboot": []}}'`)
	writePlugin(t, dir, "exit1", `echo oops >&2; exit 1`)
	writePlugin(t, dir, "good", `echo '{"name":"g","steps":{"deploy":[{"step":"x","priority":0}]}}'`)
	if err := os.WriteFile(filepath.Join(dir, "notexec"), []byte("#!/bin/sh\nexit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := LoadPlugins(context.Background(), dir, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	if len(ps) != 1 || ps[0].Name() != "g" {
		t.Fatalf("loaded %v", ps)
	}
	for _, want := range []string{"badjson", "unknown step kind", "oops"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not mention %q", err, want)
		}
	}
	if ps, err := LoadPlugins(context.Background(), filepath.Join(dir, "missing"), nil); ps != nil || err != nil {
		t.Fatalf("missing dir: %v %v", ps, err)
	}
}

func TestParseDescription(t *testing.T) {
	for _, c := range []struct {
		in, err string
	}{
		{`{"steps":{}}`, ""},
		{`{"steps":{"clean":[{"step":""}]}}`, "no name"},
		{`{"steps":{"clean":[{"step":"a b"}]}}`, "invalid characters"},
		{`{"steps":{"clean":[{"step":"a"},{"step":"a"}]}}`, "twice"},
		{`{"steps":{"clean":[{"step":"a","timeout":-1}]}}`, "negative timeout"},
		{`{"support":-1,"steps":{}}`, "negative support"},
		{`{"steps":{"clean":[{"step":"a","priority":"high"}]}}`, "decode"},
		{``, "decode"},
	} {
		_, err := ParseDescription([]byte(c.in))
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseDescription(%q) = %v, want %q", c.in, err, c.err)
		}
	}
}

func FuzzParseDescription(f *testing.F) {
	f.Add([]byte(`{"name":"x","version":"2","support":3,"steps":{"clean":[{"step":"a","priority":1,"timeout":5}]}}`))
	f.Add([]byte(`{"steps":{"deploy":[{"step":"b","argsinfo":{"k":{"description":"d","required":true}}}]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescription(b)
		if err != nil {
			return
		}
		if d.Version == "" || d.Support == nil {
			t.Fatalf("defaults not applied: %+v", d)
		}
	})
}
