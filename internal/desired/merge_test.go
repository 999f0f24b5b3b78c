package desired

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// Source names as the daemon's sources spell them.
const (
	dirSource = "dir:/m"
	urlSource = "url:http://example.test/pods"
)

// newPod returns a pod with key "ns/name", read from source.
func newPod(key, source string) *pod.Pod {
	ns, name, _ := strings.Cut(key, "/")
	return &pod.Pod{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, Source: source}
}

// file builds a FileResult whose pods have the keys given ("ns/name").
func file(path string, err error, keys ...string) watch.FileResult {
	f := watch.FileResult{Path: path, Err: err}
	for _, k := range keys {
		f.Pods = append(f.Pods, newPod(k, path))
	}
	return f
}

func snap(source string, files ...watch.FileResult) watch.Snapshot {
	return watch.Snapshot{Source: source, Files: files}
}

// keys lists the pods' keys, comma-separated, in their order.
func keys(ps []*pod.Pod) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Key().String()
	}
	return strings.Join(s, ",")
}

// TestMergeWaitsForEverySource: no desired set is complete before every
// source named has reported once, whatever it reported.
func TestMergeWaitsForEverySource(t *testing.T) {
	tests := []struct {
		name         string
		sources      []string
		snaps        []watch.Snapshot
		wantComplete []bool // after each snapshot
		wantPods     string // after the last
	}{
		{"one source: its first snapshot", []string{dirSource},
			[]watch.Snapshot{snap(dirSource, file("/m/a.yaml", nil, "default/x"))},
			[]bool{true}, "default/x"},
		{"two sources: held until the second reports", []string{dirSource, urlSource},
			[]watch.Snapshot{
				snap(dirSource, file("/m/a.yaml", nil, "default/x")),
				snap(dirSource, file("/m/a.yaml", nil, "default/x"), file("/m/b.yaml", nil, "default/y")),
				snap(urlSource, file("http://example.test/pods", nil, "default/z")),
			},
			[]bool{false, false, true}, "default/x,default/y,default/z"},
		{"one source twice is not two sources", []string{dirSource, urlSource},
			[]watch.Snapshot{snap(urlSource), snap(urlSource)},
			[]bool{false, false}, ""},
		{"an empty snapshot is a report", []string{dirSource, urlSource},
			[]watch.Snapshot{snap(urlSource), snap(dirSource, file("/m/a.yaml", nil, "default/x"))},
			[]bool{false, true}, "default/x"},
		{"a source's own error is a report", []string{dirSource, urlSource},
			[]watch.Snapshot{
				{Source: dirSource, Err: errors.New("no such directory")},
				snap(urlSource, file("http://example.test/pods", nil, "default/z")),
			},
			[]bool{false, true}, "default/z"},
		{"a source's latest snapshot replaces its earlier one", []string{dirSource},
			[]watch.Snapshot{
				snap(dirSource, file("/m/a.yaml", nil, "default/x")),
				snap(dirSource, file("/m/b.yaml", nil, "default/y")),
			},
			[]bool{true, true}, "default/y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMergeState(tt.sources, slog.New(slog.DiscardHandler))
			var pods []*pod.Pod
			for i, sn := range tt.snaps {
				var complete bool
				pods, _, complete = s.add(sn)
				if complete != tt.wantComplete[i] {
					t.Errorf("after snapshot %d (%s): complete = %v, want %v", i, sn.Source, complete, tt.wantComplete[i])
				}
			}
			if got := keys(pods); got != tt.wantPods {
				t.Errorf("pods = %q, want %q", got, tt.wantPods)
			}
		})
	}
}

// TestLogDuplicates: a definition Merge ignores is logged when it appears,
// not again while it lasts, and again if it comes back after going away.
func TestLogDuplicates(t *testing.T) {
	twice := snap(dirSource, file("/m/a.yaml", nil, "default/x"), file("/m/b.yaml", nil, "default/x"))
	thrice := snap(dirSource, file("/m/a.yaml", nil, "default/x"), file("/m/b.yaml", nil, "default/x"),
		file("/m/c.yaml", nil, "default/x"))
	once := snap(dirSource, file("/m/a.yaml", nil, "default/x"))
	steps := []struct {
		snap watch.Snapshot
		want []string // paths of the files logged, in order
	}{
		{twice, []string{"/m/b.yaml"}},
		{twice, nil},
		{thrice, []string{"/m/c.yaml"}},
		{once, nil},
		{twice, []string{"/m/b.yaml"}},
	}
	var buf bytes.Buffer
	s := newMergeState([]string{dirSource}, slog.New(slog.NewTextHandler(&buf, nil)))
	for i, st := range steps {
		buf.Reset()
		s.add(st.snap)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, `is also defined in /m/a.yaml`) {
				t.Errorf("step %d: log line %q, want a warning naming the winning file", i, line)
			}
			_, after, _ := strings.Cut(line, "path=")
			path, _, _ := strings.Cut(after, " ")
			got = append(got, path)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: logged %q, want %q", i, got, st.want)
		}
	}
}

// TestManifestResults: source by source, the source's own error first,
// then its files with their pods, errors (duplicates included) and last
// success.
func TestManifestResults(t *testing.T) {
	polled := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	url := file("http://example.test/pods", errors.New("503 Service Unavailable"), "default/x", "default/u")
	url.LastSuccess = polled
	snaps := []watch.Snapshot{
		{Source: dirSource, Err: errors.New("reading /m: permission denied"), Files: []watch.FileResult{
			file("/m/b.yaml", nil, "kube-system/y"),
			file("/m/a.yaml", errors.New("bad manifest")),
		}},
		snap(urlSource, url),
	}
	s := newMergeState([]string{dirSource, urlSource}, slog.New(slog.DiscardHandler))
	var got []Manifest
	for _, sn := range []watch.Snapshot{snaps[1], snaps[0]} { // out of order on purpose
		_, got, _ = s.add(sn)
	}
	want := []Manifest{
		{Source: dirSource, Error: "reading /m: permission denied"},
		{Source: dirSource, Path: "/m/a.yaml", Error: "bad manifest"},
		{Source: dirSource, Path: "/m/b.yaml", Pods: []string{"kube-system/y"}},
		{Source: urlSource, Path: "http://example.test/pods", Pods: []string{"default/x", "default/u"},
			Error: "503 Service Unavailable", LastSuccess: polled},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("manifest results:\n got %+v\nwant %+v", got, want)
	}

	// A duplicate loses its pod and says where the one in force is.
	dir := snap(dirSource, file("/m/a.yaml", nil, "default/x"))
	_, got, _ = s.add(dir)
	want = []Manifest{
		{Source: dirSource, Path: "/m/a.yaml", Pods: []string{"default/x"}},
		{Source: urlSource, Path: "http://example.test/pods", Pods: []string{"default/u"},
			Error:       "503 Service Unavailable\n" + `pod "default/x" is also defined in /m/a.yaml; this definition is ignored`,
			LastSuccess: polled},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("manifest results with a duplicate:\n got %+v\nwant %+v", got, want)
	}
}

// manifestRecorder is a ManifestSink that hands each call to the test.
type manifestRecorder chan []Manifest

func (r manifestRecorder) SetManifests(ms []Manifest) { r <- ms }

// receive returns the next value from ch, failing the test if none comes
// within a generous deadline (a hung Run, not a slow one).
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		panic("unreachable")
	}
}

// startMerger runs a Merger over sources until the test ends.
func startMerger(t *testing.T, sources ...string) (in chan watch.Snapshot, out chan []*pod.Pod, manifests manifestRecorder) {
	t.Helper()
	in, out, manifests = make(chan watch.Snapshot), make(chan []*pod.Pod), make(manifestRecorder)
	m := NewMerger(MergerConfig{Sources: sources, Manifests: manifests})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, in, out) }()
	t.Cleanup(func() {
		cancel()
		if err := receive(t, done, "return from Run once cancelled"); err != nil {
			t.Errorf("Run = %v, want nil once ctx is done", err)
		}
	})
	return in, out, manifests
}

// TestMergerRun drives Run through its channels: the manifest results of
// every snapshot are passed on, the first set goes out only once every
// source has reported, and a set not taken yet is replaced by the latest.
func TestMergerRun(t *testing.T) {
	in, out, manifests := startMerger(t, dirSource, urlSource)

	in <- snap(dirSource, file("/m/a.yaml", nil, "default/x"))
	if ms := receive(t, manifests, "manifest results"); len(ms) != 1 || ms[0].Path != "/m/a.yaml" {
		t.Errorf("manifest results before every source reported = %+v, want /m/a.yaml's", ms)
	}
	// Run now waits for a snapshot; had it a set to send, it would offer
	// it at the same time.
	select {
	case pods := <-out:
		t.Fatalf("desired set %q sent before the URL reported", keys(pods))
	case in <- snap(urlSource, file("http://example.test/pods", nil, "default/z")):
	}
	if ms := receive(t, manifests, "manifest results"); len(ms) != 2 {
		t.Errorf("manifest results = %+v, want the file's and the URL's", ms)
	}
	// Not taken yet: the next snapshot replaces it.
	in <- snap(dirSource, file("/m/a.yaml", nil, "default/x"), file("/m/b.yaml", nil, "default/y"))
	receive(t, manifests, "manifest results")
	if got, want := keys(receive(t, out, "desired set")), "default/x,default/y,default/z"; got != want {
		t.Errorf("desired set = %q, want the latest, %q", got, want)
	}
	// Taken: nothing more until a new snapshot.
	select {
	case pods := <-out:
		t.Fatalf("desired set %q sent again", keys(pods))
	case in <- snap(urlSource):
	}
	receive(t, manifests, "manifest results")
	if got, want := keys(receive(t, out, "desired set")), "default/x,default/y"; got != want {
		t.Errorf("desired set = %q, want %q", got, want)
	}
}

// TestMergerRunEmpty: a source that defines nothing still releases the
// first set, an empty one, so the reconciler may stop what no manifest
// defines any more.
func TestMergerRunEmpty(t *testing.T) {
	in, out, manifests := startMerger(t, dirSource)
	in <- snap(dirSource)
	if ms := receive(t, manifests, "manifest results"); len(ms) != 0 {
		t.Errorf("manifest results = %+v, want none", ms)
	}
	if pods := receive(t, out, "desired set"); len(pods) != 0 {
		t.Errorf("desired set = %q, want empty", keys(pods))
	}
}

// desiredRecorder is a DesiredSink sending each set it is given on a
// channel, the keys joined.
type desiredRecorder chan string

func (r desiredRecorder) SetDesired(pods []*pod.Pod) { r <- keys(pods) }

// TestMergerTellsDesired: the sink is given each desired set, none before
// every source has reported, and before the set is sent.
func TestMergerTellsDesired(t *testing.T) {
	in, out, manifests := make(chan watch.Snapshot), make(chan []*pod.Pod), make(manifestRecorder, 4)
	sink := make(desiredRecorder, 4)
	m := NewMerger(MergerConfig{Sources: []string{dirSource, urlSource}, Manifests: manifests, Desired: sink})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, in, out) }()
	defer func() { cancel(); receive(t, done, "return from Run once cancelled") }()

	in <- snap(dirSource, file("/m/a.yaml", nil, "default/x"))
	in <- snap(urlSource, file("http://example.test/pods", nil, "default/z"))
	if got, want := receive(t, sink, "desired set told"), "default/x,default/z"; got != want {
		t.Errorf("told %q, want %q (and nothing before the URL reported)", got, want)
	}
	receive(t, out, "desired set")
	if len(sink) != 0 {
		t.Errorf("told %q more", <-sink)
	}
}
