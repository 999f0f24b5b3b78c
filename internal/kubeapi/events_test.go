package kubeapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// eventStore is a store with pods web (an init container and c) and db,
// and their events: c pulled three times (one series), init started,
// db's c failing, and a node event.
func eventStore(t *testing.T) (*status.Store, time.Time) {
	t.Helper()
	store := status.NewStore()
	web := testPod("ns", "web", "Running")
	web.Spec.InitContainers = []v1.Container{{Name: "init"}}
	store.SetPod(web)
	store.SetPod(testPod("other", "db", "Running"))
	// Ages of ten minutes and more print without seconds, so a slow
	// test still sees the same cells.
	base := time.Now().Add(-20 * time.Minute).Truncate(time.Second)
	for i := range 3 {
		store.Event(pod.Event{Time: base.Add(time.Duration(i) * time.Minute), Pod: "ns/web", Container: "c",
			Type: v1.EventTypeNormal, Reason: "Pulled", Message: `Container image "busybox" already present on machine`})
	}
	store.Event(pod.Event{Time: base.Add(4 * time.Minute), Pod: "ns/web", Container: "init",
		Type: v1.EventTypeNormal, Reason: "Started", Message: "Started container init"})
	store.Event(pod.Event{Time: base.Add(5 * time.Minute), Pod: "other/db", Container: "c",
		Type: v1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container c in pod db"})
	store.Event(pod.Event{Time: base.Add(6 * time.Minute), Object: "node/node1",
		Type: v1.EventTypeWarning, Reason: "FreeDiskSpaceFailed", Message: "failed to free 1000 bytes"})
	return store, base
}

// TestEventsList: the store's events as core/v1 Events with the shapes
// the kubelet's recorder gives them, repeats counted on one Event.
func TestEventsList(t *testing.T) {
	store, base := eventStore(t)
	api := newTestAPI(t, Config{Store: store})
	cs := api.clientset(t)
	list, err := cs.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byReason := map[string]v1.Event{}
	for _, e := range list.Items {
		byReason[e.Reason] = e
	}
	if len(list.Items) != 4 || len(byReason) != 4 {
		t.Fatalf("listed %d events, want 4 (the Pulled ones as one): %+v", len(list.Items), list.Items)
	}
	pulled := byReason["Pulled"]
	want := v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: "uid-web", APIVersion: "v1", FieldPath: "spec.containers{c}"}
	if pulled.InvolvedObject != want {
		t.Errorf("involvedObject = %+v, want %+v", pulled.InvolvedObject, want)
	}
	if wantName := fmt.Sprintf("web.%x", base.UnixNano()); pulled.Name != wantName || pulled.Namespace != "ns" {
		t.Errorf("event named %s/%s, want ns/%s", pulled.Namespace, pulled.Name, wantName)
	}
	if pulled.Count != 3 || !pulled.FirstTimestamp.Time.Equal(base) || !pulled.LastTimestamp.Time.Equal(base.Add(2*time.Minute)) {
		t.Errorf("Pulled: count %d, first %v, last %v; want 3 from %v to %v", pulled.Count, pulled.FirstTimestamp, pulled.LastTimestamp, base, base.Add(2*time.Minute))
	}
	if pulled.Source != (v1.EventSource{Component: "kubelet", Host: "node1"}) || pulled.ReportingController != "kubelet" || pulled.ReportingInstance != "node1" {
		t.Errorf("source = %+v, reporting %s %s; want the kubelet on node1", pulled.Source, pulled.ReportingController, pulled.ReportingInstance)
	}
	if got := byReason["Started"].InvolvedObject.FieldPath; got != "spec.initContainers{init}" {
		t.Errorf("an init container's fieldPath = %q", got)
	}
	node := byReason["FreeDiskSpaceFailed"]
	if node.Namespace != "default" || node.InvolvedObject.Kind != "Node" || node.InvolvedObject.Name != "node1" {
		t.Errorf("node event in %q about %+v, want default about Node node1", node.Namespace, node.InvolvedObject)
	}

	got, err := cs.CoreV1().Events("ns").Get(t.Context(), pulled.Name, metav1.GetOptions{})
	if err != nil || got.Count != 3 || got.ResourceVersion != pulled.ResourceVersion {
		t.Errorf("Get(%s) = %+v, %v", pulled.Name, got, err)
	}
	if err := cs.CoreV1().Events("ns").Delete(t.Context(), pulled.Name, metav1.DeleteOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("Delete(event) = %v, want 405", err)
	}
}

// TestEventsFieldSelectors: the field selectors kubectl describe, k9s and
// scripts use, on both groups.
func TestEventsFieldSelectors(t *testing.T) {
	store, _ := eventStore(t)
	api := newTestAPI(t, Config{Store: store})
	cs := api.clientset(t)
	ctx := t.Context()

	// kubectl describe pod (1.30): the pod's reference and the selector
	// client-go makes of it, as describe's searchEvents does.
	p, err := cs.CoreV1().Pods("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reference.GetReference(scheme.Scheme, p)
	if err != nil {
		t.Fatal(err)
	}
	kind, uid := ref.Kind, string(ref.UID)
	sel := cs.CoreV1().Events(ref.Namespace).GetFieldSelector(&ref.Name, &ref.Namespace, &kind, &uid)
	describe, err := cs.CoreV1().Events(ref.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String(), Limit: 500})
	if err != nil || len(describe.Items) != 2 || describe.Continue != "" {
		t.Errorf("describe's events (%s) = %d events, %v; want web's 2", sel, len(describe.Items), err)
	}

	tests := []struct {
		ns, selector string
		want         int
	}{
		{"", "type=Warning", 2},
		{"", "reason=BackOff,involvedObject.namespace=other", 1},
		{"", "involvedObject.kind=Node", 1},
		{"", "involvedObject.fieldPath=spec.containers{c}", 2},
		{"", "source=kubelet,reportingComponent=kubelet", 4},
		{"", "involvedObject.apiVersion=v1,involvedObject.uid=uid-db", 1},
		{"ns", "involvedObject.name!=web", 0},
		{"default", "", 1},
	}
	for _, tt := range tests {
		list, err := cs.CoreV1().Events(tt.ns).List(ctx, metav1.ListOptions{FieldSelector: tt.selector})
		if err != nil || len(list.Items) != tt.want {
			t.Errorf("events in %q with %q: %d, %v; want %d", tt.ns, tt.selector, len(list.Items), err, tt.want)
		}
	}
	if _, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "note=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("core events with an unknown field: %v, want 400", err)
	}

	newer, err := cs.EventsV1().Events("ns").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web,regarding.fieldPath=spec.containers{c}"})
	if err != nil || len(newer.Items) != 1 {
		t.Fatalf("events.k8s.io events of web's c: %+v, %v; want 1", newer, err)
	}
	e := newer.Items[0]
	if e.Note != `Container image "busybox" already present on machine` || e.DeprecatedCount != 3 ||
		e.ReportingController != "kubelet" || e.Regarding.UID != "uid-web" || e.DeprecatedSource.Host != "node1" {
		t.Errorf("events.k8s.io event = %+v", e)
	}
	for sel, want := range map[string]int{"reportingController=kubelet,type=Normal": 2, "regarding.kind=Pod": 3} {
		list, err := cs.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(list.Items) != want {
			t.Errorf("events.k8s.io events with %q: %d, %v; want %d", sel, len(list.Items), err, want)
		}
	}
}

// TestEventsWatch: a watch from a list's resourceVersion sees a repeat as
// the same Event modified and a new event added, on both groups, and an
// Event deleted when newer ones push it out; one from a resourceVersion
// the store has forgotten gets 410 Gone.
func TestEventsWatch(t *testing.T) {
	store, base := eventStore(t)
	api := newTestAPI(t, Config{Store: store})
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "involvedObject.name=web"}
	core, err := cs.CoreV1().Events("ns").Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer core.Stop()
	opts.FieldSelector = "regarding.name=web"
	newer, err := cs.EventsV1().Events("ns").Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Stop()

	store.Event(pod.Event{Time: base.Add(9 * time.Minute), Pod: "other/db", Container: "c", Type: v1.EventTypeNormal, Reason: "Pulled"})
	store.Event(pod.Event{Time: base.Add(10 * time.Minute), Pod: "ns/web", Container: "c",
		Type: v1.EventTypeNormal, Reason: "Pulled", Message: `Container image "busybox" already present on machine`})
	store.Event(pod.Event{Time: base.Add(11 * time.Minute), Pod: "ns/web", Container: "c",
		Type: v1.EventTypeWarning, Reason: "Unhealthy", Message: "Liveness probe failed"})

	next := func(w watch.Interface) watch.Event {
		t.Helper()
		return nextWatchEvent(ctx, t, w)
	}
	ev := next(core)
	if e, ok := ev.Object.(*v1.Event); ev.Type != watch.Modified || !ok || e.Reason != "Pulled" || e.Count != 4 {
		t.Errorf("first core event = %s %+v, want Pulled MODIFIED with count 4", ev.Type, ev.Object)
	}
	ev = next(core)
	if e, ok := ev.Object.(*v1.Event); ev.Type != watch.Added || !ok || e.Reason != "Unhealthy" || e.Count != 1 {
		t.Errorf("second core event = %s %+v, want Unhealthy ADDED", ev.Type, ev.Object)
	}
	ev = next(newer)
	if e, ok := ev.Object.(*eventsv1.Event); ev.Type != watch.Modified || !ok || e.DeprecatedCount != 4 {
		t.Errorf("first events.k8s.io event = %s %+v, want MODIFIED with count 4", ev.Type, ev.Object)
	}

	// 1000 events fill the store and push the Pulled events out, which
	// the watch hears of; 1000 more push out a series each, more
	// removals than the store remembers: the listed revision is gone.
	pulled := ev.Object.(*eventsv1.Event).Name
	for i := range 2000 {
		store.Event(pod.Event{Time: time.Now(), Pod: "ns/web", Reason: fmt.Sprint(i)})
	}
	for {
		ev := next(core)
		if e, ok := ev.Object.(*v1.Event); ok && e.Name == pulled {
			if ev.Type != watch.Deleted || e.Count != 4 {
				t.Errorf("Pulled after 1000 newer events: %s count %d, want DELETED with count 4", ev.Type, e.Count)
			}
			break
		}
	}
	gone, err := cs.CoreV1().Events("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Stop()
	if ev := next(gone); ev.Type != watch.Error || apierrors.FromObject(ev.Object).(apierrors.APIStatus).Status().Code != http.StatusGone {
		t.Errorf("watch from a dropped revision: %s %+v, want ERROR 410", ev.Type, ev.Object)
	}
}

// TestEventsTable: the events table as the apiserver gives it to kubectl
// get events: its columns, wide ones at priority 1, and the cells.
func TestEventsTable(t *testing.T) {
	store, _ := eventStore(t)
	api := newTestAPI(t, Config{Store: store})
	cs := api.clientset(t)
	for _, path := range []string{"/api/v1/namespaces/ns/events", "/apis/events.k8s.io/v1/namespaces/ns/events"} {
		table := &metav1.Table{}
		err := cs.CoreV1().RESTClient().Get().AbsPath(path).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(t.Context()).Into(table)
		if err != nil {
			t.Fatalf("%s as a Table: %v", path, err)
		}
		var cols, wide []string
		for _, c := range table.ColumnDefinitions {
			if c.Priority == 0 {
				cols = append(cols, c.Name)
			} else {
				wide = append(wide, c.Name)
			}
		}
		if got := strings.Join(cols, ","); got != "Last Seen,Type,Reason,Object,Message" {
			t.Errorf("%s columns = %s", path, got)
		}
		if got := strings.Join(wide, ","); got != "Subobject,Source,First Seen,Count,Name" {
			t.Errorf("%s wide columns = %s", path, got)
		}
		if len(table.Rows) != 2 {
			t.Fatalf("%s: %d rows, want 2", path, len(table.Rows))
		}
		cells := fmt.Sprint(table.Rows[0].Cells)
		if !strings.HasPrefix(cells, "[18m Normal Pulled pod/web spec.containers{c} kubelet, node1 Container image") ||
			!strings.HasSuffix(cells, " 20m 3 "+fmt.Sprint(table.Rows[0].Cells[9])+"]") {
			t.Errorf("%s first row = %s", path, cells)
		}
	}
}

// TestEventsWatchExpiry: an Event expires its TTL after its latest
// repeat, with nothing else happening: a watch hears of it as DELETED at
// a new resourceVersion, on both groups, a list no longer shows it, and a
// watch resumed from before the expiry is told of it too.
func TestEventsWatchExpiry(t *testing.T) {
	store := status.NewStore(status.WithEventTTL(time.Second))
	store.SetPod(testPod("ns", "web", "Running"))
	api := newTestAPI(t, Config{Store: store})
	cs := api.clientset(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	store.Event(pod.Event{Time: time.Now(), Pod: "ns/web", Container: "c", Type: v1.EventTypeWarning, Reason: "BackOff", Message: "Back-off"})
	store.Event(pod.Event{Time: time.Now(), Pod: "ns/web", Container: "c", Type: v1.EventTypeWarning, Reason: "BackOff", Message: "Back-off"})
	rev := store.Revision()
	rv := strconv.FormatUint(rev, 10)

	core, err := cs.CoreV1().Events("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Stop()
	newer, err := cs.EventsV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, FieldSelector: "reason=BackOff"})
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Stop()
	next := func(w watch.Interface) watch.Event {
		t.Helper()
		return nextWatchEvent(ctx, t, w)
	}
	ev := next(core)
	e, ok := ev.Object.(*v1.Event)
	if ev.Type != watch.Deleted || !ok || e.Reason != "BackOff" || e.Count != 2 || e.ResourceVersion != strconv.FormatUint(rev+1, 10) {
		t.Fatalf("core watch = %s %+v, want BackOff DELETED with count 2 at resourceVersion %d", ev.Type, ev.Object, rev+1)
	}
	ev = next(newer)
	if n, ok := ev.Object.(*eventsv1.Event); ev.Type != watch.Deleted || !ok || n.Name != e.Name || n.ResourceVersion != e.ResourceVersion {
		t.Errorf("events.k8s.io watch = %s %+v, want %s DELETED at %s", ev.Type, ev.Object, e.Name, e.ResourceVersion)
	}

	list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("List() after the expiry = %+v, %v; want no events", list, err)
	}
	resumed, err := cs.CoreV1().Events("ns").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Stop()
	if ev := next(resumed); ev.Type != watch.Deleted || ev.Object.(*v1.Event).ResourceVersion != e.ResourceVersion {
		t.Errorf("watch resumed from %s = %s %+v, want the DELETED at %s", rv, ev.Type, ev.Object, e.ResourceVersion)
	}
}

// nextWatchEvent is the next event of w, failing the test when none
// comes before ctx ends.
func nextWatchEvent(ctx context.Context, t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		return ev
	case <-ctx.Done():
		t.Fatal("no watch event before the test's deadline")
	}
	return watch.Event{}
}
