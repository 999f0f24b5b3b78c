package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
)

// underJournal tells whether stderr is the journal stream systemd gave
// this process: JOURNAL_STREAM names its device and inode.
func underJournal(stderr *os.File) bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(stderr.Fd()), &st); err != nil {
		return false
	}
	return fmt.Sprint(st.Dev) == dev && fmt.Sprint(st.Ino) == ino
}

// journalHandler writes each record as a line prefixed with its syslog
// priority (<3> error, <4> warning, <6> info, <7> debug), which journald
// reads off a stream, so `journalctl -p warning` filters staticlet's log.
type journalHandler struct {
	byLevel map[slog.Level]slog.Handler // one text handler per priority
	min     slog.Level
}

// journalPriorities maps slog levels to syslog priorities.
var journalPriorities = []struct {
	level    slog.Level
	priority int
}{{slog.LevelDebug, 7}, {slog.LevelInfo, 6}, {slog.LevelWarn, 4}, {slog.LevelError, 3}}

func newJournalHandler(w io.Writer, min slog.Level) *journalHandler {
	h := &journalHandler{byLevel: map[slog.Level]slog.Handler{}, min: min}
	for _, p := range journalPriorities {
		h.byLevel[p.level] = slog.NewTextHandler(&prefixWriter{w: w, prefix: fmt.Sprintf("<%d>", p.priority)},
			&slog.HandlerOptions{Level: min, ReplaceAttr: dropTime})
	}
	return h
}

// dropTime leaves the timestamp to journald.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }

// Handle writes r through the handler of the highest priority level at or
// below r's level.
func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	level := slog.LevelDebug
	for _, p := range journalPriorities {
		if r.Level >= p.level {
			level = p.level
		}
	}
	return h.byLevel[level].Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(x slog.Handler) slog.Handler { return x.WithAttrs(attrs) })
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return h.with(func(x slog.Handler) slog.Handler { return x.WithGroup(name) })
}

func (h *journalHandler) with(f func(slog.Handler) slog.Handler) *journalHandler {
	out := &journalHandler{byLevel: make(map[slog.Level]slog.Handler, len(h.byLevel)), min: h.min}
	for l, x := range h.byLevel {
		out.byLevel[l] = f(x)
	}
	return out
}

// prefixWriter writes each record (one Write call from a text handler)
// with prefix in front.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
