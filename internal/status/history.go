package status

import (
	"fmt"
)

// maxHistory is how many changes of each kind of object (pods, ConfigMaps
// and Secrets, namespaces) the store keeps for watches that resume from a
// resource version.
const maxHistory = 4096

// Change is one change of an object in one of the store's histories.
type Change[T any] struct {
	// Rev is the store's revision this change made.
	Rev uint64
	// Type is WatchAdded, WatchModified or WatchDeleted.
	Type WatchEventType
	// Object is the object after the change; for a deletion, its last
	// state.
	Object T
}

// changeLog is the history of one kind of object: a ring of its latest
// changes, oldest first from next once full. Guarded by Store.mu.
type changeLog[T any] struct {
	// floor is the revision after which every change is in entries.
	floor   uint64
	entries []Change[T] // len <= maxHistory
	next    int         // index of the oldest entry once full
}

func newChangeLog[T any](start uint64) changeLog[T] {
	return changeLog[T]{floor: start}
}

// add keeps a change, forgetting the oldest one once the ring is full.
func (l *changeLog[T]) add(c Change[T]) {
	if len(l.entries) < maxHistory {
		l.entries = append(l.entries, c)
		return
	}
	l.floor = l.entries[l.next].Rev
	l.entries[l.next] = c
	l.next = (l.next + 1) % maxHistory
}

// changesSince returns the changes of l after rev, oldest first, each made with
// conv; current is the store's revision, beyond which no version is
// known.
func changesSince[T, U any](l *changeLog[T], rev, current uint64, conv func(Change[T]) U) ([]U, error) {
	if rev < l.floor || rev > current {
		return nil, fmt.Errorf("resource version %d (changes are kept from %d to %d): %w", rev, l.floor, current, ErrRevisionGone)
	}
	var out []U
	for i := range l.entries {
		if c := l.entries[(l.next+i)%len(l.entries)]; c.Rev > rev {
			out = append(out, conv(c))
		}
	}
	return out, nil
}

// copied is c with a deep copy of its object, for a caller that may
// change it.
func copied[T interface{ DeepCopy() T }](c Change[T]) Change[T] {
	c.Object = c.Object.DeepCopy()
	return c
}

// bump gives a change the store's next revision and returns it.
func (r *revisions) bump() uint64 {
	r.rev++
	return r.rev
}
