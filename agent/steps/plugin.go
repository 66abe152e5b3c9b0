package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kilnhq/kiln/proto"
)

// DefaultPluginDir is where the ramdisk ships executable step plugins.
const DefaultPluginDir = "/usr/lib/kiln-agent/steps.d"

// Plugin timeouts: describe must answer quickly; a step runs at most its
// declared timeout or DefaultStepTimeout.
const (
	DescribeTimeout    = 30 * time.Second
	DefaultStepTimeout = time.Hour
)

// Lines a plugin may print on stdout to talk to the agent (see PLUGINS.md).
const (
	progressPrefix = "KILN_PROGRESS "
	resultPrefix   = "KILN_RESULT "
)

// Description is what `PLUGIN describe` prints on stdout.
type Description struct {
	// Name of the manager; defaults to the executable's file name.
	Name string `json:"name,omitempty"`
	// Version feeds hardware_manager_version; defaults to "1.0".
	Version string `json:"version,omitempty"`
	// Support is the manager's support level; defaults to 2 (mainline).
	Support *SupportLevel `json:"support,omitempty"`
	// Steps by kind ("clean", "deploy", "service").
	Steps map[proto.StepKind][]PluginStep `json:"steps"`
}

// PluginStep is a step plus the plugin-only timeout (seconds; 0 = default).
type PluginStep struct {
	proto.Step
	Timeout int `json:"timeout,omitempty"`
}

// Plugin is one executable: a Manager whose Defs run `PLUGIN run STEP`.
type Plugin struct {
	*Manager
	Path string
	desc Description
	log  *slog.Logger
}

// LoadPlugins describes every executable regular file in dir. A plugin that
// fails to describe itself is logged and skipped (its error is returned joined
// with the others) so one broken plugin does not take the agent down. A missing
// dir is not an error.
func LoadPlugins(ctx context.Context, dir string, log *slog.Logger) ([]*Plugin, error) {
	if log == nil {
		log = slog.Default()
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read plugin dir %s: %w", dir, err)
	}
	var out []*Plugin
	var errs []error
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p, err := DescribePlugin(ctx, path, log)
		if err != nil {
			log.Error("skipping step plugin", "path", path, "err", err)
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// DescribePlugin runs `path describe` and validates its answer.
func DescribePlugin(ctx context.Context, path string, log *slog.Logger) (*Plugin, error) {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithTimeout(ctx, DescribeTimeout)
	defer cancel()
	var stdout bytes.Buffer
	stderr := newTail(4096)
	cmd := exec.CommandContext(ctx, path, "describe")
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	setProcessGroup(cmd)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("describe plugin %s: %w (stderr: %s)", path, err, stderr.String())
	}
	d, err := ParseDescription(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("describe plugin %s: %w", path, err)
	}
	if d.Name == "" {
		d.Name = filepath.Base(path)
	}
	p := &Plugin{Path: path, desc: d, log: log.With("plugin", d.Name)}
	var defs []Def
	for _, kind := range []proto.StepKind{proto.StepClean, proto.StepDeploy, proto.StepService} {
		for _, st := range d.Steps[kind] {
			timeout := DefaultStepTimeout
			if st.Timeout > 0 {
				timeout = time.Duration(st.Timeout) * time.Second
			}
			defs = append(defs, Def{Kind: kind, Step: st.Step, Timeout: timeout, Run: p.run(timeout)})
		}
	}
	if p.Manager, err = NewManager(d.Name, d.Version, *d.Support, defs...); err != nil {
		return nil, fmt.Errorf("describe plugin %s: %w", path, err)
	}
	return p, nil
}

// ParseDescription decodes and validates describe output.
func ParseDescription(b []byte) (Description, error) {
	var d Description
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return Description{}, fmt.Errorf("decode describe output: %w", err)
	}
	if d.Version == "" {
		d.Version = "1.0"
	}
	if d.Support == nil {
		s := SupportMainline
		d.Support = &s
	}
	if *d.Support < SupportNone {
		return Description{}, fmt.Errorf("negative support level %d", *d.Support)
	}
	for kind, list := range d.Steps {
		if err := (Def{Kind: kind, Step: proto.Step{Step: "x"}}).validateDecl(); err != nil {
			return Description{}, err
		}
		seen := map[string]bool{}
		for i, st := range list {
			def := Def{Kind: kind, Step: st.Step, Timeout: time.Duration(st.Timeout) * time.Second}
			if st.Timeout < 0 {
				def.Timeout = -1
			}
			if err := def.validateDecl(); err != nil {
				if st.Step.Step == "" {
					return Description{}, fmt.Errorf("%s step #%d has no name", kind, i)
				}
				return Description{}, err
			}
			if seen[st.Step.Step] {
				return Description{}, fmt.Errorf("%s step %q listed twice", kind, st.Step.Step)
			}
			seen[st.Step.Step] = true
			if st.Interface == "" {
				list[i].Interface = "deploy"
			}
		}
	}
	return d, nil
}

func (p *Plugin) Name() string    { return p.desc.Name }
func (p *Plugin) Version() string { return p.desc.Version }

// run is a step's Func: `PLUGIN run STEP` with the args as JSON on stdin.
// Exit status 0 is success; otherwise the error carries the tail of stderr.
// The process group is killed when ctx ends (the Def's timeout passes or the
// agent cancels).
func (p *Plugin) run(timeout time.Duration) Func {
	return func(ctx context.Context, call Call) (any, error) { return p.runStep(ctx, call, timeout) }
}

func (p *Plugin) runStep(ctx context.Context, call Call, timeout time.Duration) (any, error) {
	name := call.Step.Step.Step
	args := call.Step.Args
	if args == nil {
		args = map[string]any{}
	}
	in, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode args of %s: %w", name, err)
	}
	log := p.log
	if call.Log != nil {
		log = call.Log.With("plugin", p.desc.Name)
	}
	log = log.With("step", name)

	var mu sync.Mutex
	var result any
	stdout := &lineWriter{fn: func(line string) {
		switch {
		case strings.HasPrefix(line, progressPrefix):
			var pr proto.CommandProgress
			if err := json.Unmarshal([]byte(line[len(progressPrefix):]), &pr); err != nil {
				log.Warn("plugin printed a bad progress line", "line", line, "err", err)
				return
			}
			call.Report(pr)
		case strings.HasPrefix(line, resultPrefix):
			var r any
			if err := json.Unmarshal([]byte(line[len(resultPrefix):]), &r); err != nil {
				log.Warn("plugin printed a bad result line", "line", line, "err", err)
				return
			}
			mu.Lock()
			result = r
			mu.Unlock()
		default:
			log.Info(line, "stream", "stdout")
		}
	}}
	tail := newTail(2048)
	stderr := &lineWriter{fn: func(line string) {
		log.Warn(line, "stream", "stderr")
		tail.Write([]byte(line + "\n"))
	}}

	cmd := exec.CommandContext(ctx, p.Path, "run", name)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = append(os.Environ(),
		"KILN_STEP_KIND="+string(call.Kind),
		"KILN_STEP="+name,
		"KILN_NODE_UUID="+nodeUUID(call.Node),
		"KILN_IN_RAMDISK="+boolEnv(call.Safety.InRamdisk),
		"KILN_ALLOWED_DEVICES="+strings.Join(call.Safety.Allow, " "),
	)
	setProcessGroup(cmd)
	log.Info("running plugin step", "path", p.Path, "timeout", timeout)
	start := time.Now()
	err = cmd.Run()
	stdout.Flush()
	stderr.Flush()
	if err != nil {
		why := err.Error()
		if ctx.Err() == context.DeadlineExceeded {
			why = fmt.Sprintf("timed out after %s", timeout)
		} else if ctx.Err() != nil {
			why = "cancelled"
		}
		return nil, fmt.Errorf("plugin %s step %s failed: %s; stderr tail: %s", p.desc.Name, name, why, strings.TrimSpace(tail.String()))
	}
	log.Info("plugin step done", "took", time.Since(start).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	return result, nil
}

func nodeUUID(n Node) string {
	if s, ok := n["uuid"].(string); ok {
		return s
	}
	return ""
}

func boolEnv(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// setProcessGroup puts the child in its own process group and makes context
// cancellation kill the whole group, so a plugin's children die with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
}

// lineWriter calls fn for every complete line written to it.
type lineWriter struct {
	mu  sync.Mutex
	buf []byte
	fn  func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.fn(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 { // a line too long: emit what we have
		w.fn(string(w.buf))
		w.buf = nil
	}
	return len(b), nil
}

// Flush emits a last line without its newline.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.fn(string(w.buf))
		w.buf = nil
	}
}

// tail keeps the last n bytes written.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.n {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.n:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// PluginManagers returns the plugins' Managers, sorted by name.
func PluginManagers(ps []*Plugin) []*Manager {
	out := make([]*Manager, len(ps))
	for i, p := range ps {
		out[i] = p.Manager
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}
