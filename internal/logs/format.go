package logs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// The streams of a container, as the CRI format names them.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// MaxLineSize is the longest content one record carries, containerd's
// default max_container_log_line_size: a longer line is split into partial
// records.
const MaxLineSize = 16 * 1024

// Tags of a record: a full record ends a line, a partial one continues in
// the next record of its stream.
const (
	tagFull    = "F"
	tagPartial = "P"
)

// timeFormat is the time of a record in the file (containerd's CRI writes
// RFC3339Nano too); outTimeFormat is the fixed-width form the kubelet prints
// with --timestamps.
const (
	timeFormat    = time.RFC3339Nano
	outTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"
)

// Record is one line of a CRI log file.
type Record struct {
	Time    time.Time
	Stream  string // Stdout or Stderr
	Partial bool   // the line continues in the next record
	Content []byte // without the newline
}

// AppendRecord appends the CRI encoding of one record, newline included, to
// dst.
func AppendRecord(dst []byte, t time.Time, stream string, partial bool, content []byte) []byte {
	dst = t.UTC().AppendFormat(dst, timeFormat)
	dst = append(dst, ' ')
	dst = append(dst, stream...)
	if partial {
		dst = append(dst, " "+tagPartial+" "...)
	} else {
		dst = append(dst, " "+tagFull+" "...)
	}
	dst = append(dst, content...)
	return append(dst, '\n')
}

var errBadRecord = errors.New("not a CRI log record")

// ParseRecord decodes one line of a CRI log file, without its newline.
// Content aliases line.
func ParseRecord(line []byte) (Record, error) {
	var r Record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, fmt.Errorf("%w: %q", errBadRecord, clip(line))
	}
	t, err := time.Parse(timeFormat, string(ts))
	if err != nil {
		return r, fmt.Errorf("%w: bad time %q", errBadRecord, clip(ts))
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != Stdout && string(stream) != Stderr) {
		return r, fmt.Errorf("%w: bad stream in %q", errBadRecord, clip(line))
	}
	// The tag may carry several flags separated by ':'; the first says
	// partial or full. The content may be empty, and then its separator
	// may be missing.
	tag, content, _ := bytes.Cut(rest, []byte{' '})
	flag, _, _ := bytes.Cut(tag, []byte{':'})
	switch string(flag) {
	case tagFull:
	case tagPartial:
		r.Partial = true
	default:
		return r, fmt.Errorf("%w: bad tag in %q", errBadRecord, clip(line))
	}
	r.Time, r.Stream, r.Content = t, string(stream), content
	return r, nil
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
