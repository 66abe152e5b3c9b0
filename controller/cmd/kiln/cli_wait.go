package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/controller/client"
	"github.com/kilnhq/kiln/controller/events"
	"github.com/kilnhq/kiln/controller/state"
	"github.com/kilnhq/kiln/proto"
)

// goal judges a node's state while waiting: done, and if done whether it
// failed (err carries last_error).
type goal func(e events.Event) (done bool, err error)

// provisionGoal is reached when the node rests in a stable state — the
// verb's own for success — or in a failed state.
func provisionGoal(v provisionVerb) goal {
	return func(e events.Event) (bool, error) {
		s := e.ProvisionState
		if state.IsFailed(s) {
			if v.target == proto.VerbAbort {
				return true, nil
			}
			return true, failure(e, "")
		}
		if state.IsTransient(s) || e.TargetProvisionState != nil {
			return false, nil
		}
		if v.expect != "" && s != v.expect {
			return true, failure(e, fmt.Sprintf("ended in %s, not %s", s, v.expect))
		}
		return true, nil
	}
}

// powerGoal is reached when no power change is pending any more.
func powerGoal(want proto.PowerState) goal {
	return func(e events.Event) (bool, error) {
		if e.TargetPowerState != nil {
			return false, nil
		}
		if e.PowerState == nil || *e.PowerState != want {
			got := "unknown"
			if e.PowerState != nil {
				got = string(*e.PowerState)
			}
			return true, failure(e, fmt.Sprintf("power state is %s, not %s", got, want))
		}
		return true, nil
	}
}

func failure(e events.Event, fallback string) error {
	msg := fallback
	if e.LastError != nil && *e.LastError != "" {
		msg = *e.LastError
	}
	if msg == "" {
		msg = "failed"
	}
	return fmt.Errorf("%s: %s", e.ProvisionState, msg)
}

// tracked is one node being waited for.
type tracked struct {
	ident string // as the user named it
	last  events.Event
	seen  bool
	done  bool
	err   error
	// rate of the running step's progress, bytes per second (0 if unknown)
	rate     float64
	prevDone int64
	prevAt   time.Time
}

// waiter follows nodes until each meets its goal, drawing their state.
type waiter struct {
	goal  goal
	out   io.Writer
	tty   bool
	mu    sync.Mutex
	nodes []*tracked
	byID  map[string]*tracked // UUID → node
	drawn int                 // lines drawn on the terminal
	lines map[*tracked]string // last plain line printed per node
}

// safetyPoll is how often --wait reads the nodes besides following the stream.
const safetyPoll = 5 * time.Second

// waitNodes follows idents until all are done or timeout passes; it uses the
// controller's event stream and falls back to polling if the stream fails.
func waitNodes(cmd *cobra.Command, c *client.Client, idents []string, g goal, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	w := &waiter{goal: g, out: cmd.OutOrStdout(), tty: isTerminal(cmd.OutOrStdout()), byID: map[string]*tracked{}, lines: map[*tracked]string{}}
	for _, id := range idents {
		n, err := c.GetNode(ctx, id)
		if err != nil {
			return fmt.Errorf("follow node %s: %w", id, err)
		}
		t := &tracked{ident: id}
		w.nodes = append(w.nodes, t)
		w.byID[n.UUID] = t
		w.update(events.FromNode(n))
	}
	errAllDone := errors.New("all done")
	if !w.allDone() {
		// The stream carries the changes the controller we talk to makes.
		// With several controllers on one database, another may own a node,
		// so the nodes are also read every few seconds; that also covers a
		// proxy that buffers the stream.
		streamCtx, stopStream := context.WithCancel(ctx)
		defer stopStream()
		go func() {
			t := time.NewTicker(safetyPoll)
			defer t.Stop()
			for {
				select {
				case <-streamCtx.Done():
					return
				case <-t.C:
				}
				if err := w.poll(streamCtx, c); err == nil && w.allDone() {
					stopStream()
					return
				}
			}
		}()
		err := c.Events(streamCtx, idents, func(m client.StreamMessage) error {
			switch m.Kind {
			case "node":
				w.update(m.Event)
			case "lost":
				// Events were dropped: read the nodes again.
				if err := w.poll(streamCtx, c); err != nil {
					return err
				}
			}
			if w.allDone() {
				return errAllDone
			}
			return nil
		})
		if w.allDone() {
			err = nil
		}
		if err != nil && !errors.Is(err, errAllDone) && ctx.Err() == nil {
			w.note(fmt.Sprintf("event stream unavailable (%v); polling", err))
			err = w.pollUntilDone(ctx, c)
		}
		if err != nil && !errors.Is(err, errAllDone) && ctx.Err() != nil {
			w.finish()
			return fmt.Errorf("gave up waiting after %s: %w", timeout, ctx.Err())
		}
		if err != nil && !errors.Is(err, errAllDone) {
			w.finish()
			return err
		}
	}
	return w.finish()
}

func (w *waiter) pollUntilDone(ctx context.Context, c *client.Client) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for !w.allDone() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := w.poll(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// poll reads every unfinished node once.
func (w *waiter) poll(ctx context.Context, c *client.Client) error {
	w.mu.Lock()
	var ids []string
	for uuid, t := range w.byID {
		if !t.done {
			ids = append(ids, uuid)
		}
	}
	w.mu.Unlock()
	for _, id := range ids {
		n, err := c.GetNode(ctx, id)
		if err != nil {
			return fmt.Errorf("follow node %s: %w", id, err)
		}
		w.update(events.FromNode(n))
	}
	return nil
}

func (w *waiter) allDone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.nodes {
		if !t.done {
			return false
		}
	}
	return true
}

// update takes one event of a followed node.
func (w *waiter) update(e events.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.byID[e.UUID]
	if !ok || t.done {
		return
	}
	if p := e.Progress; p != nil && p.Step == e.Step && p.UpdatedAt != nil {
		if !t.prevAt.IsZero() && p.UpdatedAt.After(t.prevAt) && p.BytesDone >= t.prevDone {
			t.rate = float64(p.BytesDone-t.prevDone) / p.UpdatedAt.Sub(t.prevAt).Seconds()
		}
		t.prevDone, t.prevAt = p.BytesDone, p.UpdatedAt.Time
	}
	if e.Deleted {
		t.done, t.err = true, fmt.Errorf("node was deleted")
	} else {
		t.done, t.err = w.goal(e)
	}
	t.last, t.seen = e, true
	w.draw(t)
}

// statusLine is one node's line: name, state → target, step, progress.
func statusLine(t *tracked) string {
	e := t.last
	var b strings.Builder
	b.WriteString(t.ident)
	b.WriteString(": ")
	b.WriteString(string(e.ProvisionState))
	if e.TargetProvisionState != nil {
		fmt.Fprintf(&b, " → %s", *e.TargetProvisionState)
	}
	if e.TargetPowerState != nil {
		fmt.Fprintf(&b, ", power → %s", *e.TargetPowerState)
	} else if e.PowerState != nil && t.done {
		fmt.Fprintf(&b, ", %s", *e.PowerState)
	}
	if e.Step != "" && !t.done {
		fmt.Fprintf(&b, ", step %s", e.Step)
		if p := e.Progress; p != nil && p.Step == e.Step {
			b.WriteString(" ")
			b.WriteString(progressText(p.BytesDone, p.BytesTotal, t.rate))
		}
	}
	switch {
	case t.done && t.err != nil:
		fmt.Fprintf(&b, " — FAILED: %v", errMessage(t.err, e))
	case t.done:
		b.WriteString(" — done")
	}
	return b.String()
}

func errMessage(err error, e events.Event) string {
	if e.LastError != nil && *e.LastError != "" {
		return *e.LastError
	}
	return err.Error()
}

// progressText renders bytes done/total with percentage, rate and ETA.
func progressText(done, total int64, rate float64) string {
	var b strings.Builder
	b.WriteString(humanBytes(done))
	if total > 0 {
		fmt.Fprintf(&b, " / %s (%d%%)", humanBytes(total), done*100/total)
	}
	if rate > 0 {
		fmt.Fprintf(&b, " %s/s", humanBytes(int64(rate)))
		if total > done {
			eta := time.Duration(float64(total-done)/rate) * time.Second
			fmt.Fprintf(&b, " ETA %s", eta.Round(time.Second))
		}
	}
	return b.String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// draw shows t: on a terminal every node's line is redrawn in place; on a
// pipe a line is printed when it changed.
func (w *waiter) draw(t *tracked) {
	if !w.tty {
		line := statusLine(t)
		if w.lines[t] != line {
			w.lines[t] = line
			fmt.Fprintln(w.out, line)
		}
		return
	}
	if w.drawn > 0 {
		fmt.Fprintf(w.out, "\x1b[%dA", w.drawn)
	}
	w.drawn = 0
	for _, n := range w.nodes {
		line := n.ident + ": …"
		if n.seen {
			line = statusLine(n)
		}
		fmt.Fprintf(w.out, "\r\x1b[2K%s\n", line)
		w.drawn++
	}
}

// note prints a message outside the node lines.
func (w *waiter) note(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintln(w.out, msg)
	w.drawn = 0
}

// finish reports failures as the command's error.
func (w *waiter) finish() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var failed []string
	for _, t := range w.nodes {
		if !t.done {
			failed = append(failed, t.ident+" (not finished)")
		} else if t.err != nil {
			failed = append(failed, t.ident)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return errFailed{fmt.Sprintf("%d of %d nodes failed: %s", len(failed), len(w.nodes), strings.Join(failed, ", "))}
}
