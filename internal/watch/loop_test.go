package watch

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"
)

// The tests in this file drive the loop with hand-made events inside a
// synctest bubble, where time is fake and exact: a real watcher's goroutine
// sits in a system call, which the bubble cannot wait for.

// nopWatcher accepts every watch.
type nopWatcher struct{}

func (nopWatcher) Add(string) error    { return nil }
func (nopWatcher) Remove(string) error { return nil }

// looping is a loop under test inside a bubble.
type looping struct {
	t      *testing.T
	root   string
	events chan fsnotify.Event
	out    chan Snapshot
}

// startLoop runs d's loop until the test's bubble ends. Call inside synctest.Test.
func startLoop(t *testing.T, d *Dir, root string) *looping {
	t.Helper()
	l := &looping{t: t, root: root, events: make(chan fsnotify.Event), out: make(chan Snapshot)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- d.loop(ctx, l.out, nopWatcher{}, l.events, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("loop() = %v, want nil", err)
		}
	})
	return l
}

// op applies fs ops and sends the event a watcher would send for name.
func (l *looping) op(do fsOp, name string, op fsnotify.Op) {
	l.t.Helper()
	do(l.t, l.root)
	l.events <- fsnotify.Event{Name: filepath.Join(l.root, name), Op: op}
}

// received returns the snapshots sent so far without waiting for more.
func (l *looping) received() []Snapshot {
	synctest.Wait()
	var got []Snapshot
	for {
		select {
		case s := <-l.out:
			got = append(got, s)
			synctest.Wait()
		default:
			return got
		}
	}
}

func TestLoopDebounce(t *testing.T) {
	const debounce = 100 * time.Millisecond
	type event struct {
		do    fsOp
		name  string // relative to the root
		op    fsnotify.Op
		after time.Duration // pause after the event
	}
	var (
		create = fsnotify.Create
		wr     = fsnotify.Write
		rm     = fsnotify.Remove
		mv     = fsnotify.Rename
		none   = func(*testing.T, string) {}
	)
	manyWrites := func(n int, gap time.Duration) []event {
		var evs []event
		for i := range n {
			name := "m/p" + string(rune('a'+i)) + ".yaml"
			evs = append(evs, event{write(name, "name: p"+string(rune('a'+i))), name, create, gap})
		}
		return evs
	}
	tests := []struct {
		name   string
		events []event
		want   string        // summary of the one snapshot after the burst
		delay  time.Duration // from the last event to that snapshot
	}{
		{
			name:   "burst of writes",
			events: manyWrites(10, 20*time.Millisecond),
			want:   "a.yaml: default/a; pa.yaml: default/pa; pb.yaml: default/pb; pc.yaml: default/pc; pd.yaml: default/pd; pe.yaml: default/pe; pf.yaml: default/pf; pg.yaml: default/pg; ph.yaml: default/ph; pi.yaml: default/pi; pj.yaml: default/pj",
			delay:  debounce,
		},
		{
			name: "editor write then rename",
			events: []event{
				{write("m/.a.yaml.swp", "swap"), "m/.a.yaml.swp", create, 10 * time.Millisecond},
				{write("m/a.yaml~", "name: a"), "m/a.yaml~", create, time.Millisecond},
				{write("m/a.yaml.tmp", "name: a2"), "m/a.yaml.tmp", create, 0},
				{none, "m/a.yaml.tmp", wr, time.Millisecond},
				{rename("m/a.yaml.tmp", "m/a.yaml"), "m/a.yaml.tmp", mv, 0},
				{none, "m/a.yaml", create, 50 * time.Millisecond},
				{remove("m/.a.yaml.swp"), "m/.a.yaml.swp", rm, 0},
			},
			want:  "a.yaml: default/a2",
			delay: debounce,
		},
		{
			// A program writing non-stop into the directory delays a listing by
			// at most maxWaitFactor debounce periods.
			name:   "endless stream",
			events: manyWrites(20, 60*time.Millisecond),
			want:   "a.yaml: default/a; pa.yaml: default/pa; pb.yaml: default/pb; pc.yaml: default/pc; pd.yaml: default/pd; pe.yaml: default/pe; pf.yaml: default/pf; pg.yaml: default/pg; ph.yaml: default/ph; pi.yaml: default/pi; pj.yaml: default/pj; pk.yaml: default/pk; pl.yaml: default/pl; pm.yaml: default/pm; pn.yaml: default/pn; po.yaml: default/po; pp.yaml: default/pp; pq.yaml: default/pq",
			delay:  -1, // checked separately: the first snapshot comes before the burst ends
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				root := t.TempDir()
				write("m/a.yaml", "name: a")(t, root)
				d := NewDir(DirConfig{Path: filepath.Join(root, "m"), Resync: time.Hour, Debounce: debounce, Decode: fakeDecode})
				started := time.Now()
				l := startLoop(t, d, root)
				first := <-l.out
				if waited := time.Since(started); waited != 0 {
					t.Errorf("first snapshot after %v, want at once", waited)
				}
				if got := summary(first, root); got != "a.yaml: default/a" {
					t.Errorf("first snapshot %q, want %q", got, "a.yaml: default/a")
				}

				var last time.Time
				for _, ev := range tt.events {
					l.op(ev.do, ev.name, ev.op)
					last = time.Now()
					time.Sleep(ev.after)
				}
				got := l.received()
				if tt.delay < 0 {
					// The capped listing came once, 10 debounce periods into the burst.
					if len(got) != 1 {
						t.Fatalf("%d snapshots during the stream, want 1", len(got))
					}
					if s := summary(got[0], root); s != tt.want {
						t.Errorf("snapshot %q, want %q", s, tt.want)
					}
					return
				}
				if len(got) != 0 {
					t.Fatalf("snapshot %q during the burst, want none", summary(got[0], root))
				}
				s := <-l.out
				if delay := time.Since(last); delay != tt.delay {
					t.Errorf("snapshot %v after the last event, want %v", delay, tt.delay)
				}
				if got := summary(s, root); got != tt.want {
					t.Errorf("snapshot %q, want %q", got, tt.want)
				}
				time.Sleep(time.Minute)
				if more := l.received(); len(more) != 0 {
					t.Errorf("%d more snapshots after the burst, want none; first %q", len(more), summary(more[0], root))
				}
			})
		})
	}
}

// lockedBuffer is a log destination safe to read while the loop logs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// TestLoopResyncIsQuiet checks that periodic listings of an unchanged
// directory decode nothing, send nothing and log nothing, and that they do
// pick up a change no event announced.
func TestLoopResyncIsQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		write("m/a.yaml", "name: a")(t, root)
		write("m/b.yaml", "name: b")(t, root)
		write("m/c.yaml", "bad")(t, root)
		var logs lockedBuffer
		dec := &countingDecoder{}
		d := NewDir(DirConfig{
			Path:   filepath.Join(root, "m"),
			Resync: 20 * time.Second,
			Decode: dec.decode,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		l := startLoop(t, d, root)
		want := "a.yaml: default/a; b.yaml: default/b; c.yaml:  !bad manifest"
		if got := summary(<-l.out, root); got != want {
			t.Fatalf("first snapshot %q, want %q", got, want)
		}
		if n := dec.calls.Load(); n != 3 {
			t.Fatalf("%d decodes for 3 files, want 3", n)
		}

		steps := []struct {
			name    string
			do      fsOp
			decodes int64  // total so far
			want    string // "" for no snapshot
		}{
			{"idle", func(*testing.T, string) {}, 3, ""},
			{"touched, same content", func(t *testing.T, root string) {
				later := time.Unix(2_000_000_000, 0)
				if err := os.Chtimes(filepath.Join(root, "m/a.yaml"), later, later); err != nil {
					t.Fatal(err)
				}
			}, 3, ""},
			{"rewritten, same content", write("m/b.yaml", "name: b"), 3, ""},
			{"changed without an event", write("m/b.yaml", "name: b2"), 4, "a.yaml: default/a; b.yaml: default/b2; c.yaml:  !bad manifest"},
		}
		for _, s := range steps {
			s.do(t, root)
			time.Sleep(10 * time.Minute) // 30 resyncs
			got := l.received()
			switch {
			case s.want == "" && len(got) != 0:
				t.Errorf("%s: snapshot %q, want none", s.name, summary(got[0], root))
			case s.want != "" && len(got) != 1:
				t.Errorf("%s: %d snapshots, want 1", s.name, len(got))
			case s.want != "" && summary(got[0], root) != s.want:
				t.Errorf("%s: snapshot %q, want %q", s.name, summary(got[0], root), s.want)
			}
			if n := dec.calls.Load(); n != s.decodes {
				t.Errorf("%s: %d decodes in all, want %d", s.name, n, s.decodes)
			}
		}
		if n := logs.count("level=WARN"); n != 1 {
			t.Errorf("%d warnings logged, want 1 (c.yaml, once):\n%s", n, logs.buf.String())
		}
	})
}

// TestLoopQuietDebounce checks that a burst with no removal is listed
// QuietDebounce after its last event, and one with a removal or rename the
// full Debounce after it.
func TestLoopQuietDebounce(t *testing.T) {
	const quiet, full = 10 * time.Millisecond, 50 * time.Millisecond
	tests := []struct {
		name  string
		do    fsOp
		file  string
		op    fsnotify.Op
		want  string
		delay time.Duration
	}{
		{"new file", write("m/b.yaml", "name: b"), "m/b.yaml", fsnotify.Create, "a.yaml: default/a; b.yaml: default/b", quiet},
		{"rewritten file", write("m/a.yaml", "name: a2"), "m/a.yaml", fsnotify.Write, "a.yaml: default/a2", quiet},
		{"removed file", remove("m/a.yaml"), "m/a.yaml", fsnotify.Remove, "", full},
		{"renamed file", rename("m/a.yaml", "m/c.yaml"), "m/a.yaml", fsnotify.Rename, "c.yaml: default/a", full},
		{"atomic write", rename("m/.a.yaml.tmp", "m/a.yaml"), "m/.a.yaml.tmp", fsnotify.Rename, "a.yaml: default/a3", quiet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				root := t.TempDir()
				write("m/a.yaml", "name: a")(t, root)
				write("m/.a.yaml.tmp", "name: a3")(t, root)
				d := NewDir(DirConfig{Path: filepath.Join(root, "m"), Resync: time.Hour,
					Debounce: full, QuietDebounce: quiet, Decode: fakeDecode})
				l := startLoop(t, d, root)
				<-l.out
				l.op(tt.do, tt.file, tt.op)
				last := time.Now()
				s := <-l.out
				if delay := time.Since(last); delay != tt.delay {
					t.Errorf("snapshot %v after the event, want %v", delay, tt.delay)
				}
				if got := summary(s, root); got != tt.want {
					t.Errorf("snapshot %q, want %q", got, tt.want)
				}
			})
		})
	}
}
