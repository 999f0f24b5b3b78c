package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

const (
	// pollInterval is how often a follower looks for growth, rotation and
	// the end of the container.
	pollInterval = 100 * time.Millisecond
	// endGrace is how long a follower keeps reading after the container
	// ended, for output still on its way through the driver.
	endGrace = 300 * time.Millisecond
	// maxJoin bounds the bytes of one line held while its partial records
	// are joined; a longer line is written out in pieces.
	maxJoin = 1 << 20
)

// Query says which log Open streams and how.
type Query struct {
	// Path is the live log file of the container's instance (FindLog).
	Path string
	// Follow keeps the stream open: new lines are sent as they are written,
	// across rotations, until the context ends, Running reports false, or a
	// later instance's file appears next to Path.
	Follow bool
	// TailLines is how many lines to send from the end; negative sends all.
	TailLines int64
	// Timestamps prefixes each line with the time it was logged.
	Timestamps bool
	// Since, when not zero, leaves out the lines logged before it. As in
	// the kubelet, TailLines picks the last lines first and Since filters
	// those.
	Since time.Time
	// LimitBytes, when positive, ends the stream once it has sent that
	// many bytes (time prefixes included), cutting the last line if need
	// be, following or not.
	LimitBytes int64
	// Running, while following, tells whether the container may still
	// write; nil means as long as its file is not replaced.
	Running func() bool
}

// Open streams the lines of the log file q names, as `kubectl logs` shows
// them: the content of each line with the CRI prefix removed and partial
// records joined. Like the kubelet, it reads the live file only, not the
// rotated ones. The file is opened before Open returns, so a missing log is
// an error matching fs.ErrNotExist. The stream ends with EOF; Close (or the
// end of ctx) stops it.
func Open(ctx context.Context, q Query) (io.ReadCloser, error) {
	f, err := os.Open(q.Path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	s := &logStream{r: pr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		c := newCopier(q, f, pw)
		err := c.run(ctx)
		c.close()
		if errors.Is(err, errLimitReached) {
			err = nil
		}
		pw.CloseWithError(err)
	}()
	return s, nil
}

// logStream is the reading end of a log stream and the owner of the
// goroutine that writes it.
type logStream struct {
	r      *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *logStream) Read(p []byte) (int, error) { return s.r.Read(p) }

// Close stops the stream and waits for its goroutine.
func (s *logStream) Close() error {
	s.cancel()
	s.r.Close()
	<-s.done
	return nil
}

// copier reads CRI records from a log file and writes lines.
type copier struct {
	q    Query
	f    *os.File
	out  *bufio.Writer
	buf  []byte // read buffer
	rest []byte // an incomplete record at the end of what was read
	// skip is how many complete lines are still to be left out (--tail).
	skip int64
	// join holds, per stream, the beginning of a line whose records are
	// partial so far, and the time of its first record.
	join     map[string][]byte
	joinTime map[string]time.Time
	// midLine is set for a stream while a line too long to join is being
	// written in pieces; dropping while such a line is left out (Since).
	midLine  map[string]bool
	dropping map[string]bool
	// remain is how many bytes may still be sent when q.LimitBytes is
	// positive.
	remain int64
}

// errLimitReached ends a stream that has sent Query.LimitBytes.
var errLimitReached = errors.New("log byte limit reached")

func newCopier(q Query, f *os.File, w io.Writer) *copier {
	return &copier{
		q: q, f: f, out: bufio.NewWriterSize(w, 32*1024), buf: make([]byte, 64*1024),
		join: map[string][]byte{}, joinTime: map[string]time.Time{}, midLine: map[string]bool{},
		dropping: map[string]bool{}, remain: q.LimitBytes,
	}
}

func (c *copier) close() { c.f.Close() }

// run copies the file, then follows it if asked.
func (c *copier) run(ctx context.Context) error {
	if c.q.TailLines >= 0 {
		n, err := countLines(c.f)
		if err != nil {
			return err
		}
		c.skip = max(n-c.q.TailLines, 0)
	}
	if err := c.drain(); err != nil {
		return err
	}
	if !c.q.Follow {
		return c.out.Flush()
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if err := c.out.Flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if err := c.step(); err != nil {
			return err
		}
		if c.ended() {
			// Output the container wrote just before it ended may still be
			// in the driver's hands: look once more after a moment.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(endGrace):
			}
			if err := c.step(); err != nil {
				return err
			}
			return c.out.Flush()
		}
	}
}

// step reads what was added to the file, and moves to the new live file
// when the current one was rotated.
func (c *copier) step() error {
	if err := c.drain(); err != nil {
		return err
	}
	fi, err := os.Stat(c.q.Path)
	if err != nil {
		return nil // between a rotation's rename and create, or removed
	}
	cur, err := c.f.Stat()
	if err != nil || os.SameFile(fi, cur) {
		return err
	}
	// Rotated: the writer renamed the file before creating the new one, so
	// the old one is complete now.
	if err := c.drain(); err != nil {
		return err
	}
	nf, err := os.Open(c.q.Path)
	if err != nil {
		return nil // replaced again; the next step catches up
	}
	c.f.Close()
	c.f, c.rest = nf, c.rest[:0]
	return c.drain()
}

// ended tells whether the container will write no more to this file.
func (c *copier) ended() bool {
	return (c.q.Running != nil && !c.q.Running()) || newerInstance(c.q.Path)
}

// drain reads the file to its current end and writes the complete records.
func (c *copier) drain() error {
	for {
		n, err := c.f.Read(c.buf)
		if n > 0 {
			if werr := c.records(c.buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", c.q.Path, err)
		}
	}
}

// records writes the complete records of chunk, keeping an incomplete last
// one for the next read.
func (c *copier) records(chunk []byte) error {
	data := chunk
	if len(c.rest) > 0 {
		c.rest = append(c.rest, chunk...)
		data = c.rest
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if err := c.line(data[:i]); err != nil {
			return err
		}
		data = data[i+1:]
	}
	if len(data) > maxJoin {
		data = nil // no record is this long: not a CRI log
	}
	c.rest = append(c.rest[:0], data...) // data may alias rest: append copies like copy
	return nil
}

// line writes one record: the content of a line once its last record
// came.
func (c *copier) line(raw []byte) error {
	r, err := ParseRecord(raw)
	if err != nil {
		return nil // not ours (a torn write, a foreign line): skip it
	}
	if r.Partial {
		if len(c.join[r.Stream]) == 0 {
			c.joinTime[r.Stream] = r.Time
		}
		c.join[r.Stream] = append(c.join[r.Stream], r.Content...)
		if len(c.join[r.Stream]) < maxJoin {
			return nil
		}
		// Too long to hold: write this much of the line now.
		return c.emit(r.Stream, nil, false)
	}
	if len(c.join[r.Stream]) == 0 {
		c.joinTime[r.Stream] = r.Time
	}
	return c.emit(r.Stream, r.Content, true)
}

// emit writes the joined beginning of a stream's line followed by content,
// ending the line when full.
func (c *copier) emit(stream string, content []byte, full bool) error {
	head := c.join[stream]
	c.join[stream] = head[:0]
	if c.skip > 0 {
		if full {
			c.skip--
		}
		return nil
	}
	first := !c.midLine[stream]
	c.midLine[stream] = !full
	if first {
		c.dropping[stream] = c.joinTime[stream].Before(c.q.Since)
	}
	if c.dropping[stream] {
		return nil
	}
	if c.q.Timestamps && first {
		if err := c.write(c.joinTime[stream].AppendFormat(nil, outTimeFormat), []byte{' '}); err != nil {
			return err
		}
	}
	if err := c.write(head, content); err != nil {
		return err
	}
	if full {
		return c.write([]byte{'\n'})
	}
	return nil
}

// write writes parts, cutting them at the byte limit, which it reports
// with errLimitReached once reached.
func (c *copier) write(parts ...[]byte) error {
	for _, b := range parts {
		if c.q.LimitBytes > 0 {
			if int64(len(b)) >= c.remain {
				c.out.Write(b[:c.remain])
				c.remain = 0
				if err := c.out.Flush(); err != nil {
					return err
				}
				return errLimitReached
			}
			c.remain -= int64(len(b))
		}
		c.out.Write(b)
	}
	return nil
}

// countLines counts the lines (full records) in f from its current offset
// to its end, and goes back to that offset. An incomplete last record is
// not counted, as it is not shown until complete.
func countLines(f *os.File) (int64, error) {
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	var n int64
	br := bufio.NewReaderSize(f, 64*1024)
	long := false // inside a line longer than the buffer: not a record
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = true
			continue
		}
		if err == nil {
			if r, perr := ParseRecord(line[:len(line)-1]); !long && perr == nil && !r.Partial {
				n++
			}
			long = false
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		return 0, fmt.Errorf("counting lines of %s: %w", f.Name(), err)
	}
	_, err = f.Seek(start, io.SeekStart)
	return n, err
}
