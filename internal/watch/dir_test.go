package watch

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// running is a Dir under Run with every snapshot it sent recorded.
type running struct {
	mu    sync.Mutex
	snaps []Snapshot
}

func (r *running) all() []Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Snapshot(nil), r.snaps...)
}

func (r *running) latest() (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.snaps) == 0 {
		return Snapshot{}, false
	}
	return r.snaps[len(r.snaps)-1], true
}

// source is what start runs: a Dir or a URL.
type source interface {
	Run(ctx context.Context, out chan<- Snapshot) error
}

// start runs d until the test ends, and checks that Run returns nil then.
func start(t *testing.T, d source) *running {
	t.Helper()
	r := &running{}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Snapshot)
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx, out) }()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for s := range out {
			r.mu.Lock()
			r.snaps = append(r.snaps, s)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
		close(out) // Run has returned: nothing sends any more
		<-collected
	})
	return r
}

// TestDir drives a directory source under a real file system watcher through
// sequences of changes. Resync is an hour, so every change must be seen
// through events.
func TestDir(t *testing.T) {
	type step struct {
		do   fsOp   // nil for the initial state
		want string // summary of the latest snapshot
	}
	const big = "file is 20971520 bytes, over the 10485760-byte limit"
	tests := []struct {
		name   string
		path   string // relative to the test root
		before fsOp   // before Run
		steps  []step
	}{
		{
			name:   "add edit remove",
			path:   "m",
			before: mkdir("m"),
			steps: []step{
				{nil, ""},
				{write("m/a.yaml", "name: a"), "a.yaml: default/a"},
				{write("m/a.yaml", "name: a\nname: b"), "a.yaml: default/a,default/b"},
				{write("m/b.yaml", "name: kube-system/c"), "a.yaml: default/a,default/b; b.yaml: kube-system/c"},
				{remove("m/a.yaml"), "b.yaml: kube-system/c"},
				{remove("m/b.yaml"), ""},
			},
		},
		{
			name: "ignored names",
			path: "m",
			before: all(
				write("m/good.yaml", "name: good"),
				write("m/.hidden.yaml", "name: hidden"),
				write("m/sub/nested.yaml", "name: nested"),
				write("outside.yaml", "name: linked"),
			),
			steps: []step{
				{nil, "good.yaml: default/good"},
				{all(
					write("m/good.yaml~", "name: backup"),
					write("m/.good.yaml.swp", "bad"),
					write("m/good.yaml.swx", "bad"),
					write("m/4913", "bad"),
					write("m/x.tmp", "bad"),
					write("m/x.yaml.dpkg-old", "name: old"),
					write("m/x.yaml.dpkg-new", "name: new"),
					write("m/x.yaml.dpkg-dist", "name: dist"),
					write("m/x.yaml.dpkg-tmp", "name: tmp"),
					mkdir("m/dir.yaml"),
					symlink("../missing.yaml", "m/dangling.yaml"),
					symlink("sub", "m/subdir-link.yaml"),
					symlink("../outside.yaml", "m/link.yaml"),
					func(t *testing.T, root string) {
						if err := syscall.Mkfifo(filepath.Join(root, "m/fifo.yaml"), 0o644); err != nil {
							t.Fatal(err)
						}
					},
					write("m/later.yaml", "name: later"),
				), "good.yaml: default/good; later.yaml: default/later; link.yaml: default/linked"},
			},
		},
		{
			name:   "editor write then rename",
			path:   "m",
			before: write("m/a.yaml", "name: a"),
			steps: []step{
				{nil, "a.yaml: default/a"},
				{all(
					write("m/.a.yaml.swp", "swap"),
					write("m/4913", ""),
					remove("m/4913"),
					rename("m/a.yaml", "m/a.yaml~"),
					write("m/a.yaml.tmp", "name: a2"),
					rename("m/a.yaml.tmp", "m/a.yaml"),
					remove("m/a.yaml~"),
				), "a.yaml: default/a2"},
				{remove("m/.a.yaml.swp"), "a.yaml: default/a2"},
			},
		},
		{
			name:   "oversized file is an error for that file only",
			path:   "m",
			before: write("m/good.yaml", "name: good"),
			steps: []step{
				{nil, "good.yaml: default/good"},
				{sparse("m/big.yaml", 20<<20), "big.yaml:  !" + big + "; good.yaml: default/good"},
				{write("m/big.yaml", "name: big"), "big.yaml: default/big; good.yaml: default/good"},
				{sparse("m/big.yaml", 20<<20), "big.yaml: default/big !" + big + "; good.yaml: default/good"},
			},
		},
		{
			name:   "invalid content keeps the last good pods",
			path:   "m",
			before: write("m/a.yaml", "name: a"),
			steps: []step{
				{nil, "a.yaml: default/a"},
				{write("m/a.yaml", "bad"), "a.yaml: default/a !bad manifest"},
				{write("m/a.yaml", "name: a2"), "a.yaml: default/a2"},
				{write("m/a.yaml", "bad"), "a.yaml: default/a2 !bad manifest"},
				{remove("m/a.yaml"), ""},
				{write("m/a.yaml", "bad"), "a.yaml:  !bad manifest"},
			},
		},
		{
			name: "missing directory created later",
			path: "x/y/m",
			steps: []step{
				{nil, "!manifest directory ROOT/x/y/m does not exist"},
				{mkdir("x"), "!manifest directory ROOT/x/y/m does not exist"},
				{write("x/y/m/a.yaml", "name: a"), "a.yaml: default/a"},
				{write("x/y/m/b.yaml", "name: b"), "a.yaml: default/a; b.yaml: default/b"},
				{remove("x"), "!manifest directory ROOT/x/y/m does not exist"},
				{write("x/y/m/c.yaml", "name: c"), "c.yaml: default/c"},
				{write("x/y/m/d.yaml", "name: d"), "c.yaml: default/c; d.yaml: default/d"},
			},
		},
		{
			name:   "directory replaced",
			path:   "m",
			before: write("m/a.yaml", "name: a"),
			steps: []step{
				{nil, "a.yaml: default/a"},
				{all(rename("m", "m.old"), write("m/b.yaml", "name: b")), "b.yaml: default/b"},
				{write("m/c.yaml", "name: c"), "b.yaml: default/b; c.yaml: default/c"},
				{write("m.old/z.yaml", "name: z"), "b.yaml: default/b; c.yaml: default/c"},
				{all(remove("m"), write("m/d.yaml", "name: d")), "d.yaml: default/d"},
				{write("m/e.yaml", "name: e"), "d.yaml: default/d; e.yaml: default/e"},
			},
		},
		{
			// As deployment tools do with "ln -sfn": only the parent sees it.
			name:   "directory symlink retargeted",
			path:   "m",
			before: all(write("v1/a.yaml", "name: a"), write("v2/b.yaml", "name: b"), symlink("v1", "m")),
			steps: []step{
				{nil, "a.yaml: default/a"},
				{all(symlink("v2", "m.new"), rename("m.new", "m")), "b.yaml: default/b"},
				{write("v2/c.yaml", "name: c"), "b.yaml: default/b; c.yaml: default/c"},
			},
		},
		{
			name:   "single file",
			path:   "m/pod.yaml",
			before: write("m/other.yaml", "name: other"),
			steps: []step{
				{nil, "!manifest file ROOT/m/pod.yaml does not exist"},
				{write("m/pod.yaml", "name: p"), "pod.yaml: default/p"},
				{all(write("m/pod.yaml.tmp", "name: p2"), rename("m/pod.yaml.tmp", "m/pod.yaml")), "pod.yaml: default/p2"},
				{write("m/pod.yaml", "bad"), "pod.yaml: default/p2 !bad manifest"},
				{write("m/pod.yaml", "name: p3"), "pod.yaml: default/p3"},
				{remove("m/pod.yaml"), "!manifest file ROOT/m/pod.yaml does not exist"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.before != nil {
				tt.before(t, root)
			}
			decode := &countingDecoder{}
			d := NewDir(DirConfig{Path: filepath.Join(root, tt.path), Resync: time.Hour, Decode: decode.decode})
			r := start(t, d)
			for i, s := range tt.steps {
				if s.do != nil {
					s.do(t, root)
				}
				var got string
				ok := waitFor(t, 5*time.Second, func() bool {
					latest, ok := r.latest()
					got = summary(latest, root)
					return ok && got == s.want
				})
				if !ok {
					t.Fatalf("step %d: snapshot %q, want %q", i, got, s.want)
				}
			}
			snaps := r.all()
			if f, bad := hasIgnoredFile(snaps); bad && !strings.HasSuffix(tt.path, ".yaml") {
				t.Errorf("a snapshot lists %s", f)
			}
			for i := 1; i < len(snaps); i++ {
				if snaps[i].Source != d.Name() {
					t.Errorf("snapshot %d: Source = %q, want %q", i, snaps[i].Source, d.Name())
				}
			}
		})
	}
}
