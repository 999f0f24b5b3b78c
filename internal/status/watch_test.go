package status

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/staticlet/staticlet/internal/pod"
)

// labelled is a pod with labels.
func labelled(name string, phase v1.PodPhase, kv ...string) *v1.Pod {
	p := testPod("ns", name, phase, false)
	p.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

// streamLines reads the lines of GET path from h until the test ends,
// and returns them on a channel.
func streamLines(t *testing.T, h http.Handler, path string) <-chan string {
	t.Helper()
	srv := httptest.NewServer(h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); srv.Close() })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if te := resp.TransferEncoding; len(te) != 1 || te[0] != "chunked" {
		t.Errorf("GET %s: transfer encoding %v, want chunked", path, te)
	}
	lines := make(chan string)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// nextLine returns the next line, failing the test after a deadline.
func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a line of the watch")
		return ""
	}
}

// wantPodEvent reads the next line as a pod watch event and checks its type,
// pod and (if not empty) phase.
func wantPodEvent(t *testing.T, lines <-chan string, typ WatchEventType, name string, phase v1.PodPhase) {
	t.Helper()
	line := nextLine(t, lines)
	var ev PodWatchEvent
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	if ev.Type != typ || ev.Object == nil || ev.Object.Name != name || (phase != "" && ev.Object.Status.Phase != phase) {
		t.Fatalf("line %s, want %s of %s (phase %q)", line, typ, name, phase)
	}
	if ev.Object.Kind != "Pod" || ev.Object.APIVersion != "v1" {
		t.Errorf("line %s: object is not a v1 Pod", line)
	}
}

// TestWatchPods: the pod watch sends ADDED for the selected pods, a
// BOOKMARK, then an event per visible change, DELETED when a pod goes or
// stops matching the selector, ADDED when one starts matching.
func TestWatchPods(t *testing.T) {
	s := NewStore()
	s.SetPod(labelled("a", v1.PodPending, "app", "x"))
	s.SetPod(labelled("b", v1.PodPending, "app", "y"))
	s.SetPod(labelled("c", v1.PodPending, "app", "x"))
	h := NewServer(ServerConfig{Store: s}).Handler()
	lines := streamLines(t, h, "/pods?watch=true&allowWatchBookmarks=true&labelSelector=app+in+(x)")

	wantPodEvent(t, lines, WatchAdded, "a", v1.PodPending)
	wantPodEvent(t, lines, WatchAdded, "c", v1.PodPending)
	var mark PodWatchEvent
	if line := nextLine(t, lines); json.Unmarshal([]byte(line), &mark) != nil ||
		mark.Type != WatchBookmark || mark.Object.Annotations[InitialEventsEnd] != "true" {
		t.Fatalf("line %s, want the BOOKMARK that ends the initial events", line)
	}

	s.SetPod(labelled("a", v1.PodPending, "app", "x")) // nothing visible changed
	s.SetPod(labelled("b", v1.PodRunning, "app", "y")) // not selected
	s.SetPod(labelled("a", v1.PodRunning, "app", "x"))
	wantPodEvent(t, lines, WatchModified, "a", v1.PodRunning)

	s.SetPod(labelled("a", v1.PodRunning, "app", "y"))
	wantPodEvent(t, lines, WatchDeleted, "a", v1.PodRunning)
	s.SetPod(labelled("b", v1.PodRunning, "app", "x"))
	wantPodEvent(t, lines, WatchAdded, "b", v1.PodRunning)
	s.DeletePod(pod.Key{Namespace: "ns", Name: "c"})
	wantPodEvent(t, lines, WatchDeleted, "c", v1.PodPending)
}

// TestWatchPodsLastState: changes made faster than the watcher reads may
// be coalesced, but the last state always arrives.
func TestWatchPodsLastState(t *testing.T) {
	s := NewStore()
	h := NewServer(ServerConfig{Store: s}).Handler()
	lines := streamLines(t, h, "/pods?watch=true")
	phases := []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodFailed, v1.PodRunning, v1.PodSucceeded}
	for i := range 100 {
		s.SetPod(labelled("p", phases[i%len(phases)]))
	}
	for {
		var ev PodWatchEvent
		line := nextLine(t, lines)
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if ev.Object.Status.Phase == v1.PodSucceeded { // the last write's
			return
		}
	}
}

// TestListPodsSelector: GET /pods filters by labelSelector and rejects one
// that does not parse.
func TestListPodsSelector(t *testing.T) {
	s := NewStore()
	s.SetPod(labelled("a", v1.PodRunning, "tier", "control-plane", "app", "etcd"))
	s.SetPod(labelled("b", v1.PodRunning, "tier", "control-plane"))
	s.SetPod(labelled("c", v1.PodRunning))
	c := startServer(t, ServerConfig{Store: s})
	tests := []struct {
		selector string
		want     string
	}{
		{"", "a b c"},
		{"tier=control-plane", "a b"},
		{"tier=control-plane,app!=etcd", "b"},
		{"!tier", "c"},
		{"app in (etcd, apiserver)", "a"},
	}
	for _, tt := range tests {
		list, err := c.PodsMatching(context.Background(), tt.selector)
		if err != nil {
			t.Errorf("PodsMatching(%q) error: %v", tt.selector, err)
			continue
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		if got := strings.Join(names, " "); got != tt.want {
			t.Errorf("PodsMatching(%q) = %q, want %q", tt.selector, got, tt.want)
		}
	}
	if _, err := c.PodsMatching(context.Background(), "a in b"); err == nil || !strings.Contains(err.Error(), "invalid labelSelector") {
		t.Errorf(`PodsMatching("a in b") error = %v, want invalid labelSelector`, err)
	}
	for _, path := range []string{"/pods?watch=maybe", "/events?watch=true&allowWatchBookmarks=2x"} {
		rec := httptest.NewRecorder()
		NewServer(ServerConfig{Store: s}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "want true or false") {
			t.Errorf("GET %s = %d %s, want 400 saying true or false", path, rec.Code, rec.Body.String())
		}
	}
	err := c.WatchPods(context.Background(), "=x", func(PodWatchEvent) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "invalid labelSelector") {
		t.Errorf(`WatchPods("=x") error = %v, want invalid labelSelector`, err)
	}
}

// TestWatchEvents: the event watch sends the recorded events of the pod
// asked for, a BOOKMARK, then each new one; it ends with ctx.
func TestWatchEvents(t *testing.T) {
	s := NewStore()
	s.Event(pod.Event{Pod: "ns/a", Type: pod.EventNormal, Reason: "Pulled"})
	s.Event(pod.Event{Pod: "ns/b", Type: pod.EventNormal, Reason: "Pulled"})
	s.Event(pod.Event{Pod: "ns/a", Type: pod.EventNormal, Reason: "Started"})
	c := startServer(t, ServerConfig{Store: s})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan RecordedEvent)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchEvents(ctx, "a", func(e RecordedEvent) error {
			select {
			case got <- e:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case e := <-got:
			if e.Pod != "" && (e.Rev == 0 || e.Count != 1) {
				t.Errorf("event %+v: want its revision and count 1", e)
			}
			return e.Pod + " " + e.Type + " " + e.Reason
		case err := <-done:
			t.Fatalf("WatchEvents returned early: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for an event")
		}
		return ""
	}
	for _, want := range []string{"ns/a Normal Pulled", "ns/a Normal Started", " BOOKMARK InitialEventsEnd"} {
		if e := next(); e != want {
			t.Fatalf("event %q, want %q", e, want)
		}
	}
	s.Event(pod.Event{Pod: "ns/b", Type: pod.EventWarning, Reason: "BackOff"})
	s.Event(pod.Event{Pod: "ns/a", Type: pod.EventWarning, Reason: "BackOff"})
	if e := next(); e != "ns/a Warning BackOff" {
		t.Fatalf("event %q, want ns/a Warning BackOff", e)
	}
	cancel()
	if err := <-done; err == nil || ctx.Err() == nil {
		t.Errorf("WatchEvents after cancel = %v, want the context's error", err)
	}
}

func TestPodWatcher(t *testing.T) {
	x := labelled("p", v1.PodRunning, "app", "x")
	x2 := labelled("p", v1.PodFailed, "app", "x")
	y := labelled("p", v1.PodRunning, "app", "y")
	key := pod.Key{Namespace: "ns", Name: "p"}
	sel, err := labels.Parse("app=x")
	if err != nil {
		t.Fatal(err)
	}
	w := newPodWatcher(sel)
	steps := []struct {
		pod  *v1.Pod
		want WatchEventType // "" for no event
	}{
		{y, ""},
		{x, WatchAdded},
		{x.DeepCopy(), ""},
		{x2, WatchModified},
		{y, WatchDeleted},
		{nil, ""},
		{x, WatchAdded},
		{nil, WatchDeleted},
	}
	for i, st := range steps {
		ev, ok := w.next(PodChange{Key: key, Pod: st.pod})
		if got := ev.Type; got != st.want || ok != (st.want != "") {
			t.Errorf("step %d: next() = %q, %v; want %q", i, got, ok, st.want)
		}
	}
}
