package filewatch

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// Tests run on a loaded machine: the debounce is short so that they are
// quick, and every wait for a change is long so that they never flake.
const (
	testDebounce = 20 * time.Millisecond
	waitLimit    = 20 * time.Second
)

// harness runs a Watcher over a temporary directory.
type harness struct {
	t    *testing.T
	w    *Watcher
	root string
}

// newHarness makes a Watcher with cfg (a short debounce and no resync
// unless set) and a directory for the test's files; start runs it.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Debounce == 0 {
		cfg.Debounce = testDebounce
	}
	if cfg.Resync == 0 {
		cfg.Resync = time.Hour
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, w: New(cfg), root: root}
}

// start runs the Watcher until the test ends; poll runs it as when
// fsnotify is unusable.
func (h *harness) start(poll bool) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if poll {
			done <- newLoop(h.w, nil).run(ctx, nil, nil)
		} else {
			done <- h.w.Run(ctx)
		}
	}()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run() = %v, want nil", err)
		}
	})
	return h
}

// start runs a Watcher with cfg until the test ends.
func start(t *testing.T, cfg Config, poll bool) *harness {
	t.Helper()
	return newHarness(t, cfg).start(poll)
}

// key is the key of pod name.
func key(name string) pod.Key { return pod.Key{Namespace: "default", Name: name} }

// target is container c mounting path (under the root).
func (h *harness) target(c, path string) pod.WatchTarget {
	return pod.WatchTarget{Container: c, Volume: "v-" + c, Path: filepath.Join(h.root, path)}
}

// set calls Set and waits until the watcher has taken it up.
func (h *harness) set(p string, targets ...pod.WatchTarget) {
	h.t.Helper()
	h.w.Set(key(p), targets)
	h.sync()
}

// sync waits until the watcher has taken up every Set so far.
func (h *harness) sync() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.w.sync(ctx); err != nil {
		h.t.Fatalf("the watcher did not take up Set within %v", waitLimit)
	}
}

func (h *harness) run(ops ...[]fsOp) {
	h.t.Helper()
	run(h.t, h.root, ops...)
}

// expect waits for len(want) changes, and checks that they are want
// ("pod/container: path", in any order).
func (h *harness) expect(want ...string) []pod.FileChange {
	h.t.Helper()
	var changes []pod.FileChange
	var got []string
	timeout := time.After(waitLimit)
	for len(got) < len(want) {
		select {
		case c := <-h.w.Changes():
			changes = append(changes, c)
			got = append(got, h.describe(c))
		case <-timeout:
			h.t.Fatalf("got changes %q within %v, want %q", got, waitLimit, want)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		h.t.Errorf("changes = %q, want %q", got, want)
	}
	return changes
}

// expectNothingBefore checks that nothing fired for what was done so far:
// it makes a change to sentinel, a path of its own (pod "sentinel"), and
// checks that the first change it receives is that one. Events are
// delivered in order and paths fingerprinted in the order of their
// events, so a change that should not have been would come first.
func (h *harness) expectNothingBefore(sentinel string, data string) {
	h.t.Helper()
	h.run([]fsOp{write(sentinel, data)})
	h.expect(fmt.Sprintf("sentinel/c: %s", sentinel))
}

func (h *harness) describe(c pod.FileChange) string {
	rel, err := filepath.Rel(h.root, c.Path)
	if err != nil {
		rel = c.Path
	}
	return fmt.Sprintf("%s/%s: %s", c.Pod.Name, c.Container, rel)
}

func TestChanges(t *testing.T) {
	tests := []struct {
		name    string
		before  []fsOp
		targets [][2]string // container, path
		change  []fsOp
		want    []string
	}{
		{name: "a write to a file", before: []fsOp{write("etc/app.conf", "v1")},
			targets: [][2]string{{"app", "etc/app.conf"}},
			change:  []fsOp{write("etc/app.conf", "v2")},
			want:    []string{"p/app: etc/app.conf"}},
		{name: "a rename over a file (editor, sed -i)", before: []fsOp{write("etc/app.conf", "v1")},
			targets: [][2]string{{"app", "etc/app.conf"}},
			change:  []fsOp{write("etc/.app.conf.tmp", "v2"), rename("etc/.app.conf.tmp", "etc/app.conf")},
			want:    []string{"p/app: etc/app.conf"}},
		{name: "a write through a link to a file elsewhere", before: []fsOp{write("real/app.conf", "v1"), mkdir("etc"), symlink("etc/app.conf", "../real/app.conf")},
			targets: [][2]string{{"app", "etc/app.conf"}},
			change:  []fsOp{write("real/app.conf", "v2")},
			want:    []string{"p/app: etc/app.conf"}},
		{name: "a ConfigMap-style swap, file and directory", before: configMap("cm", "1", "v1"),
			targets: [][2]string{{"file", "cm/config"}, {"dir", "cm"}},
			change:  swapConfigMap("cm", "1", "2", "v2"),
			want:    []string{"p/file: cm/config", "p/dir: cm"}},
		{name: "a file in a directory changes", before: []fsOp{write("etc/haproxy/haproxy.cfg", "v1"), write("etc/haproxy/other", "")},
			targets: [][2]string{{"lb", "etc/haproxy"}},
			change:  []fsOp{write("etc/haproxy/haproxy.cfg", "v2")},
			want:    []string{"p/lb: etc/haproxy"}},
		{name: "a file added deep in a directory", before: []fsOp{write("etc/haproxy/haproxy.cfg", "v1")},
			targets: [][2]string{{"lb", "etc/haproxy"}},
			change:  []fsOp{write("new/conf.d/extra.cfg", ""), rename("new", "etc/haproxy/new")},
			want:    []string{"p/lb: etc/haproxy"}},
		{name: "two containers mount the same file", before: []fsOp{write("etc/app.conf", "v1")},
			targets: [][2]string{{"app", "etc/app.conf"}, {"sidecar", "etc/app.conf"}},
			change:  []fsOp{write("etc/app.conf", "v2")},
			want:    []string{"p/app: etc/app.conf", "p/sidecar: etc/app.conf"}},
		{name: "a missing file appears", before: []fsOp{mkdir("etc")},
			targets: [][2]string{{"app", "etc/kube-vip/config.yaml"}},
			change:  []fsOp{write("etc/kube-vip/config.yaml", "v1")},
			want:    []string{"p/app: etc/kube-vip/config.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Config{}, false)
			h.run(tt.before)
			var targets []pod.WatchTarget
			for _, tg := range tt.targets {
				targets = append(targets, h.target(tg[0], tg[1]))
			}
			h.set("p", targets...)
			h.run(tt.change)
			h.expect(tt.want...)
		})
	}
}

func TestNoChange(t *testing.T) {
	tests := []struct {
		name   string
		before []fsOp
		path   string
		change []fsOp
	}{
		{name: "touch", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf", change: []fsOp{touch("etc/app.conf")}},
		{name: "chmod", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf", change: []fsOp{chmod("etc/app.conf", 0o600)}},
		{name: "the same bytes written", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf", change: []fsOp{write("etc/app.conf", "v1")}},
		{name: "the same bytes renamed over", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf",
			change: []fsOp{write("etc/.tmp", "v1"), rename("etc/.tmp", "etc/app.conf")}},
		{name: "removed", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf", change: []fsOp{remove("etc/app.conf")}},
		{name: "removed and restored", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf",
			change: []fsOp{remove("etc/app.conf"), write("etc/app.conf", "v1")}},
		{name: "touch and chmod in a directory", before: []fsOp{write("etc/d/a", "v1")}, path: "etc/d",
			change: []fsOp{touch("etc/d/a"), chmod("etc/d/a", 0o600), chmod("etc/d", 0o700)}},
		{name: "another file in the same directory", before: []fsOp{write("etc/app.conf", "v1")}, path: "etc/app.conf",
			change: []fsOp{write("etc/other.conf", "v1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Config{}, false)
			h.run(tt.before, []fsOp{write("zz-sentinel/file", "v1")})
			h.set("p", h.target("app", tt.path))
			h.set("sentinel", h.target("c", "zz-sentinel/file"))
			h.run(tt.change)
			h.expectNothingBefore("zz-sentinel/file", "v2")
		})
	}
}

func TestBackWithOtherContent(t *testing.T) {
	h := start(t, Config{}, false)
	h.run([]fsOp{write("etc/app.conf", "v1"), write("zz-sentinel/file", "v1")})
	h.set("p", h.target("app", "etc/app.conf"))
	h.set("sentinel", h.target("c", "zz-sentinel/file"))
	h.run([]fsOp{remove("etc/app.conf")})
	h.expectNothingBefore("zz-sentinel/file", "v2")
	h.run([]fsOp{write("etc/app.conf", "v2")})
	h.expect("p/app: etc/app.conf")
}

func TestDirectoryMovedInIsWatched(t *testing.T) {
	h := start(t, Config{}, false)
	h.run([]fsOp{write("etc/haproxy/haproxy.cfg", "v1"), write("new/conf.d/extra.cfg", "v1")})
	h.set("p", h.target("lb", "etc/haproxy"))
	h.run([]fsOp{rename("new", "etc/haproxy/new")})
	h.expect("p/lb: etc/haproxy")
	h.run([]fsOp{write("etc/haproxy/new/conf.d/extra.cfg", "v2")})
	h.expect("p/lb: etc/haproxy")
}

func TestDebounce(t *testing.T) {
	// Long enough that the writes below, back to back, fall within it
	// even on a loaded machine.
	const debounce = 300 * time.Millisecond
	h := start(t, Config{Debounce: debounce}, false)
	h.run([]fsOp{write("etc/app.conf", "v0"), write("zz-sentinel/file", "v1")})
	h.set("p", h.target("app", "etc/app.conf"))
	h.set("sentinel", h.target("c", "zz-sentinel/file"))
	var last time.Time
	for i := range 5 {
		last = time.Now()
		h.run([]fsOp{write("etc/app.conf", fmt.Sprintf("v%d", i+1))})
	}
	c := h.expect("p/app: etc/app.conf")[0]
	if settled := last.Add(debounce); c.Time.Before(settled) {
		t.Errorf("change at %v, before the writes settled (%v)", c.Time, settled)
	}
	h.expectNothingBefore("zz-sentinel/file", "v2")
}

func TestSet(t *testing.T) {
	t.Run("a path left out stops being watched", func(t *testing.T) {
		h := start(t, Config{}, false)
		h.run([]fsOp{write("a/f", "v1"), write("b/f", "v1"), write("zz-sentinel/file", "v1")})
		h.set("p", h.target("app", "a/f"), h.target("app", "b/f"))
		h.set("sentinel", h.target("c", "zz-sentinel/file"))
		h.set("p", h.target("app", "b/f"))
		h.run([]fsOp{write("a/f", "v2")})
		h.expectNothingBefore("zz-sentinel/file", "v2")
		h.run([]fsOp{write("b/f", "v2")})
		h.expect("p/app: b/f")
	})
	t.Run("nil stops the pod, not the others", func(t *testing.T) {
		h := start(t, Config{}, false)
		h.run([]fsOp{write("a/f", "v1"), write("zz-sentinel/file", "v1")})
		h.set("p", h.target("app", "a/f"))
		h.set("q", h.target("app", "a/f"))
		h.set("sentinel", h.target("c", "zz-sentinel/file"))
		h.set("p")
		h.run([]fsOp{write("a/f", "v2")})
		h.expect("q/app: a/f")
		h.set("q")
		h.run([]fsOp{write("a/f", "v3")})
		h.expectNothingBefore("zz-sentinel/file", "v2")
	})
	t.Run("the same targets again keep the baseline", func(t *testing.T) {
		h := start(t, Config{}, false)
		h.run([]fsOp{write("a/f", "v1"), write("b/f", "v1")})
		h.set("p", h.target("app", "a/f"), h.target("app", "b/f"))
		h.run([]fsOp{write("a/f", "v2")})
		h.set("p", h.target("app", "b/f"), h.target("app", "a/f"))
		h.expect("p/app: a/f")
	})
	t.Run("before Run", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.run([]fsOp{write("a/f", "v1")})
		h.w.Set(key("p"), []pod.WatchTarget{h.target("app", "a/f")})
		h.start(false).sync()
		h.run([]fsOp{write("a/f", "v2")})
		h.expect("p/app: a/f")
	})
}

func TestResyncWithoutEvents(t *testing.T) {
	h := start(t, Config{Resync: 50 * time.Millisecond}, true)
	h.run([]fsOp{write("etc/app.conf", "v1")})
	h.set("p", h.target("app", "etc/app.conf"))
	h.run([]fsOp{write("etc/app.conf", "v2")})
	h.expect("p/app: etc/app.conf")
}

func TestRunTwice(t *testing.T) {
	h := start(t, Config{}, false)
	h.set("p") // Run is running once sync returns
	if err := h.w.Run(context.Background()); err == nil {
		t.Errorf("a second Run() = nil, want an error")
	}
}

// recorder is a dirWatcher that keeps the watched directories.
type recorder map[string]bool

func (r recorder) Add(dir string) error    { r[dir] = true; return nil }
func (r recorder) Remove(dir string) error { delete(r, dir); return nil }

func TestLoopWatchesWhatThePathsNeed(t *testing.T) {
	h := newHarness(t, Config{})
	h.run([]fsOp{write("a/f", ""), write("b/d/sub/g", ""), write("c/h", "")})
	rec := recorder{}
	l := newLoop(h.w, rec)
	steps := []struct {
		targets []pod.WatchTarget
		want    []string
	}{
		{targets: []pod.WatchTarget{h.target("app", "a/f"), h.target("app", "b/d"), h.target("side", "b/d")},
			want: []string{"a", "b", "b/d", "b/d/sub"}},
		{targets: []pod.WatchTarget{h.target("app", "b/d"), h.target("app", "c/h")},
			want: []string{"b", "b/d", "b/d/sub", "c"}},
		{targets: []pod.WatchTarget{h.target("app", "c/h")}, want: []string{"c"}},
		{targets: nil, want: nil},
	}
	for i, s := range steps {
		l.apply(map[pod.Key][]pod.WatchTarget{key("p"): s.targets})
		var got []string
		for dir := range rec {
			rel, _ := filepath.Rel(h.root, dir)
			got = append(got, rel)
		}
		slices.Sort(got)
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d: watching %q, want %q", i, got, s.want)
		}
		if len(l.watches) != len(rec) || len(l.refs) != len(rec) {
			t.Errorf("step %d: the loop keeps %d watches and %d refs for %d watched directories", i, len(l.watches), len(l.refs), len(rec))
		}
	}
	if len(l.dirsOf) != 0 || len(l.t.paths) != 0 {
		t.Errorf("after the pod stopped: dirsOf %v, tracker paths %v, want none", l.dirsOf, l.t.paths)
	}
}
