package images

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// fakeGCStore is a gcStore in memory: image records by name, the names
// containers were made from, and the image filesystem's usage.
type fakeGCStore struct {
	mu      sync.Mutex
	images  map[string]Info
	used    map[string]bool
	usage   fsUsage
	lists   int
	removed []string // names, in order
}

func (f *fakeGCStore) ListImages(context.Context) ([]Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []Info
	for _, img := range f.images {
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *fakeGCStore) containerImages(context.Context) (map[string]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for k, v := range f.used {
		out[k] = v
	}
	return out, nil
}

func (f *fakeGCStore) markUsed(_ context.Context, name string, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[name]; ok {
		img.LastUsed = at
		f.images[name] = img
	}
	return nil
}

func (f *fakeGCStore) removeImage(_ context.Context, name, digest string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[name]; ok && img.Digest == digest {
		delete(f.images, name)
		f.removed = append(f.removed, name)
	}
	return nil
}

func (f *fakeGCStore) imageFSUsage(context.Context) (fsUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usage, nil
}

func (f *fakeGCStore) removedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func (f *fakeGCStore) setUsed(name string, used bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used[name] = used
}

// newFakeGC is a GC of policy over store, every minute, its events kept.
func newFakeGC(policy GCPolicy, store *fakeGCStore) (*GC, *eventLog) {
	events := &eventLog{}
	gc := NewGC(GCConfig{Policy: policy, Period: time.Minute, Node: "n1", Events: events})
	gc.store = store
	return gc, events
}

// TestGCRun drives Run on a fake clock: nothing is looked at before the
// desired set and the import files are both known; then an image never
// used goes at once (staticlet has run longer than the maximum age), and
// an image whose last container went counts from the collection that saw
// it gone, and goes once unused for longer than the maximum age.
func TestGCRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		store := &fakeGCStore{
			images: map[string]Info{
				"never": {Name: "never", Digest: "sha256:1", Created: start.Add(-time.Hour)},
				"was":   {Name: "was", Digest: "sha256:2", Created: start.Add(-time.Hour)},
			},
			used: map[string]bool{"was": true},
		}
		policy := GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 99, MinAge: time.Minute, MaxAge: 2 * time.Minute}
		gc, events := newFakeGC(policy, store)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- gc.Run(ctx) }()

		time.Sleep(10 * time.Minute)
		gc.SetDesired(nil)
		synctest.Wait()
		store.mu.Lock()
		lists := store.lists
		store.mu.Unlock()
		if lists != 0 {
			t.Fatalf("images listed %d times before the import files were known, want none", lists)
		}
		gc.SetImportFiles(nil)
		synctest.Wait()
		if got := store.removedNames(); !slices.Equal(got, []string{"never"}) {
			t.Errorf("removed at the first collection %v, want [never]", got)
		}

		// The container of "was" goes between two collections: the one
		// after counts as its last use.
		time.Sleep(30 * time.Second)
		store.setUsed("was", false)
		time.Sleep(30 * time.Second) // the collection that sees it gone
		synctest.Wait()
		lastUse := time.Now()
		for len(store.removedNames()) < 2 {
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if since := time.Since(lastUse); since != 3*time.Minute {
			t.Errorf("was removed %v after the collection that saw its container gone, want 3m (the first collection past 2m)", since)
		}
		var reasons []string
		for _, e := range events.events {
			reasons = append(reasons, e.Reason+" "+e.Object)
		}
		if want := []string{"ImageGarbageCollected node/n1", "ImageGarbageCollected node/n1"}; !slices.Equal(reasons, want) {
			t.Errorf("events %v, want %v", reasons, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}

// TestGCCollectForSpace: over the high threshold, the least recently used
// image that may go goes first, kept ones never, and a FreeDiskSpaceFailed
// event says when what may go does not reach the low threshold.
func TestGCCollectForSpace(t *testing.T) {
	now := time.Now()
	const gib = 1 << 30
	// Names are full, as manifests' images normalize.
	info := func(name string, size int64, lastUsed time.Duration) Info {
		return Info{Name: "localhost/" + name + ":v1", Digest: "sha256:" + name, Size: size, Created: now.Add(-48 * time.Hour), LastUsed: now.Add(-lastUsed)}
	}
	tests := []struct {
		name        string
		available   int64
		wantRemoved []string
		wantFailed  bool
	}{
		{name: "under the threshold", available: 50 * gib},
		{name: "90% used: the oldest use goes", available: 10 * gib, wantRemoved: []string{"localhost/old:v1"}},
		{name: "99% used: all that may go is not enough", available: 1 * gib, wantRemoved: []string{"localhost/old:v1", "localhost/newer:v1"}, wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeGCStore{
				images: map[string]Info{
					"localhost/old:v1":     info("old", 15*gib, 3*time.Hour),
					"localhost/newer:v1":   info("newer", 2*gib, time.Hour),
					"localhost/running:v1": info("running", 30*gib, 5*time.Hour),
					"localhost/named:v1":   info("named", 30*gib, 5*time.Hour),
				},
				used:  map[string]bool{"localhost/running:v1": true},
				usage: fsUsage{Capacity: 100 * gib, Available: tt.available},
			}
			gc, events := newFakeGC(DefaultGCPolicy(), store)
			var collected []string
			gc.cfg.Collected = func(reason string, bytes int64) { collected = append(collected, fmt.Sprint(reason, bytes/gib)) }
			gc.SetDesired([]*pod.Pod{{Pod: &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Image: "localhost/named:v1"}}}}}})
			if err := gc.collect(t.Context(), now.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			if got := store.removedNames(); !slices.Equal(got, tt.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tt.wantRemoved)
			}
			if len(collected) != len(tt.wantRemoved) {
				t.Errorf("collected %v, want one for each removal", collected)
			}
			failed := slices.ContainsFunc(events.events, func(e pod.Event) bool { return e.Reason == ReasonFreeDiskSpaceFailed })
			if failed != tt.wantFailed {
				t.Errorf("FreeDiskSpaceFailed = %v, want %v (events %+v)", failed, tt.wantFailed, events.events)
			}
		})
	}
}
