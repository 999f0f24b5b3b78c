package watch

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticlet/staticlet/internal/pod"
)

// Defaults for DirConfig.
const (
	DefaultResync      = 20 * time.Second
	DefaultDebounce    = 100 * time.Millisecond
	DefaultMaxFileSize = 10 << 20
)

// maxWaitFactor bounds how long a never-ending stream of events (a program
// writing into the manifest directory non-stop) can delay a listing: at most
// this many Debounce periods after the first event of a burst.
const maxWaitFactor = 10

// Decoder turns one file's bytes into the pods and objects it defines; it
// is pod.DecodeFile with its options bound. A source calls it from its Run
// goroutine only.
type Decoder func(path string, data []byte) (*pod.Manifest, error)

// DirConfig configures a directory source.
type DirConfig struct {
	// Path is a directory of manifests or a single manifest file, as the
	// kubelet's staticPodPath.
	Path string
	// Resync is how often the source is listed in full even without events.
	// Default DefaultResync.
	Resync time.Duration
	// Debounce is how long the source waits after the last file system event
	// before listing, so that a burst of events gives one snapshot. Default
	// DefaultDebounce.
	Debounce time.Duration
	// QuietDebounce replaces Debounce for a burst with no file removed or
	// renamed: a new or rewritten file can be applied sooner, while a
	// removal waits the full Debounce so that an editor's rename-and-write
	// never looks like a deleted pod. Default: Debounce.
	QuietDebounce time.Duration
	// MaxFileSize is the largest manifest file read, in bytes; a larger file
	// is rejected unread. Default DefaultMaxFileSize.
	MaxFileSize int64
	// Decode decodes a file's content. Required.
	Decode Decoder
	// Logger receives file errors (once each) and watch problems. Default:
	// discard.
	Logger *slog.Logger
}

// Dir is the directory source: it sends a Snapshot of the manifests under a
// path whenever they change. It watches directories only, never files: the
// directory and its parent (for a single file, the parent; for a missing
// path, the nearest existing ancestor). It never trusts an event's details:
// any relevant event leads to a full listing, Debounce after the last event,
// and a full listing also runs every Resync. A symlink's target outside the
// directory is followed when listing but not watched: a change there is seen
// at the next resync.
type Dir struct {
	cfg     DirConfig
	path    string // cfg.Path, cleaned
	name    string
	log     *slog.Logger
	running atomic.Bool

	// The fields below belong to the goroutine in Run.
	files    map[string]*fileState  // by path
	gen      uint64                 // last generation handed out
	isFile   bool                   // path was last seen as a regular file
	watches  map[string]fs.FileInfo // watched directory -> what it was when added
	watchErr string                 // last watch error logged
	srcErr   string                 // last source error logged
}

// NewDir returns a directory source for cfg, with defaults filled in. It
// starts nothing.
func NewDir(cfg DirConfig) *Dir {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.QuietDebounce <= 0 || cfg.QuietDebounce > cfg.Debounce {
		cfg.QuietDebounce = cfg.Debounce
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := filepath.Clean(cfg.Path)
	name := "dir:" + path
	return &Dir{
		cfg:     cfg,
		path:    path,
		name:    name,
		log:     log.With("source", name),
		files:   make(map[string]*fileState),
		watches: make(map[string]fs.FileInfo),
	}
}

// Name returns the source's name, "dir:" and the cleaned path, as in the
// snapshots it sends.
func (d *Dir) Name() string { return d.name }

// Run lists the source, sends the first snapshot as soon as out takes it,
// then sends a new snapshot whenever the view changes (never one equal to the
// previous). If the receiver is slow, only the newest snapshot waits for it.
// Run returns nil once ctx is done, after everything it started has stopped;
// it returns an error only when it cannot run at all.
func (d *Dir) Run(ctx context.Context, out chan<- Snapshot) error {
	if d.cfg.Decode == nil {
		return fmt.Errorf("running %s: no decoder configured", d.name)
	}
	if !d.running.CompareAndSwap(false, true) {
		return fmt.Errorf("running %s: already running", d.name)
	}
	defer d.running.Store(false)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		// Typically the inotify instance limit. Listing every Resync still
		// converges, only slower.
		d.log.Warn("cannot watch manifests, polling instead", "every", d.cfg.Resync, "err", err)
		return d.loop(ctx, out, pollOnly{}, nil, nil)
	}
	defer func() {
		// Close waits for the watcher's goroutine to exit.
		if cerr := w.Close(); cerr != nil {
			d.log.Debug("closing file system watcher", "err", cerr)
		}
	}()
	return d.loop(ctx, out, w, w.Events, w.Errors)
}

// dirWatcher is the part of fsnotify.Watcher the loop uses to move its watch.
type dirWatcher interface {
	Add(path string) error
	Remove(path string) error
}

// pollOnly stands in for a watcher that could not be created.
type pollOnly struct{}

func (pollOnly) Add(string) error    { return nil }
func (pollOnly) Remove(string) error { return nil }

// loop is Run after the watcher is set up; events and errs may be nil.
func (d *Dir) loop(ctx context.Context, out chan<- Snapshot, w dirWatcher, events <-chan fsnotify.Event, errs <-chan error) error {
	resync := time.NewTicker(d.cfg.Resync)
	defer resync.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()

	var (
		due        <-chan time.Time // debounce.C while a listing is due; nil otherwise
		burstStart time.Time        // first event of the pending burst
		removal    bool             // the pending burst removed or renamed something
		pending    *Snapshot        // newest snapshot not yet taken by out
		pendingVer snapVersion
		sentVer    snapVersion
		sentAny    bool
	)
	// offer queues snap unless it equals what the receiver already has. A
	// queued but untaken snapshot is replaced, so a slow receiver only ever
	// sees the newest view.
	offer := func(snap Snapshot) {
		d.logSourceErr(snap.Err)
		v := d.version(snap)
		if sentAny && v.equal(sentVer) {
			pending = nil
			return
		}
		pending, pendingVer = &snap, v
	}
	arm := func(removes bool) {
		now := time.Now()
		if due == nil {
			burstStart, removal = now, false
		}
		removal = removal || removes
		wait := d.cfg.QuietDebounce
		if removal {
			wait = d.cfg.Debounce
		}
		delay := min(wait, burstStart.Add(maxWaitFactor*d.cfg.Debounce).Sub(now))
		debounce.Reset(max(delay, 0))
		due = debounce.C
	}

	offer(d.rescan(w))
	for {
		var send chan<- Snapshot
		var next Snapshot
		if pending != nil {
			send, next = out, *pending
		}
		select {
		case <-ctx.Done():
			return nil
		case send <- next:
			sentVer, sentAny, pending = pendingVer, true, nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			name := filepath.Clean(ev.Name)
			if _, ok := d.watches[name]; ok && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// The watch went with the directory. Mark it stale so that the
				// next listing replaces it, even if a new directory under the
				// old name reuses the old inode number.
				d.watches[name] = nil
			}
			if d.relevant(name) {
				// Renaming a temporary file over a manifest is an atomic
				// write, not a removal: only a manifest's own name going away
				// needs the longer wait.
				arm(ev.Has(fsnotify.Remove|fsnotify.Rename) && !ignored(filepath.Base(name)))
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Events may have been lost (queue overflow): list again.
			d.log.Warn("file system watcher", "err", err)
			arm(true)
		case <-due:
			due = nil
			offer(d.rescan(w))
		case <-resync.C:
			offer(d.rescan(w))
		}
	}
}

// rescan points the watch at the right directory and lists the source.
func (d *Dir) rescan(w dirWatcher) Snapshot {
	// Watch first, then list, so that a change during the listing makes an
	// event. If the listing raced with the creation of the directory (or of a
	// directory on the way to it), the watch is still on an ancestor: move it
	// down and list again. Bounded, in case the path keeps changing.
	d.ensureWatch(w)
	snap := d.scan()
	for range 8 {
		if !d.ensureWatch(w) {
			break
		}
		snap = d.scan()
	}
	return snap
}

// ensureWatch makes the watcher watch the directories that can change the
// source (see watchTargets), and only those. It reports whether it added a
// watch.
func (d *Dir) ensureWatch(w dirWatcher) bool {
	want := watchTargets(d.path)
	for dir, info := range d.watches {
		if cur, ok := want[dir]; !ok || info == nil || !os.SameFile(cur, info) {
			// Fails harmlessly when the watch already went with the directory.
			_ = w.Remove(dir)
			delete(d.watches, dir)
		}
	}
	added := false
	for dir, info := range want {
		if _, ok := d.watches[dir]; ok {
			continue
		}
		if err := w.Add(dir); err != nil {
			// Retried on every listing; logged once.
			if msg := err.Error(); msg != d.watchErr {
				d.watchErr = msg
				d.log.Warn("cannot watch manifest directory, changes will be seen every resync",
					"dir", dir, "every", d.cfg.Resync, "err", err)
			}
			continue
		}
		d.log.Debug("watching", "dir", dir)
		d.watches[dir] = info
		added = true
	}
	if added && d.watchErr != "" && len(d.watches) == len(want) {
		d.watchErr = ""
		d.log.Info("watching manifests again")
	}
	return added
}

// watchTargets returns the directories to watch for path, with their info:
// path itself if it is a directory (its entries), and the nearest existing
// ancestor of its parent: the parent sees path replaced (a rename, a
// retargeted symlink, a single file rewritten), an ancestor further up sees
// the missing directories on the way appear.
func watchTargets(path string) map[string]fs.FileInfo {
	targets := make(map[string]fs.FileInfo, 2)
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		targets[path] = info
	}
	for dir := path; ; {
		parent := filepath.Dir(dir)
		if parent == dir {
			return targets
		}
		dir = parent
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			targets[dir] = info
			return targets
		}
	}
}

// relevant reports whether an event about name (cleaned) can change the
// source: the path itself, an entry of it, or a directory on the way to it.
// Names the listing ignores still count, since an atomic writer may swap a
// hidden directory that visible symlinks point into.
func (d *Dir) relevant(name string) bool {
	return name == d.path || filepath.Dir(name) == d.path || isAncestor(name, d.path)
}

// isAncestor reports whether dir is a proper ancestor of path.
func isAncestor(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// missing returns the source error for a path that does not exist.
func (d *Dir) missing() error {
	what := "directory"
	switch strings.ToLower(filepath.Ext(d.path)) {
	case ".yaml", ".yml", ".json":
		what = "file"
	}
	if d.isFile {
		what = "file"
	}
	return &notExistError{fmt.Sprintf("manifest %s %s does not exist", what, d.path)}
}

// notExistError is a missing path, for errors.Is(err, fs.ErrNotExist).
type notExistError struct{ msg string }

func (e *notExistError) Error() string { return e.msg }
func (e *notExistError) Unwrap() error { return fs.ErrNotExist }

// logSourceErr logs a source error when it appears or changes, and its end.
func (d *Dir) logSourceErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == d.srcErr:
	case msg != "":
		d.log.Warn("manifest source unusable", "err", err)
	default:
		d.log.Info("manifest source usable again")
	}
	d.srcErr = msg
}

var _ dirWatcher = (*fsnotify.Watcher)(nil)
