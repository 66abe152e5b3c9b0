package secrets

import (
	"context"
	"fmt"
	"log/slog"
)

// LogHandler wraps a slog.Handler so that every record's message and every
// attribute that renders as text (strings, errors, Stringers, any other
// value) is scrubbed (see Scrub) before it is written: a log line can never
// carry an agent token or URL credentials, whichever package logged it.
type LogHandler struct{ next slog.Handler }

// NewLogHandler returns h wrapped.
func NewLogHandler(h slog.Handler) *LogHandler { return &LogHandler{next: h} }

// Enabled implements slog.Handler.
func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(scrubAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbed[i] = scrubAttr(a)
	}
	return &LogHandler{next: h.next.WithAttrs(scrubbed)}
}

// WithGroup implements slog.Handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name)}
}

func scrubAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, e := range g {
			out[i] = scrubAttr(e)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, Scrub(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, Scrub(x.String()))
		case map[string]any, []any:
			return slog.Any(a.Key, Mask(x))
		default:
			// Kept as is (the handler's own rendering, e.g. a JSON array)
			// unless its text needs scrubbing.
			if s := fmt.Sprint(x); Scrub(s) != s {
				return slog.String(a.Key, Scrub(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
