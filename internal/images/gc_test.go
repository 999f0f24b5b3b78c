package images

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/lease"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// eventLog is an EventSink keeping what it is told.
type eventLog struct {
	mu     sync.Mutex
	events []pod.Event
}

func (l *eventLog) Event(e pod.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// TestGCRemovesOldUnusedImage runs a collection against a real containerd
// with imageMaximumGCAge 1m, every image last used an hour ago: the image
// nothing protects goes, with an event and its bytes counted; the image a
// container was made from, the one a current manifest names and the one an
// import file holds stay. When each was last used survives a new GC (a
// restarted staticlet), read back from containerd.
func TestGCRemovesOldUnusedImage(t *testing.T) {
	env := ctrdtest.Start(t)
	c := env.Client(t)
	const ns = "staticlet"
	refs := map[string]string{
		"old":      "localhost/gc-old:v1",
		"running":  "localhost/gc-running:v1",
		"named":    "localhost/gc-named:v1",
		"archived": "localhost/gc-archived:v1",
	}
	for what, ref := range refs {
		env.ImportImageWith(t, ns, testimage.Options{Ref: ref, Files: map[string][]byte{"gc/" + what: []byte(what)}})
	}
	site := Site{
		Client: c, Namespace: ns, Snapshotter: env.Snapshotter, CallTimeout: time.Minute, RootDir: t.TempDir(),
		Leases: &lease.Maker{Leases: c.LeasesService(), Namespace: ns, CallTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)},
	}
	store := NewStore(StoreConfig{}, site)
	ctx := t.Context()
	hourAgo := time.Now().Add(-time.Hour)
	for _, ref := range refs {
		if err := store.markUsed(ctx, ref, hourAgo); err != nil {
			t.Fatal(err)
		}
	}
	nsCtx := namespaces.WithNamespace(ctx, ns)
	ctr, err := c.NewContainer(nsCtx, "gc-running", client.WithImageName(refs["running"]), client.WithSpec(&oci.Spec{}))
	if err != nil {
		t.Fatalf("creating a container of %s: %v", refs["running"], err)
	}
	t.Cleanup(func() { ctr.Delete(namespaces.WithNamespace(context.Background(), ns)) })

	events := &eventLog{}
	type collected struct {
		reason string
		bytes  int64
	}
	var got []collected
	policy := GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 99, MaxAge: time.Minute}
	gc := NewGC(GCConfig{Policy: policy, Store: store, Node: "node1", Events: events,
		Collected: func(reason string, bytes int64) { got = append(got, collected{reason, bytes}) }})
	gc.SetDesired([]*pod.Pod{{Pod: &v1.Pod{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever,
		Containers: []v1.Container{{Name: "done", Image: refs["named"]}}}}}})
	gc.SetImportFiles([]FileResult{{Path: "archived.tar", Images: []string{refs["archived"]}}})

	if err := gc.collect(ctx, time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatalf("collect: %v", err)
	}
	for what, ref := range refs {
		has, err := store.HasImage(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if want := what != "old"; has != want {
			t.Errorf("after collecting, image %s (%s) present = %v, want %v", ref, what, has, want)
		}
	}
	if len(got) != 1 || got[0].reason != RemovedAge || got[0].bytes <= 0 {
		t.Errorf("collected = %+v, want one image for age, with its bytes", got)
	}
	if i := slices.IndexFunc(events.events, func(e pod.Event) bool { return e.Reason == ReasonImageGarbageCollected }); i < 0 {
		t.Errorf("events = %+v, want %s", events.events, ReasonImageGarbageCollected)
	} else if e := events.events[i]; e.Object != "node/node1" || e.Pod != "" || e.Type != pod.EventNormal {
		t.Errorf("event %+v, want a Normal event of node/node1 and no pod", e)
	}
	if len(events.events) != 1 {
		t.Errorf("events = %+v, want only the removal", events.events)
	}

	root, err := store.imageFS(ctx)
	if err != nil {
		t.Fatalf("imageFS: %v", err)
	}
	if u, err := statFS(root); err != nil || u.Capacity <= 0 || u.Available > u.Capacity {
		t.Errorf("statFS(%s) = %+v, %v, want a size and free space", root, u, err)
	}

	// A new GC reads when each image was last used back from containerd.
	restarted := NewGC(GCConfig{Policy: policy, Store: store, Events: events})
	imgs, err := restarted.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]KeptImage{}
	for _, img := range imgs {
		uses[img.Name] = img
	}
	want := map[string]string{"running": KeptInUse, "named": "", "archived": ""}
	for what, kept := range want {
		u := uses[refs[what]]
		if !slices.Equal(u.Kept, nonEmpty(kept)) {
			t.Errorf("Images()[%s].Kept = %v, want %v", what, u.Kept, nonEmpty(kept))
		}
	}
	if lu := uses[refs["running"]].LastUsed; time.Since(lu) > time.Minute {
		t.Errorf("Images()[running].LastUsed = %v, want the collection's time", lu)
	}
	if lu := uses[refs["named"]].LastUsed; !lu.Equal(hourAgo.Truncate(time.Second)) {
		t.Errorf("Images()[named].LastUsed = %v, want %v", lu, hourAgo.Truncate(time.Second))
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
