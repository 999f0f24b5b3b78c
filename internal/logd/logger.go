package logd

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Logger receives what the daemon and Keep have to say; *slog.Logger is
// one. Package logd does not import log/slog: the daemon's program would
// link it, and encoding/json and reflection with it, for a few warnings
// (170 KiB of code, most of it mapped in the long-lived daemon).
type Logger interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// textLogger writes records in log/slog's text format, one write(2) per
// record: `time=… level=WARN msg="…" key=value …`.
type textLogger struct {
	w   io.Writer
	now func() time.Time
}

func (l textLogger) Info(msg string, args ...any)  { l.log("INFO", msg, args) }
func (l textLogger) Warn(msg string, args ...any)  { l.log("WARN", msg, args) }
func (l textLogger) Error(msg string, args ...any) { l.log("ERROR", msg, args) }

func (l textLogger) log(level, msg string, args []any) {
	b := []byte("time=")
	b = l.now().AppendFormat(b, time.RFC3339Nano)
	b = append(b, " level="+level+" msg="...)
	b = appendValue(b, msg)
	for i := 0; i < len(args); {
		key, ok := args[i].(string)
		var v any
		if ok && i+1 < len(args) {
			v, i = args[i+1], i+2
		} else { // as slog does with a value without its key
			key, v, i = "!BADKEY", args[i], i+1
		}
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, '=')
		b = appendValue(b, fmt.Sprint(v))
	}
	b = append(b, '\n')
	_, _ = l.w.Write(b)
}

// appendValue appends s, quoted when slog's text handler would quote it:
// empty, or holding a space, '=', '"' or a character not printed as such.
func appendValue(b []byte, s string) []byte {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return r == ' ' || r == '=' || r == '"' || !unicode.IsPrint(r)
	}) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// discard is a Logger that drops everything.
type discard struct{}

func (discard) Info(string, ...any)  {}
func (discard) Warn(string, ...any)  {}
func (discard) Error(string, ...any) {}
