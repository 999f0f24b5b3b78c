package filewatch

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticlet/staticlet/internal/pod"
)

// Defaults for Config.
const (
	DefaultDebounce   = 500 * time.Millisecond
	DefaultResync     = 20 * time.Second
	DefaultMaxEntries = 4096
	DefaultMaxBytes   = 16 << 20
)

// Config configures a Watcher.
type Config struct {
	// Debounce is how long a path must see no event before it is
	// fingerprinted again, so that a burst of writes gives one change.
	// Default DefaultDebounce.
	Debounce time.Duration
	// Resync is how often every path is fingerprinted again without
	// events. Default DefaultResync.
	Resync time.Duration
	// MaxEntries and MaxBytes bound a fingerprint: the entries of a
	// directory tree listed, and the bytes of content read, per watched
	// path. Defaults DefaultMaxEntries and DefaultMaxBytes.
	MaxEntries int
	MaxBytes   int64
	// Logger receives what cannot be watched or read (once each), and
	// each change at debug level. Default: discard.
	Logger *slog.Logger
}

// Watcher watches the paths containers mount and reports changes to their
// content. See the package doc.
type Watcher struct {
	cfg     Config
	log     *slog.Logger
	out     chan pod.FileChange
	wake    chan struct{}      // a Set is waiting for Run's goroutine
	syncs   chan chan struct{} // see sync
	running atomic.Bool

	// mu guards the fields below.
	mu      sync.Mutex
	desired map[pod.Key][]pod.WatchTarget // what Set was last told, per pod
	dirty   map[pod.Key]bool              // pods Run's goroutine has not taken up yet
}

// New returns a Watcher for cfg, with defaults filled in. It starts
// nothing.
func New(cfg Config) *Watcher {
	orDefault(&cfg.Debounce, DefaultDebounce)
	orDefault(&cfg.Resync, DefaultResync)
	orDefault(&cfg.MaxEntries, DefaultMaxEntries)
	orDefault(&cfg.MaxBytes, DefaultMaxBytes)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		cfg:     cfg,
		log:     cfg.Logger,
		out:     make(chan pod.FileChange),
		wake:    make(chan struct{}, 1),
		syncs:   make(chan chan struct{}),
		desired: map[pod.Key][]pod.WatchTarget{},
		dirty:   map[pod.Key]bool{},
	}
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Changes is where the Watcher reports a change to the content of a path,
// once per container that mounts it. The consumer must keep reading it
// while Run runs; changes wait for it meanwhile (one per container and
// path). A change for a path that Set has since taken away from the
// container is dropped.
func (w *Watcher) Changes() <-chan pod.FileChange { return w.out }

// Set makes the Watcher watch exactly targets for pod key: paths no longer
// among them stop being watched, and a new one is fingerprinted for the
// baseline that later changes are measured against. An empty list stops
// watching the pod. Set is idempotent, cheap when nothing changed, never
// blocks on Run, and is safe to call from any goroutine, before Run too.
func (w *Watcher) Set(key pod.Key, targets []pod.WatchTarget) {
	w.mu.Lock()
	if slices.Equal(w.desired[key], targets) {
		w.mu.Unlock()
		return
	}
	if len(targets) == 0 {
		delete(w.desired, key)
	} else {
		w.desired[key] = slices.Clone(targets)
	}
	w.dirty[key] = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// take returns the pods Set changed since the last take (every pod, when
// all is set), with their targets, nil for a pod no longer watched.
func (w *Watcher) take(all bool) map[pod.Key][]pod.WatchTarget {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[pod.Key][]pod.WatchTarget, len(w.dirty))
	for key := range w.dirty {
		out[key] = w.desired[key]
	}
	if all {
		for key, targets := range w.desired {
			out[key] = targets
		}
	}
	clear(w.dirty)
	return out
}

// sync returns once Run's goroutine has taken up every Set made before it
// (the new paths fingerprinted and watched), or ctx ends. Tests use it as a
// barrier before changing files.
func (w *Watcher) sync(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case w.syncs <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run watches the paths Set names until ctx ends, and returns nil once
// everything it started has stopped. It returns an error only when it
// cannot run at all.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("running the file watcher: already running")
	}
	defer w.running.Store(false)

	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		// Typically the inotify instance limit: changes are still seen,
		// every Resync.
		w.log.Warn("cannot watch mounted files, checking them periodically instead", "every", w.cfg.Resync, "err", err)
		return newLoop(w, nil).run(ctx, nil, nil)
	}
	defer func() {
		// Close waits for fsnotify's goroutine to exit.
		if err := fsw.Close(); err != nil {
			w.log.Debug("closing the file system watcher", "err", err)
		}
	}()
	return newLoop(w, fsw).run(ctx, fsw.Events, fsw.Errors)
}
