package logs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rotatedTimeFormat is the suffix of a rotated file, the kubelet's:
// 0.log.20261121-031500.
const rotatedTimeFormat = "20060102-150405"

// reopenDelay is how long a file that failed is left alone before the next
// attempt to open it; output in between is dropped.
const reopenDelay = time.Second

// logFileMode is the mode of a new log file, the kubelet's and containerd's.
const logFileMode = 0o640

// rotator is the live log file with its rotation: records are added to a
// buffer, flushed with one write, and the file is rotated before a record
// that would take it past MaxSize. Not safe for concurrent use: the Writer
// serializes it.
type rotator struct {
	cfg     WriterConfig
	f       *os.File // nil while the file cannot be opened
	size    int64    // bytes in the live file
	buf     *[]byte  // records not yet written; from recordBuffers, nil between flushes
	retry   time.Time
	dropped int64     // bytes of records dropped, ever
	gap     Gap       // the records dropped in the gap under way, if any
	resumed time.Time // when writes succeeded again in the gap under way, with none failing since
}

// gapSettle is how long writes must go on succeeding before a gap counts
// as over: on a disk that is still nearly full, space freed here and
// there lets a write through now and then, and each of those must not
// end one gap and start the next (two lines in the daemon's log a second).
const gapSettle = 10 * time.Second

// recordBuffers hold the records of a chunk between their encoding and
// their write, for every Writer of the process: one that is idle holds
// none, and a process writing many containers' logs keeps a few buffers
// rather than one per container, each as large as its largest chunk.
var recordBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxKeptBuffer is the capacity past which a record buffer is let go
// rather than kept for the next chunk, after a burst.
const maxKeptBuffer = 1 << 20

// open opens the live file for appending.
func (r *rotator) open(now time.Time) error {
	f, err := os.OpenFile(r.cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, logFileMode)
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			r.f, r.size = f, fi.Size()
			return nil
		}
		f.Close()
	}
	r.retry = now.Add(reopenDelay)
	r.gap.Err = err
	return err
}

// record adds one record, rotating first if it would not fit. It is
// encoded at the end of the buffer; when it does not fit, the records
// before it are written, the file rotated, and it moves to the front.
func (r *rotator) record(now time.Time, stream string, partial bool, content []byte) {
	if r.buf == nil {
		r.buf = recordBuffers.Get().(*[]byte)
	}
	start := len(*r.buf)
	*r.buf = AppendRecord(*r.buf, now, stream, partial, content)
	n := int64(len(*r.buf) - start)
	if r.cfg.MaxSize > 0 && r.f != nil {
		if used := r.size + int64(start); used > 0 && used+n > r.cfg.MaxSize {
			r.write(now, (*r.buf)[:start])
			r.rotate(now)
			*r.buf = (*r.buf)[:copy(*r.buf, (*r.buf)[start:])]
		}
	}
}

// flush writes the buffered records, or drops them when the file is not
// usable, and gives the buffer back.
func (r *rotator) flush(now time.Time) {
	if r.buf == nil {
		return
	}
	r.write(now, *r.buf)
	if cap(*r.buf) <= maxKeptBuffer {
		*r.buf = (*r.buf)[:0]
		recordBuffers.Put(r.buf)
	}
	r.buf = nil
}

// write writes records b to the file, or counts them as dropped when the
// file is not usable.
func (r *rotator) write(now time.Time, b []byte) {
	if len(b) == 0 {
		return
	}
	if r.f == nil && !now.Before(r.retry) {
		_ = r.open(now) // the records are counted as dropped below
	}
	if r.f == nil {
		r.drop(now, b, r.gap.Err)
		return
	}
	n, err := r.f.Write(b)
	if err != nil {
		// A short write (a full disk) keeps the whole records that fit
		// and leaves part of the next: cut that off, so that the file
		// holds whole records and the next one starts on a line of its
		// own. If even that fails, the next open appends after it; a
		// reader skips the broken line.
		kept := bytes.LastIndexByte(b[:max(n, 0)], '\n') + 1
		if kept < n {
			_ = r.f.Truncate(r.size + int64(kept))
		}
		r.size += int64(kept)
		r.drop(now, b[kept:], err)
		// Start afresh with a new descriptor later: the file may have
		// been removed or its filesystem remounted.
		r.f.Close()
		r.f = nil
		r.retry = now.Add(reopenDelay)
		return
	}
	r.size += int64(n)
	if r.gap.Since.IsZero() {
		return
	}
	if r.resumed.IsZero() {
		r.resumed = now
	} else if now.Sub(r.resumed) >= gapSettle {
		r.endGap()
	}
}

// endGap tells that the gap under way ended when writes resumed.
func (r *rotator) endGap() {
	gap := r.gap
	gap.Until = r.resumed
	r.gap, r.resumed = Gap{}, time.Time{}
	if r.cfg.Dropped != nil {
		r.cfg.Dropped(gap)
	}
}

// drop counts records b as dropped for err, and tells of the first drop
// of a gap.
func (r *rotator) drop(now time.Time, b []byte, err error) {
	r.dropped += int64(len(b))
	first := r.gap.Since.IsZero()
	r.resumed = time.Time{}
	r.gap.Lines += int64(bytes.Count(b, []byte{'\n'}))
	r.gap.Bytes += int64(len(b))
	if err != nil {
		r.gap.Err = err
	}
	if first {
		r.gap.Since = now
		if r.cfg.Dropped != nil {
			r.cfg.Dropped(r.gap)
		}
	}
}

// rotate renames the live file with a time suffix, opens a new one and
// removes the oldest rotated files beyond MaxFiles. When the rename fails
// the live file is kept and grows: output is never dropped for rotation.
func (r *rotator) rotate(now time.Time) {
	_ = r.f.Close()
	r.f = nil
	if err := os.Rename(r.cfg.Path, rotatedName(r.cfg.Path, now)); err != nil {
		_ = r.open(now)
		return
	}
	_ = r.open(now)
	_ = prune(r.cfg.Path, r.cfg.MaxFiles-1)
}

// close flushes what is buffered and closes the file, telling of the end
// of a gap that writes resumed after.
func (r *rotator) close() error {
	r.flush(r.cfg.Now())
	if !r.resumed.IsZero() {
		r.endGap()
	}
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// rotatedName is a name not yet used for the live file path rotated at now:
// path.<time>, and path.<time>.<n> when several rotations fall in the same
// second.
func rotatedName(path string, now time.Time) string {
	base := path + "." + now.UTC().Format(rotatedTimeFormat)
	name := base
	for n := 1; ; n++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name
		}
		name = base + "." + strconv.Itoa(n)
	}
}

// prune removes the oldest rotated files of path beyond keep.
func prune(path string, keep int) error {
	files, err := RotatedFiles(path)
	if err != nil {
		return err
	}
	var errs []error
	for len(files) > keep {
		if err := os.Remove(files[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		files = files[1:]
	}
	return errors.Join(errs...)
}

// RotatedFiles returns the rotated files of the live log file path, oldest
// first: path.<YYYYMMDD-hhmmss>[.<n>]. Other files (compressed ones, say)
// are left out.
func RotatedFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	ents, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil, err
	}
	type rotated struct {
		name string
		when string // the time suffix, sortable as text
		n    int
	}
	var found []rotated
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		when, seq, hasSeq := strings.Cut(suffix, ".")
		if _, err := time.Parse(rotatedTimeFormat, when); err != nil {
			continue
		}
		n := 0
		if hasSeq {
			if n, err = strconv.Atoi(seq); err != nil || n < 1 {
				continue
			}
		}
		found = append(found, rotated{name: e.Name(), when: when, n: n})
	}
	slices.SortFunc(found, func(a, b rotated) int {
		if c := strings.Compare(a.when, b.when); c != 0 {
			return c
		}
		return a.n - b.n
	})
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = filepath.Join(dir, f.name)
	}
	return out, nil
}
