package sandbox

import (
	"context"
	"sync"

	"github.com/containerd/containerd/v2/core/containers"
)

// listBatcher shares listings of every container among the callers that
// want one at once, as every pod's worker does at a resync: each would
// otherwise have containerd scan every container for its own few (a
// label filter is no index), a cost in the square of the pods. A caller
// gets a listing that began after it asked, never one already under way,
// so what it reads is as fresh as a listing of its own. At most one
// listing runs at a time; the callers that arrive meanwhile wait for the
// next one, which serves them all.
type listBatcher struct {
	// mu guards the fields below.
	mu sync.Mutex
	// running is the listing under way; nil when none.
	running *listBatch
	// next is the listing to run after it, which callers join until it
	// starts; nil when none has been asked for.
	next *listBatch
}

// listBatch is one listing and the callers waiting for it.
type listBatch struct {
	done chan struct{} // closed once cs and err are set
	cs   []containers.Container
	err  error
}

// list returns the result of a call of do that began after list was
// called, shared with the other callers of the time. do must not depend
// on the caller's context: the first caller of a batch makes the call for
// all, whose wait ends with their own ctx.
func (l *listBatcher) list(ctx context.Context, do func() ([]containers.Container, error)) ([]containers.Container, error) {
	l.mu.Lock()
	b := l.next
	if b != nil { // a listing not begun yet: join it
		l.mu.Unlock()
		select {
		case <-b.done:
			return b.cs, b.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// Lead the next listing: it begins once the one under way is over,
	// and whoever comes meanwhile joins it.
	b = &listBatch{done: make(chan struct{})}
	l.next = b
	prev := l.running
	l.mu.Unlock()
	if prev != nil {
		<-prev.done // within its call's deadline
	}
	l.mu.Lock()
	l.next, l.running = nil, b
	l.mu.Unlock()
	b.cs, b.err = do()
	l.mu.Lock()
	l.running = nil
	l.mu.Unlock()
	close(b.done)
	return b.cs, b.err
}
