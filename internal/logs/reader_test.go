package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sample is a log with a line split in partial records, interleaved with
// the other stream, and a torn last record.
const sample = `2026-11-21T03:15:00.1Z stdout F one
2026-11-21T03:15:00.2Z stderr F two
2026-11-21T03:15:00.3Z stdout P thr
2026-11-21T03:15:00.4Z stderr F four
not a record
2026-11-21T03:15:00.5Z stdout P ee
2026-11-21T03:15:00.6Z stdout F !
2026-11-21T03:15:00.7Z stdout F five
2026-11-21T03:15:00.8Z stdout F si`

func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	all := "one\ntwo\nfour\nthree!\nfive\n"
	tests := []struct {
		name string
		q    Query
		want string
	}{
		{"all", Query{TailLines: -1}, all},
		{"tail 2", Query{TailLines: 2}, "three!\nfive\n"},
		{"tail 0", Query{TailLines: 0}, ""},
		{"tail more than there is", Query{TailLines: 10}, all},
		{"timestamps", Query{TailLines: 3, Timestamps: true},
			"2026-11-21T03:15:00.400000000Z four\n2026-11-21T03:15:00.300000000Z three!\n2026-11-21T03:15:00.700000000Z five\n"},
		// A line's time is its first record's: "three!" is from .3.
		{"since", Query{TailLines: -1, Since: at("03:15:00.35")}, "four\nfive\n"},
		{"since a line's time keeps it", Query{TailLines: -1, Since: at("03:15:00.3")}, "four\nthree!\nfive\n"},
		{"since after all", Query{TailLines: -1, Since: at("03:16:00")}, ""},
		{"tail then since", Query{TailLines: 2, Since: at("03:15:00.5")}, "five\n"},
		{"limit cuts a line", Query{TailLines: -1, LimitBytes: 6}, "one\ntw"},
		{"limit at a line's end", Query{TailLines: -1, LimitBytes: 4}, "one\n"},
		{"limit more than there is", Query{TailLines: -1, LimitBytes: 1000}, all},
		{"limit counts timestamps", Query{TailLines: 1, Timestamps: true, LimitBytes: 10}, "2026-11-21"},
		{"limit after since and tail", Query{TailLines: 3, Since: at("03:15:00.35"), LimitBytes: 7}, "four\nfi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.Path = path
			rc, err := Open(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil || string(got) != tt.want {
				t.Errorf("read %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := Open(t.Context(), Query{Path: path + ".missing"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) error = %v, want fs.ErrNotExist", err)
	}
}

// at is a time of sample's day.
func at(clock string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, "2026-11-21T"+clock+"Z")
	if err != nil {
		panic(err)
	}
	return t
}

// follow opens path with q and sends the lines it reads on a channel,
// closed at the end of the stream.
func follow(t *testing.T, q Query) (io.ReadCloser, <-chan string) {
	t.Helper()
	q.Follow = true
	rc, err := Open(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(rc)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return rc, lines
}

func expectLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if !ok || got != want {
			t.Fatalf("followed line %q (open %v), want %q", got, ok, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no line in 5s, want %q", want)
	}
}

func expectEnd(t *testing.T, lines <-chan string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if ok {
			t.Fatalf("followed line %q, want the end of the stream", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end within 5s")
	}
}

// TestFollowAcrossRotation follows a file the Writer rotates every few
// lines: every line comes, in order, and the stream ends when the
// container stops running.
func TestFollowAcrossRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, WriterConfig{Path: path, MaxSize: 300, MaxFiles: 3, Now: (&clock{now: t0, step: time.Second}).Now})
	w.Copy(Stdout, strings.NewReader("before\nthe follow\n"))
	var running atomic.Bool
	running.Store(true)
	_, lines := follow(t, Query{Path: path, TailLines: 1, Running: running.Load})
	expectLine(t, lines, "the follow")
	for i := range 20 {
		line := fmt.Sprintf("line-%02d", i)
		w.Copy(Stdout, strings.NewReader(line+"\n"))
		expectLine(t, lines, line)
	}
	if rotated, _ := RotatedFiles(path); len(rotated) == 0 {
		t.Error("no rotation happened")
	}
	// What is written just before the container stops still comes.
	w.Copy(Stderr, strings.NewReader("last words"))
	w.Close()
	running.Store(false)
	expectLine(t, lines, "last words")
	expectEnd(t, lines)
}

// TestFollowEndsOnRestart checks that a follower ends when the log of a
// later instance of the container appears.
func TestFollowEndsOnRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "2.log")
	w := newTestWriter(t, WriterConfig{Path: path})
	w.Copy(Stdout, strings.NewReader("hello\n"))
	_, lines := follow(t, Query{Path: path, TailLines: -1})
	expectLine(t, lines, "hello")
	// A lower instance is not a restart.
	if err := os.WriteFile(filepath.Join(dir, "1.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.Copy(Stdout, strings.NewReader("still\n"))
	expectLine(t, lines, "still")
	if err := os.WriteFile(filepath.Join(dir, "3.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expectEnd(t, lines)
}

// TestFollowEndsAtLimit checks that a follower stops once it has sent
// LimitBytes, while the container still writes.
func TestFollowEndsAtLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	w := newTestWriter(t, WriterConfig{Path: path})
	w.Copy(Stdout, strings.NewReader("first\n"))
	_, lines := follow(t, Query{Path: path, TailLines: -1, LimitBytes: 12})
	expectLine(t, lines, "first")
	w.Copy(Stdout, strings.NewReader("second line\n"))
	expectLine(t, lines, "second")
	expectEnd(t, lines)
}

// TestCloseStopsFollow checks that Close ends a follower that would
// otherwise go on, and waits for its goroutine.
func TestCloseStopsFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, lines := follow(t, Query{Path: path, TailLines: 0})
	done := make(chan struct{})
	go func() { rc.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s")
	}
	expectEnd(t, lines)

	ctx, cancel := context.WithCancel(t.Context())
	rc, err := Open(ctx, Query{Path: path, Follow: true, TailLines: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	cancel()
	if b, err := io.ReadAll(rc); err != nil || len(b) != 0 {
		t.Errorf("after the context ended: read %q, %v; want EOF", b, err)
	}
}

func TestFindLog(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, age time.Duration) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	mk("default_web_old/main/0.log", time.Hour)
	mk("default_web_sandbox/main/0.log", time.Minute)
	mk("default_web_sandbox/main/1.log", time.Minute)
	mk("default_web2_other/main/4.log", 0)
	mk("default_web_current/side/0.log", 0)
	tests := []struct {
		uid, container string
		instance       int
		want           string // relative to root; "" for not found
	}{
		{"current", "side", 0, "default_web_current/side/0.log"},
		{"current", "main", 0, "default_web_sandbox/main/0.log"}, // the sandbox outlived a UID change
		{"current", "main", 1, "default_web_sandbox/main/1.log"},
		{"current", "main", 4, ""}, // another pod's
		{"current", "main", 2, ""},
	}
	for _, tt := range tests {
		got, err := FindLog(root, "default", "web", tt.uid, tt.container, tt.instance)
		if tt.want == "" {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("FindLog(%s, %d) = %q, %v; want fs.ErrNotExist", tt.container, tt.instance, got, err)
			}
			continue
		}
		if err != nil || got != filepath.Join(root, tt.want) {
			t.Errorf("FindLog(%s, %d) = %q, %v; want %s", tt.container, tt.instance, got, err, tt.want)
		}
	}
}
