package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/containerd/containerd/v2/core/containers"
)

// gatedLister is a listing that holds each call until it is released, and
// names the containers it returns after the call's number.
type gatedLister struct {
	calls   int
	release chan struct{}
}

func (g *gatedLister) do() ([]containers.Container, error) {
	g.calls++
	n := g.calls
	<-g.release
	return []containers.Container{{ID: fmt.Sprintf("listing-%d", n)}}, nil
}

// TestListBatcher: callers that come while a listing is under way share
// the next one, which begins after they asked; one whose context ends
// stops waiting without ending it for the others.
func TestListBatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l listBatcher
		g := &gatedLister{release: make(chan struct{})}
		type result struct {
			who string
			id  string
			err error
		}
		results := make(chan result, 16)
		call := func(ctx context.Context, who string) {
			cs, err := l.list(ctx, g.do)
			r := result{who: who, err: err}
			if len(cs) == 1 {
				r.id = cs[0].ID
			}
			results <- r
		}
		go call(context.Background(), "first")
		synctest.Wait() // the first listing is under way
		const waiting = 10
		for i := range waiting {
			go call(context.Background(), fmt.Sprintf("waiter %d", i))
		}
		synctest.Wait() // one of them leads the next listing, which waits
		ctx, cancel := context.WithCancel(context.Background())
		go call(ctx, "cancelled")
		synctest.Wait()
		cancel()
		synctest.Wait()
		if r := <-results; r.who != "cancelled" || !errors.Is(r.err, context.Canceled) {
			t.Errorf("first result %+v, want the cancelled caller's context.Canceled", r)
		}

		g.release <- struct{}{} // the first listing ends; the next begins
		synctest.Wait()
		if r := <-results; r.who != "first" || r.id != "listing-1" || r.err != nil {
			t.Errorf("result %+v, want the first caller with listing-1", r)
		}
		g.release <- struct{}{}
		for range waiting {
			if r := <-results; r.id != "listing-2" || r.err != nil {
				t.Errorf("%s got %q, %v; want listing-2, begun after it asked", r.who, r.id, r.err)
			}
		}
		if g.calls != 2 {
			t.Errorf("%d listings for %d callers, want 2", g.calls, waiting+2)
		}

		// Alone, a caller lists at once.
		go call(context.Background(), "alone")
		synctest.Wait()
		g.release <- struct{}{}
		if r := <-results; r.id != "listing-3" || r.err != nil {
			t.Errorf("a caller alone got %q, %v; want listing-3", r.id, r.err)
		}
	})
}
