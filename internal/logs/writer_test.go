package logs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// clock is a fake time that moves step ahead at each reading.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rec is a record in a comparable form.
type rec struct {
	stream  string
	partial bool
	content string
}

func (r rec) String() string { return fmt.Sprintf("%s %v %q", r.stream, r.partial, r.content) }

// readRecords parses every record of the files, in order.
func readRecords(t *testing.T, files ...string) []rec {
	t.Helper()
	var out []rec
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Fatalf("%s does not end with a newline: %q", f, b)
		}
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			r, err := ParseRecord(line[:len(line)-1])
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, rec{r.Stream, r.Partial, string(r.Content)})
		}
	}
	return out
}

func newTestWriter(t *testing.T, cfg WriterConfig) *Writer {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "0.log")
	}
	if cfg.Now == nil {
		cfg.Now = (&clock{now: t0, step: time.Millisecond}).Now
	}
	w, err := NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// chunked reads from s n bytes at a time, as a pipe may deliver them.
type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := min(c.n, len(c.s), len(p))
	copy(p, c.s[:k])
	c.s = c.s[k:]
	return k, nil
}

func TestWriterSplitsLines(t *testing.T) {
	const m = MaxLineSize
	x := func(n int) string { return strings.Repeat("x", n) }
	full := func(s string) rec { return rec{Stdout, false, s} }
	part := func(s string) rec { return rec{Stdout, true, s} }
	tests := []struct {
		name  string
		input string
		want  []rec
	}{
		{"lines", "a\nb\n", []rec{full("a"), full("b")}},
		{"empty lines", "\n\na\n", []rec{full(""), full(""), full("a")}},
		{"unterminated last line is full at EOF", "a\nbc", []rec{full("a"), full("bc")}},
		{"nothing", "", nil},
		{"one byte short", x(m-1) + "\n", []rec{full(x(m - 1))}},
		{"exactly the limit", x(m) + "\n", []rec{full(x(m))}},
		{"one byte over", x(m+1) + "\n", []rec{part(x(m)), full("x")}},
		{"twice the limit", x(2*m) + "\n", []rec{part(x(m)), full(x(m))}},
		{"three parts", x(2*m+5) + "\nnext\n", []rec{part(x(m)), part(x(m)), full(x(5)), full("next")}},
		{"long unterminated line", x(m + 3), []rec{part(x(m)), full("xxx")}},
		{"carriage return kept", "dos\r\n", []rec{full("dos\r")}},
	}
	for _, tt := range tests {
		for _, size := range []int{1 << 20, 1000, 7} {
			t.Run(fmt.Sprintf("%s/reads of %d", tt.name, size), func(t *testing.T) {
				w := newTestWriter(t, WriterConfig{})
				if err := w.Copy(Stdout, &chunked{tt.input, size}); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				got := readRecords(t, w.file.cfg.Path)
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("records = %v\nwant %v", clipRecs(got), clipRecs(tt.want))
				}
			})
		}
	}
}

func clipRecs(rs []rec) string {
	var b strings.Builder
	for _, r := range rs {
		c := r.content
		if len(c) > 20 {
			c = fmt.Sprintf("%s...(%d bytes)", c[:10], len(c))
		}
		fmt.Fprintf(&b, "[%s %v %q] ", r.stream, r.partial, c)
	}
	return b.String()
}

func TestWriterFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, WriterConfig{Path: path, Now: (&clock{now: t0, step: time.Second}).Now})
	if err := w.Copy(Stderr, strings.NewReader("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, _ := os.ReadFile(path)
	want := "2026-11-21T03:15:01.123456789Z stderr F one\n2026-11-21T03:15:01.123456789Z stderr F two\n"
	if string(b) != want {
		t.Errorf("file = %q, want %q (one time per read)", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v, want 0640", fi.Mode().Perm())
	}
}

// TestWriterInterleaves feeds both streams through pipes, one line at a
// time, and checks each lands in order with its stream, and that a
// partial line of one stream does not hold up the other.
func TestWriterInterleaves(t *testing.T) {
	w := newTestWriter(t, WriterConfig{})
	path := w.file.cfg.Path
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	var wg sync.WaitGroup
	for _, s := range []struct {
		name string
		r    io.Reader
	}{{Stdout, outR}, {Stderr, errR}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Copy(s.name, s.r); err != nil {
				t.Error(err)
			}
		}()
	}
	// After each write, the records the file must then hold (a partial
	// line adds none).
	steps := []struct {
		w     *io.PipeWriter
		data  string
		total int
	}{
		{outW, "out-1\n", 1}, {errW, "err-1\n", 2}, {outW, "out-2 begins", 2}, {errW, "err-2\n", 3},
		{outW, " and ends\n", 4}, {errW, "err-3\n", 5}, {outW, "out-3\n", 6},
	}
	want := []rec{{Stdout, false, "out-1"}, {Stderr, false, "err-1"}, {Stderr, false, "err-2"},
		{Stdout, false, "out-2 begins and ends"}, {Stderr, false, "err-3"}, {Stdout, false, "out-3"}}
	for _, s := range steps {
		if _, err := s.w.Write([]byte(s.data)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, fmt.Sprintf("%d records after writing %q", s.total, s.data), func() (bool, string) {
			b, _ := os.ReadFile(path)
			return bytes.Count(b, []byte("\n")) == s.total, string(b)
		})
	}
	outW.Close()
	errW.Close()
	wg.Wait()
	w.Close()
	if got := readRecords(t, path); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records = %v\nwant %v", got, want)
	}
}

// TestWriterRotates writes numbered lines through a small MaxSize and
// checks the live file, the rotated files' names, sizes and count, and
// that the files kept hold the last lines, in order, none lost between
// them.
func TestWriterRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	clk := &clock{now: t0, step: 0}
	w := newTestWriter(t, WriterConfig{Path: path, MaxSize: 300, MaxFiles: 3, Now: clk.Now})
	// Records are 49 bytes: "2026-11-21T03:15:00.123456789Z stdout F line-NN\n".
	for i := range 40 {
		clk.add(time.Second)
		if err := w.Copy(Stdout, strings.NewReader(fmt.Sprintf("line-%02d\n", i))); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	rotated, err := RotatedFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rotated) != 2 {
		t.Fatalf("rotated files %q, want 2 (3 files with the live one)", rotated)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("directory holds %d files, want 3", len(ents))
	}
	for _, f := range append(rotated, path) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 300 {
			t.Errorf("%s has %d bytes, want at most 300", f, fi.Size())
		}
	}
	for _, f := range rotated {
		name := filepath.Base(f)
		if !strings.HasPrefix(name, "0.log.20261121-0315") || len(name) != len("0.log.20261121-031500") {
			t.Errorf("rotated file %q, want 0.log.<YYYYMMDD-hhmmss>", name)
		}
	}
	recs := readRecords(t, append(rotated, path)...)
	if len(recs) == 0 || len(recs)%6 != 4 {
		// 6 records fill a file; the first two were removed with their lines.
		t.Errorf("%d records kept, want the last 4 + 6k", len(recs))
	}
	first := 40 - len(recs)
	for i, r := range recs {
		if want := fmt.Sprintf("line-%02d", first+i); r.content != want {
			t.Fatalf("record %d is %q, want %q: lines missing or out of order", i, r.content, want)
		}
	}
}

// TestWriterRotatesWithinASecond checks that rotations in the same second
// get distinct names that sort in order.
func TestWriterRotatesWithinASecond(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "3.log")
	w := newTestWriter(t, WriterConfig{Path: path, MaxSize: 100, MaxFiles: 20, Now: (&clock{now: t0}).Now})
	for i := range 12 {
		if err := w.Copy(Stdout, strings.NewReader(fmt.Sprintf("%02d\n", i))); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	rotated, err := RotatedFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range rotated {
		names = append(names, filepath.Base(f))
	}
	want := []string{"3.log.20261121-031500", "3.log.20261121-031500.1", "3.log.20261121-031500.2", "3.log.20261121-031500.3", "3.log.20261121-031500.4"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("rotated files %q, want %q", names, want)
	}
	recs := readRecords(t, append(rotated, path)...)
	for i, r := range recs {
		if want := fmt.Sprintf("%02d", i); r.content != want {
			t.Fatalf("record %d is %q, want %q", i, r.content, want)
		}
	}
}

func TestRotatedFilesOrder(t *testing.T) {
	dir := t.TempDir()
	names := []string{"0.log", "0.log.20261121-031501", "0.log.20261121-031500.10", "0.log.20261121-031500",
		"0.log.20261121-031500.2", "0.log.20261121-031500.gz", "0.log.tmp", "1.log.20261121-031459", "0.log.2026"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := RotatedFiles(filepath.Join(dir, "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{"0.log.20261121-031500", "0.log.20261121-031500.2", "0.log.20261121-031500.10", "0.log.20261121-031501"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("RotatedFiles() = %q, want %q", got, want)
	}
}

// TestWriterDropsWithoutFile checks that a Writer whose file cannot be
// opened keeps reading, drops output, and writes again once it can.
func TestWriterDropsWithoutFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	path := filepath.Join(dir, "0.log")
	clk := &clock{now: t0}
	w, err := NewWriter(WriterConfig{Path: path, Now: clk.Now})
	if w == nil || err == nil {
		t.Fatalf("NewWriter() = %v, %v; want a writer and the open error", w, err)
	}
	defer w.Close()
	if err := w.Copy(Stdout, strings.NewReader("lost\n")); err != nil {
		t.Fatal(err)
	}
	if w.Dropped() == 0 {
		t.Error("Dropped() = 0 after a write without a file")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Within a second of the failure the file is not tried again.
	w.Copy(Stdout, strings.NewReader("still lost\n"))
	clk.add(2 * time.Second)
	w.Copy(Stdout, strings.NewReader("kept\n"))
	w.Close()
	if got := readRecords(t, path); fmt.Sprint(got) != fmt.Sprint([]rec{{Stdout, false, "kept"}}) {
		t.Errorf("records = %v, want only the line written once the file could be opened", got)
	}
}

// TestWriterGapOnFullDisk checks that a Writer whose file is full (here
// /dev/full, which fails every write with ENOSPC) drops whole lines,
// counts them, tells of the gap once when it starts and once when writing
// resumes, and then writes on.
func TestWriterGapOnFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.Symlink("/dev/full", path); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: t0}
	var gaps []Gap
	w, err := NewWriter(WriterConfig{Path: path, Now: clk.Now, Dropped: func(g Gap) { gaps = append(gaps, g) }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Feed(Stdout, []byte("lost-1\nlost-2\n"))
	w.Feed(Stderr, []byte("lost-3\n")) // within a second: not tried, dropped
	if len(gaps) != 1 || gaps[0].Lines != 2 || !gaps[0].Until.IsZero() || !errors.Is(gaps[0].Err, syscall.ENOSPC) {
		t.Fatalf("gaps after the first drops = %+v, want one starting gap of 2 lines for ENOSPC", gaps)
	}
	if err := os.Remove(path); err != nil { // space returns
		t.Fatal(err)
	}
	clk.add(2 * time.Second)
	w.Feed(Stdout, []byte("kept\n"))
	resumed := t0.Add(2 * time.Second)
	if len(gaps) != 1 {
		t.Fatalf("gaps once a write succeeds = %+v, want none ended before writes go on for %v", gaps, gapSettle)
	}
	clk.add(gapSettle)
	w.Feed(Stdout, []byte("kept-2\n"))
	if len(gaps) != 2 || gaps[1].Lines != 3 || gaps[1].Until.Before(resumed) || gaps[1].Until.After(resumed.Add(time.Second)) || gaps[1].Since != gaps[0].Since {
		t.Fatalf("gaps after writes went on = %+v, want a second report of 3 lines ending when writes resumed (%v)", gaps, resumed)
	}
	w.Feed(Stdout, []byte("kept-3\n"))
	w.Close()
	if len(gaps) != 2 {
		t.Errorf("gaps = %+v, want no report once writing goes on", gaps)
	}
	want := []rec{{Stdout, false, "kept"}, {Stdout, false, "kept-2"}, {Stdout, false, "kept-3"}}
	if got := readRecords(t, path); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records = %v, want %v", got, want)
	}
}

// TestWriterFeed: chunks of both streams fed one after the other become
// records in the order they were fed, a line split across chunks waits
// for its end, EndStream writes an unterminated line, and an unknown
// stream is refused.
func TestWriterFeed(t *testing.T) {
	w := newTestWriter(t, WriterConfig{})
	feeds := []struct{ stream, chunk string }{
		{Stdout, "out-1\nout-2 be"}, {Stderr, "err-1\n"}, {Stdout, "gins\n"}, {Stderr, "err-2, no newline"},
	}
	for _, f := range feeds {
		if err := w.Feed(f.stream, []byte(f.chunk)); err != nil {
			t.Fatalf("Feed(%s, %q): %v", f.stream, f.chunk, err)
		}
	}
	if err := w.EndStream(Stderr); err != nil {
		t.Fatalf("EndStream(%s): %v", Stderr, err)
	}
	if err := w.Feed("stdin", []byte("x\n")); err == nil {
		t.Error("Feed(stdin) = nil, want an error")
	}
	if err := w.EndStream("stdin"); err == nil {
		t.Error("EndStream(stdin) = nil, want an error")
	}
	w.Close()
	want := []rec{{Stdout, false, "out-1"}, {Stderr, false, "err-1"}, {Stdout, false, "out-2 begins"}, {Stderr, false, "err-2, no newline"}}
	if got := readRecords(t, w.file.cfg.Path); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records = %v\nwant %v", got, want)
	}
}

// TestWriterIdleHoldsNoBuffer: between chunks a Writer keeps no record
// buffer, nor the buffer of a long line once the line is written.
func TestWriterIdleHoldsNoBuffer(t *testing.T) {
	w := newTestWriter(t, WriterConfig{})
	long := strings.Repeat("x", 3*MaxLineSize)
	for _, chunk := range []string{long[:MaxLineSize/2], long[MaxLineSize/2:], "\nshort, then idle\n"} {
		if err := w.Feed(Stdout, []byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if w.file.buf != nil {
		t.Errorf("record buffer of %d bytes kept after a chunk", cap(*w.file.buf))
	}
	if c := cap(w.lines[0].line); c > keptLine {
		t.Errorf("line buffer of %d bytes kept after the long line ended", c)
	}
}

func TestNewWriterRejects(t *testing.T) {
	for _, cfg := range []WriterConfig{{}, {Path: "/x", MaxSize: 10, MaxFiles: 1}, {Path: "/x", MaxSize: -1}} {
		if w, err := NewWriter(cfg); w != nil || err == nil {
			t.Errorf("NewWriter(%+v) = %v, %v; want an error", cfg, w, err)
		}
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, detail)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
