package filewatch

import (
	"cmp"
	"path/filepath"
	"slices"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// maxWaitFactor bounds how long a path written to without pause waits for
// its fingerprint: at most this many Debounce periods after the first event
// of a burst.
const maxWaitFactor = 10

// tracker is the decision part of the watcher, with no I/O and no clock:
// who watches which path, when each path is due to be fingerprinted again,
// and which new fingerprint is a change for whom. The loop feeds it events
// and fingerprints, with the time, and does what it says.
type tracker struct {
	debounce time.Duration
	maxWait  time.Duration // bound on a burst's wait, from its first event
	paths    map[string]*pathState
	pods     map[pod.Key]map[mount]struct{}
}

// mount is a path one container of a pod mounts.
type mount struct {
	container string
	path      string
}

// subscriber is a container that mounts a path.
type subscriber struct {
	pod       pod.Key
	container string
}

// pathState is what the tracker knows of one watched path.
type pathState struct {
	subs map[subscriber]struct{}
	// known is set once a fingerprint was taken: the first one is the
	// baseline, not a change.
	known bool
	cur   digest // the last fingerprint
	// last is the last fingerprint of the path while it existed: a path
	// that comes back is compared with it.
	last digest
	// due is when the path is to be fingerprinted again, zero when
	// nothing is pending; burst is when the pending burst of events began.
	due, burst time.Time
}

func newTracker(debounce time.Duration) *tracker {
	return &tracker{
		debounce: debounce,
		maxWait:  maxWaitFactor * debounce,
		paths:    map[string]*pathState{},
		pods:     map[pod.Key]map[mount]struct{}{},
	}
}

// set makes pod key watch exactly targets, and returns the paths that no
// one watched before (to fingerprint for a baseline and to watch) and
// those that no one watches any more (to forget), each sorted.
func (t *tracker) set(key pod.Key, targets []pod.WatchTarget) (added, removed []string) {
	want := make(map[mount]struct{}, len(targets))
	for _, tg := range targets {
		want[mount{tg.Container, filepath.Clean(tg.Path)}] = struct{}{}
	}
	old := t.pods[key]
	for m := range old {
		if _, ok := want[m]; ok {
			continue
		}
		ps := t.paths[m.path]
		delete(ps.subs, subscriber{key, m.container})
		if len(ps.subs) == 0 {
			delete(t.paths, m.path)
			removed = append(removed, m.path)
		}
	}
	for m := range want {
		if _, ok := old[m]; ok {
			continue
		}
		ps := t.paths[m.path]
		if ps == nil {
			ps = &pathState{subs: map[subscriber]struct{}{}}
			t.paths[m.path] = ps
			added = append(added, m.path)
		}
		ps.subs[subscriber{key, m.container}] = struct{}{}
	}
	if len(want) == 0 {
		delete(t.pods, key)
	} else {
		t.pods[key] = want
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// watches reports whether c's container still watches c's path.
func (t *tracker) watches(c pod.FileChange) bool {
	_, ok := t.pods[c.Pod][mount{c.Container, c.Path}]
	return ok
}

// touch notes, at now, an event that may have changed path: it is due
// Debounce after the last such event, and at most maxWait after the first
// of the burst.
func (t *tracker) touch(path string, now time.Time) {
	ps := t.paths[path]
	if ps == nil {
		return
	}
	if ps.due.IsZero() {
		ps.burst = now
	}
	ps.due = minTime(now.Add(t.debounce), ps.burst.Add(t.maxWait))
}

// touchAll touches every path, when events may have been lost.
func (t *tracker) touchAll(now time.Time) {
	for path := range t.paths {
		t.touch(path, now)
	}
}

// resync makes every path with nothing pending due now; a path in a burst
// keeps waiting for it to settle.
func (t *tracker) resync(now time.Time) {
	for _, ps := range t.paths {
		if ps.due.IsZero() {
			ps.due, ps.burst = now, now
		}
	}
}

// next returns when the earliest pending path is due; false when none is.
func (t *tracker) next() (time.Time, bool) {
	var at time.Time
	for _, ps := range t.paths {
		if !ps.due.IsZero() && (at.IsZero() || ps.due.Before(at)) {
			at = ps.due
		}
	}
	return at, !at.IsZero()
}

// take returns the paths due at now, the earliest due first (then by
// name), and clears their due time: the caller fingerprints them and calls
// observe. The order keeps changes in the order of the events behind them.
func (t *tracker) take(now time.Time) []string {
	var due []string
	for path, ps := range t.paths {
		if !ps.due.IsZero() && !ps.due.After(now) {
			due = append(due, path)
		}
	}
	slices.SortFunc(due, func(a, b string) int {
		return cmp.Or(t.paths[a].due.Compare(t.paths[b].due), cmp.Compare(a, b))
	})
	for _, path := range due {
		t.paths[path].due = time.Time{}
	}
	return due
}

// observe records fingerprint d of path, taken at now, and returns the
// changes it makes, one per container that mounts path (sorted), and
// whether the path has just gone away. The first fingerprint of a path is
// its baseline; after it, a change is a path that exists with content
// other than it last had while it existed (see the package doc).
func (t *tracker) observe(path string, d digest, now time.Time) (changes []pod.FileChange, gone bool) {
	ps := t.paths[path]
	if ps == nil {
		return nil, false
	}
	prev, known := ps.cur, ps.known
	ps.cur, ps.known = d, true
	if !d.present {
		return nil, known && prev.present
	}
	changed := known && d != ps.last
	ps.last = d
	if !changed {
		return nil, false
	}
	for s := range ps.subs {
		changes = append(changes, pod.FileChange{Pod: s.pod, Container: s.container, Path: path, Time: now})
	}
	slices.SortFunc(changes, func(a, b pod.FileChange) int {
		return cmp.Or(cmp.Compare(a.Pod.String(), b.Pod.String()), cmp.Compare(a.Container, b.Container))
	})
	return changes, false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
