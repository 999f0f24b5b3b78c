package filewatch

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticlet/staticlet/internal/pod"
)

// maxRewalks bounds how often a path is fingerprinted again at once
// because the fingerprint found directories not watched yet.
const maxRewalks = 4

// dirWatcher is the part of fsnotify.Watcher the loop uses.
type dirWatcher interface {
	Add(path string) error
	Remove(path string) error
}

// loop is the goroutine of Run: it alone touches the fields below. It
// feeds the tracker file system events and fingerprints, keeps the
// watched directories to what the paths need, and sends the changes.
type loop struct {
	w   *Watcher
	fsw dirWatcher // nil when there is none: Resync alone sees changes
	t   *tracker
	lim limits

	// watches holds the watched directories, each with what it was when
	// its watch was added; nil once it was removed or renamed (stale).
	watches map[string]fs.FileInfo
	refs    map[string]map[string]bool // watched directory -> paths that need it
	dirsOf  map[string][]string        // path -> directories it needs
	queue   []pod.FileChange           // changes Changes has not taken yet

	// The problems last logged, so that each is logged once.
	pathProblems map[string]string // watched path -> why it is not fully compared
	dirProblems  map[string]string // directory -> why it is not watched
}

func newLoop(w *Watcher, fsw dirWatcher) *loop {
	return &loop{
		w:       w,
		fsw:     fsw,
		t:       newTracker(w.cfg.Debounce),
		lim:     limits{maxEntries: w.cfg.MaxEntries, maxBytes: w.cfg.MaxBytes},
		watches: map[string]fs.FileInfo{},
		refs:    map[string]map[string]bool{},
		dirsOf:  map[string][]string{},

		pathProblems: map[string]string{},
		dirProblems:  map[string]string{},
	}
}

// run is Run once the watcher is set up; events and errs may be nil.
func (l *loop) run(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error) error {
	resync := time.NewTicker(l.w.cfg.Resync)
	defer resync.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()

	l.apply(l.w.take(true))
	for {
		var send chan<- pod.FileChange
		var next pod.FileChange
		if len(l.queue) > 0 {
			send, next = l.w.out, l.queue[0]
		}
		var due <-chan time.Time
		if at, ok := l.t.next(); ok {
			timer.Reset(time.Until(at))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case send <- next:
			l.queue = l.queue[1:]
		case <-l.w.wake:
			l.apply(l.w.take(false))
		case done := <-l.w.syncs:
			l.apply(l.w.take(false))
			close(done)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			l.event(ev)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Events may have been lost (the queue overflowed).
			l.w.log.Warn("file system watcher", "err", err)
			l.t.touchAll(time.Now())
		case <-due:
			for _, path := range l.t.take(time.Now()) {
				l.refresh(path)
			}
		case <-resync.C:
			l.t.resync(time.Now())
		}
	}
}

// apply hands the tracker what Set changed: paths no one watches any
// more are forgotten, new ones fingerprinted for their baseline.
func (l *loop) apply(sets map[pod.Key][]pod.WatchTarget) {
	if len(sets) == 0 {
		return
	}
	for key, targets := range sets {
		added, removed := l.t.set(key, targets)
		for _, path := range removed {
			l.forget(path)
		}
		for _, path := range added {
			l.refresh(path)
		}
	}
	l.queue = slices.DeleteFunc(l.queue, func(c pod.FileChange) bool { return !l.t.watches(c) })
}

// event marks the paths an event may concern as due for a fingerprint:
// those that watch the directory it happened in, or the directory itself.
// Events are never trusted further than that: the fingerprint decides.
func (l *loop) event(ev fsnotify.Event) {
	if ev.Op == fsnotify.Chmod {
		// Modes and times are not content.
		return
	}
	name := filepath.Clean(ev.Name)
	if _, ok := l.watches[name]; ok && ev.Has(fsnotify.Remove|fsnotify.Rename) {
		// The watch went with the directory: mark it stale, so that the
		// next fingerprint watches whatever has the name now, even if it
		// reuses the inode number.
		l.watches[name] = nil
	}
	now := time.Now()
	for _, dir := range []string{filepath.Dir(name), name} {
		for path := range l.refs[dir] {
			l.t.touch(path, now)
		}
	}
}

// refresh fingerprints path, moves the watches to the directories it now
// needs, and queues the changes the tracker finds. A directory watched
// only after the listing may have changed in between: then path is
// fingerprinted again (a bounded number of times; Resync covers the rest).
func (l *loop) refresh(path string) {
	var snap snapshot
	var err error
	for i := 0; ; i++ {
		snap, err = fingerprint(path, l.lim)
		if !l.watch(path, snap.dirs) || i == maxRewalks {
			break
		}
	}
	problem := strings.Join(snap.problems, "; ")
	if err != nil {
		problem = err.Error()
	}
	l.report(l.pathProblems, path, problem, "watched path not fully compared", "watched path fully compared again")
	if err != nil {
		// Keep the last fingerprint: an unreadable path is no change.
		return
	}
	changes, gone := l.t.observe(path, snap.digest, time.Now())
	if gone {
		l.w.log.Info("watched path removed; the containers that mount it keep running and restart when it comes back with other content", "path", path)
	}
	for _, c := range changes {
		l.w.log.Debug("content changed", "pod", c.Pod, "container", c.Container, "path", c.Path)
		l.enqueue(c)
	}
}

// enqueue queues c for Changes, in place of an earlier change of the same
// container and path that is still waiting.
func (l *loop) enqueue(c pod.FileChange) {
	i := slices.IndexFunc(l.queue, func(q pod.FileChange) bool {
		return q.Pod == c.Pod && q.Container == c.Container && q.Path == c.Path
	})
	if i >= 0 {
		l.queue[i] = c
		return
	}
	l.queue = append(l.queue, c)
}

// watch makes path need exactly dirs, adding and removing watches, and
// reports whether it added one.
func (l *loop) watch(path string, dirs map[string]fs.FileInfo) bool {
	for _, dir := range l.dirsOf[path] {
		if _, ok := dirs[dir]; !ok {
			l.unref(dir, path)
		}
	}
	added := false
	list := make([]string, 0, len(dirs))
	for dir, info := range dirs {
		list = append(list, dir)
		if l.refs[dir] == nil {
			l.refs[dir] = map[string]bool{}
		}
		l.refs[dir][path] = true
		if l.ensure(dir, info) {
			added = true
		}
	}
	l.dirsOf[path] = list
	return added
}

// ensure watches dir, which was info when listed, unless it is watched
// already, and reports whether it added the watch.
func (l *loop) ensure(dir string, info fs.FileInfo) bool {
	if l.fsw == nil {
		return false
	}
	cur, ok := l.watches[dir]
	if ok && cur != nil && os.SameFile(cur, info) {
		return false
	}
	if ok {
		// Stale, or another directory under the same name. Fails
		// harmlessly when the watch already went with the directory.
		_ = l.fsw.Remove(dir)
		delete(l.watches, dir)
	}
	err := l.fsw.Add(dir)
	l.report(l.dirProblems, dir, errString(err), "cannot watch a directory, changes in it will be seen periodically", "watching a directory again")
	if err != nil {
		return false
	}
	l.watches[dir] = info
	return true
}

// unref drops path's need of dir, and dir's watch when no path needs it.
func (l *loop) unref(dir, path string) {
	delete(l.refs[dir], path)
	if len(l.refs[dir]) > 0 {
		return
	}
	delete(l.refs, dir)
	if _, ok := l.watches[dir]; ok {
		_ = l.fsw.Remove(dir)
		delete(l.watches, dir)
	}
	delete(l.dirProblems, dir)
}

// forget stops watching path.
func (l *loop) forget(path string) {
	for _, dir := range l.dirsOf[path] {
		l.unref(dir, path)
	}
	delete(l.dirsOf, path)
	delete(l.pathProblems, path)
}

// report logs the problem of name (kept in logged) when it appears or
// changes, and its end: once each, not at every fingerprint.
func (l *loop) report(logged map[string]string, name, problem, warn, fixed string) {
	prev := logged[name]
	switch {
	case problem == prev:
		return
	case problem != "":
		l.w.log.Warn(warn, "path", name, "every", l.w.cfg.Resync, "problem", problem)
	default:
		l.w.log.Info(fixed, "path", name)
	}
	if problem == "" {
		delete(logged, name)
	} else {
		logged[name] = problem
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var _ dirWatcher = (*fsnotify.Watcher)(nil)
