package logs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Path is the live log file, created if missing and appended to.
	Path string
	// MaxSize is the size in bytes past which the live file is rotated
	// (at a record boundary); 0 never rotates.
	MaxSize int64
	// MaxFiles is how many files are kept, the live one included; the
	// oldest rotated files beyond it are removed. At least 2 when MaxSize
	// is set.
	MaxFiles int
	// Now is the clock for record times and rotated names; time.Now if nil.
	Now func() time.Time
	// Dropped, if set, hears of each gap in the file: once when output
	// is first dropped (Until zero), and once writes have gone on
	// succeeding for 10 s since it resumed (or the Writer is closed),
	// with the gap's totals. It is called with the Writer's lock held: it
	// must not call the Writer.
	Dropped func(Gap)
}

// Gap is output a Writer dropped in a row because its file could not be
// opened or written, such as while the disk is full.
type Gap struct {
	// Lines and Bytes count the records dropped, in the CRI format.
	Lines, Bytes int64
	// Err is the last error that dropped them.
	Err error
	// Since is when the first was dropped; Until, when writing resumed
	// (zero while it has not).
	Since, Until time.Time
}

// Writer writes the output of a container's stdout and stderr as CRI
// records into a rotated log file. Each stream is fed by its own Copy, or
// chunk by chunk with Feed and EndStream; the records of one chunk are
// written with one write(2), so lines of the two streams interleave only
// at record boundaries.
//
// A Writer never blocks or fails its streams because of the file: when the
// file cannot be opened or written (disk full, directory removed), the
// records are dropped, whole (a record written in part is cut off again),
// and the file is opened again at most once a second; WriterConfig.Dropped
// hears when that starts and when writing resumes.
//
// An idle Writer holds no buffer but a stream's unfinished line: a log
// daemon keeps one for every container of the node.
type Writer struct {
	now func() time.Time

	// mu guards the fields below.
	mu     sync.Mutex
	file   *rotator
	lines  [2]splitter // Stdout's and Stderr's
	closed bool
}

// streams are the streams of a Writer, in the order of its lines.
var streams = [2]string{Stdout, Stderr}

// streamIndex is the index of stream in streams.
func streamIndex(stream string) (int, error) {
	for i, s := range streams {
		if s == stream {
			return i, nil
		}
	}
	return 0, fmt.Errorf("log writer: unknown stream %q", stream)
}

// NewWriter returns a Writer for cfg and opens its file. An error opening
// the file is returned together with a usable Writer, which drops output
// until it can open the file; an invalid cfg returns a nil Writer.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Path == "" {
		return nil, errors.New("log writer: no path")
	}
	if cfg.MaxSize < 0 || (cfg.MaxSize > 0 && cfg.MaxFiles < 2) {
		return nil, fmt.Errorf("log writer: max size %d with max files %d: want a size >= 0, and at least 2 files when rotating", cfg.MaxSize, cfg.MaxFiles)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Writer{now: cfg.Now, file: &rotator{cfg: cfg}}
	return w, w.file.open(cfg.Now())
}

// Copy reads stream (Stdout or Stderr) from r until EOF or a read error and
// writes it as records. At the end, an unterminated last line is written as
// a full record. It returns nil at EOF.
func (w *Writer) Copy(stream string, r io.Reader) error {
	if _, err := streamIndex(stream); err != nil {
		return err
	}
	buf := make([]byte, 64*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_ = w.Feed(stream, buf[:n])
		}
		if err != nil {
			_ = w.EndStream(stream)
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading %s: %w", stream, err)
		}
	}
}

// Feed writes chunk, the next bytes read from stream (Stdout or Stderr),
// as records, all with the time of now: its complete lines, and parts of
// MaxLineSize bytes of a line that grows longer. The rest of a line waits
// for the stream's next chunk or its end. Chunks fed once the Writer is
// closed are dropped.
func (w *Writer) Feed(stream string, chunk []byte) error {
	i, err := streamIndex(stream)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	now := w.now()
	w.lines[i].feed(chunk, func(content []byte, partial bool) {
		w.file.record(now, stream, partial, content)
	})
	w.file.flush(now)
	return nil
}

// EndStream writes what is left of stream's last line, unterminated, as a
// full record: the stream ended, or is read no more.
func (w *Writer) EndStream(stream string) error {
	i, err := streamIndex(stream)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.flushStream(i, w.now())
	return nil
}

func (w *Writer) flushStream(i int, now time.Time) {
	w.lines[i].end(func(content []byte, partial bool) {
		w.file.record(now, streams[i], partial, content)
	})
	w.file.flush(now)
}

// Close writes the unterminated last lines of both streams and closes the
// file. Output that Copy reads afterwards is dropped.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	now := w.now()
	w.flushStream(0, now)
	w.flushStream(1, now)
	w.closed = true
	return w.file.close()
}

// Dropped returns how many bytes of records could not be written.
func (w *Writer) Dropped() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.file.dropped
}

// splitter cuts one stream into lines of at most MaxLineSize bytes.
type splitter struct {
	line []byte // the current line's bytes not yet emitted
}

// feed emits the complete lines of chunk, and parts of MaxLineSize bytes of
// a line that grows longer. A part is emitted only once more of the line is
// known, so a line of exactly MaxLineSize bytes is one full record.
func (s *splitter) feed(chunk []byte, emit func(content []byte, partial bool)) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			s.line = append(s.line, chunk...)
			s.emitParts(emit)
			return
		}
		if len(s.line) == 0 && i <= MaxLineSize {
			emit(chunk[:i], false) // the common case: no copy
		} else {
			s.line = append(s.line, chunk[:i]...)
			s.emitParts(emit)
			emit(s.line, false)
			s.reset()
		}
		chunk = chunk[i+1:]
	}
}

// emitParts emits partial records while the pending line is longer than
// one record.
func (s *splitter) emitParts(emit func([]byte, bool)) {
	if len(s.line) <= MaxLineSize {
		return
	}
	rest := s.line
	for len(rest) > MaxLineSize {
		emit(rest[:MaxLineSize], true)
		rest = rest[MaxLineSize:]
	}
	s.line = append(s.line[:0], rest...)
}

// end emits the unterminated last line, if any, as a full record.
func (s *splitter) end(emit func([]byte, bool)) {
	if len(s.line) > 0 {
		emit(s.line, false)
		s.reset()
	}
}

// keptLine is the capacity of a splitter's buffer past which it lets it go
// once its line is emitted, rather than keep the largest line it saw.
const keptLine = 1024

// reset empties the pending line.
func (s *splitter) reset() {
	if cap(s.line) > keptLine {
		s.line = nil
		return
	}
	s.line = s.line[:0]
}
