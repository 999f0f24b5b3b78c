// Package images owns the node's images. Its Store finds, pulls (with
// registry credentials and mirrors, package registry), takes from other
// containerd namespaces, imports, lists and unpacks the images of
// staticlet's containerd namespace, for package sandbox, which runs them.
//
// Its Dir owns the image import directory: the archives (docker save
// or OCI image layout tars, plain, gzip or zstd) and OCI image layout
// directories that an air-gapped node gets its images from. It imports each
// file once, at start and whenever one appears or changes, through an
// Importer it declares (a Store, in staticlet), and reports per file what
// it imported or why it could not.
//
// A file is known by the sha256 of its content: a file whose digest was
// imported before, under any name, is not imported again, also after a
// restart, since the records are kept in a state file. Like the manifest
// source, it watches the directory (never the files), lists it in full
// after a burst of events has settled and every Resync, and ignores hidden
// files and the temporary names of writers that rename into place.
//
// Its GC is the node's image garbage collection, with the kubelet's
// settings: it removes the images no container uses, no current manifest
// names and no import file holds, by age and for space, and records in
// containerd (LabelLastUsed) when each was last used. Which images to
// remove is decided by a pure function (planGC).
//
// Dir's and GC's Run own their goroutines; AwaitIdle, GC's setters and
// Images may be called from any goroutine. A Store is safe for
// concurrent use and starts no goroutine.
package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Defaults for Config.
const (
	DefaultResync = 20 * time.Second
	DefaultSettle = time.Second
)

// Importer imports image archives; a Store is one, through cmd/staticlet.
type Importer interface {
	// ImportArchive imports the images of an archive (a tar stream,
	// possibly compressed) and returns their full names; source names
	// the file it came from.
	ImportArchive(ctx context.Context, r io.Reader, source string) ([]string, error)
	// HasImage reports whether the image called name is present.
	HasImage(ctx context.Context, name string) (bool, error)
}

// Config configures a Dir.
type Config struct {
	// Path is the import directory; it is created if missing.
	Path string
	// StateFile records the digests of the files imported, with their
	// images; it must not be inside Path.
	StateFile string
	// Importer imports the archives. Required.
	Importer Importer
	// Resync is how often the directory is listed in full without events,
	// and failed files tried again. Default DefaultResync.
	Resync time.Duration
	// Settle is how long a file must have been left unchanged before it is
	// read, so that one still being written is not imported half-written.
	// Default DefaultSettle.
	Settle time.Duration
	// Logger receives watch problems. Default: discard.
	Logger *slog.Logger
}

// FileResult is what became of one file of the import directory.
type FileResult struct {
	// Path is the file's path.
	Path string
	// Digest is the sha256 of its content ("sha256:..."), or for a layout
	// directory, of the tar stream imported from it.
	Digest string
	// Images are the names of the images it holds, once imported.
	Images []string
	// Time is when it was imported, or when the import failed.
	Time time.Time
	// Error says why it could not be imported; empty when it was.
	Error string
	// Earlier names the file the same content was imported from before,
	// when it was not imported again for this one.
	Earlier string
}

// Update is what one listing of the directory found.
type Update struct {
	// Files are the results of every file now in the directory.
	Files []FileResult
	// Done are the files imported or failed by this listing.
	Done []FileResult
}

// Dir imports the files of the import directory. Construct it with New.
type Dir struct {
	cfg   Config
	log   *slog.Logger
	state *stateFile

	// mu guards busy and idle: the gate AwaitIdle waits on.
	mu   sync.Mutex
	busy bool
	idle chan struct{} // closed when busy turns false

	// Owned by Run's goroutine.
	files  map[string]*fileState // by path
	listed bool                  // the directory has been listed once
	done   []FileResult          // imported or failed since the last Update
}

type fileState struct {
	stamp  stamp
	result FileResult
}

// New returns a Dir for cfg, with defaults filled in. It starts nothing, but
// is busy from the start: AwaitIdle waits for the first listing of Run,
// so that no pod pulls or gives up on an image a file at start holds.
func New(cfg Config) *Dir {
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dir{
		cfg:   cfg,
		log:   log.With("import-dir", cfg.Path),
		state: &stateFile{path: cfg.StateFile},
		busy:  true,
		idle:  make(chan struct{}),
		files: map[string]*fileState{},
	}
}

// AwaitIdle blocks while the directory has files being imported, or events
// not yet looked at, or ctx ends; it reports whether it had to wait.
func (d *Dir) AwaitIdle(ctx context.Context) bool {
	d.mu.Lock()
	busy, idle := d.busy, d.idle
	d.mu.Unlock()
	if !busy {
		return false
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
	return true
}

func (d *Dir) setBusy(busy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case busy && !d.busy:
		d.idle = make(chan struct{})
	case !busy && d.busy:
		close(d.idle)
	}
	d.busy = busy
}

// Run creates the directory, imports what it holds, sends an Update on out
// for the first listing and for each later one that imported or failed a
// file or saw one go, until ctx ends. It returns an error only when it
// cannot run at all.
func (d *Dir) Run(ctx context.Context, out chan<- Update) error {
	defer d.setBusy(false)
	if d.cfg.Importer == nil {
		return fmt.Errorf("running image import directory %s: no importer", d.cfg.Path)
	}
	if err := os.MkdirAll(d.cfg.Path, 0o755); err != nil {
		return fmt.Errorf("creating image import directory: %w", err)
	}
	if err := d.state.load(); err != nil {
		// Files are imported again: harmless, only slower.
		d.log.Warn("reading the records of imported images; importing again", "err", err)
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(d.cfg.Path)
	}
	if err != nil {
		d.log.Warn("cannot watch the image import directory, listing it every resync", "every", d.cfg.Resync, "err", err)
	} else {
		events, errs = w.Events, w.Errors
	}
	if w != nil {
		defer w.Close()
	}

	resync := time.NewTicker(d.cfg.Resync)
	defer resync.Stop()
	// later is armed while a listing is due: the first one at once, then
	// Settle/4 after the first event of a burst (not pushed back by more
	// events, so a file written non-stop cannot hold the listing off).
	later := time.NewTimer(0)
	defer later.Stop()
	pending, retryFailed := true, true
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Dir(filepath.Clean(ev.Name)) == filepath.Clean(d.cfg.Path) && !pending {
				// Pods missing an image wait for what this may bring.
				d.setBusy(true)
				later.Reset(d.cfg.Settle / 4)
				pending = true
			}
			continue
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			d.log.Warn("image import directory watcher; listing again", "err", err)
			later.Reset(0)
			pending = true
			continue
		case <-resync.C:
			retryFailed = true
		case <-later.C:
			pending = false
		}
		u, unsettled := d.pass(ctx, retryFailed)
		retryFailed = false
		if unsettled > 0 {
			// Still busy: look again once the file may have settled.
			later.Reset(unsettled)
			pending = true
		} else if !pending {
			d.setBusy(false)
		}
		if u == nil {
			continue
		}
		select {
		case out <- *u:
		case <-ctx.Done():
			return nil
		}
	}
}

// pass lists the directory and imports the files that need it. It returns
// an Update when something changed (always on the first pass that found
// every file settled), and, when a file was left because it changed too
// recently, how long until it may have settled.
func (d *Dir) pass(ctx context.Context, retryFailed bool) (*Update, time.Duration) {
	first := !d.listed
	entries, err := os.ReadDir(d.cfg.Path)
	if err != nil {
		d.log.Warn("listing the image import directory", "err", err)
		return nil, 0
	}
	changed := first
	var unsettled time.Duration
	present := map[string]bool{}
	now := time.Now()
	for _, e := range entries {
		if ignored(e.Name()) {
			continue
		}
		path := filepath.Join(d.cfg.Path, e.Name())
		st, err := stampOf(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the listing, or a dangling symlink
		}
		present[path] = true
		if err != nil {
			if cur := d.files[path]; cur == nil || cur.result.Error != err.Error() {
				r := FileResult{Path: path, Time: now, Error: err.Error()}
				d.files[path] = &fileState{result: r}
				d.done, changed = append(d.done, r), true
			}
			continue
		}
		if wait := st.newest.Add(d.cfg.Settle).Sub(now); wait > 0 {
			unsettled = max(unsettled, wait)
			continue
		}
		cur := d.files[path]
		if cur != nil && cur.stamp == st && (cur.result.Error == "" || !retryFailed) {
			continue
		}
		r, imported := d.importFile(ctx, path, st)
		if ctx.Err() != nil {
			return nil, 0
		}
		if cur != nil && cur.result.Error != "" && r.Error == cur.result.Error && r.Digest == cur.result.Digest {
			// The same failure again: no news.
			cur.stamp = st
			continue
		}
		d.files[path] = &fileState{stamp: st, result: r}
		changed = true
		if imported || r.Error != "" {
			d.done = append(d.done, r)
		}
	}
	for path := range d.files {
		if !present[path] {
			delete(d.files, path)
			changed = true
		}
	}
	if first && unsettled > 0 {
		// The first Update is the whole directory as it was at start.
		return nil, unsettled
	}
	d.listed = true
	if !changed {
		return nil, unsettled
	}
	u := &Update{Files: d.results(), Done: d.done}
	d.done = nil
	return u, unsettled
}

// importFile imports the file at path unless its content was imported
// before and its images are still there; it reports whether it imported.
func (d *Dir) importFile(ctx context.Context, path string, st stamp) (FileResult, bool) {
	r := FileResult{Path: path, Time: time.Now()}
	digest, err := digestOf(path, st)
	if err != nil {
		r.Error = err.Error()
		return r, false
	}
	r.Digest = digest
	if rec, ok := d.state.records[digest]; ok && d.present(ctx, rec.Images) {
		r.Images, r.Time = rec.Images, rec.Time
		if rec.File != filepath.Base(path) {
			r.Earlier = rec.File
		}
		return r, false
	}
	d.setBusy(true)
	rd, err := open(path, st)
	if err != nil {
		r.Error = err.Error()
		return r, false
	}
	names, err := d.cfg.Importer.ImportArchive(ctx, rd, filepath.Base(path))
	if cerr := rd.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("reading %s: %w", path, cerr)
	}
	r.Time = time.Now()
	if err != nil {
		r.Error = err.Error()
		return r, false
	}
	r.Images = names
	d.state.records[digest] = record{File: filepath.Base(path), Images: names, Time: r.Time}
	if err := d.state.save(); err != nil {
		d.log.Warn("saving the records of imported images", "err", err)
	}
	return r, true
}

// present reports whether every image named is still in the runtime, so
// that an image removed since is imported again.
func (d *Dir) present(ctx context.Context, names []string) bool {
	for _, n := range names {
		ok, err := d.cfg.Importer.HasImage(ctx, n)
		if err != nil {
			d.log.Warn("looking for an imported image", "image", n, "err", err)
			return true // not knowing is not missing
		}
		if !ok {
			return false
		}
	}
	return true
}

func (d *Dir) results() []FileResult {
	out := make([]FileResult, 0, len(d.files))
	for _, f := range d.files {
		r := f.result
		r.Images = slices.Clone(r.Images)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b FileResult) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// ignored reports whether a directory entry is no image file: hidden files,
// where writers put what they rename into place, and editors' and
// downloaders' leftovers.
func ignored(name string) bool {
	return strings.HasPrefix(name, ".") ||
		strings.HasSuffix(name, "~") ||
		strings.HasSuffix(name, ".tmp") ||
		strings.HasSuffix(name, ".part") ||
		strings.Contains(name, ".dpkg-")
}
