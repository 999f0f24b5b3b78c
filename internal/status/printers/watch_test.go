package printers

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
)

// watchPod is a pod called name in the given phase, created 5s before now.
func watchPod(name string, phase v1.PodPhase) *v1.Pod {
	p := rowPod(phase, 0, 1)
	p.Name = name
	p.Spec.NodeName = "node1"
	p.CreationTimestamp = ago(5 * time.Second)
	return p
}

func TestPodWatch(t *testing.T) {
	initial := []status.PodWatchEvent{
		{Type: status.WatchAdded, Object: watchPod("etcd-node1", v1.PodRunning)},
		{Type: status.WatchAdded, Object: watchPod("web", v1.PodPending)},
		{Type: status.WatchBookmark, Object: &v1.Pod{}},
	}
	change := []status.PodWatchEvent{{Type: status.WatchModified, Object: watchPod("web", v1.PodRunning)}}
	tests := []struct {
		name    string
		opts    PodWatchOptions
		printer string // -o for one of kubectl's printers
		want    string
	}{
		{name: "table", want: `NAME         READY   STATUS    RESTARTS   AGE
etcd-node1   0/1     Running   0          5s
web          0/1     Pending   0          5s
web   0/1   Running   0     5s
`},
		{name: "wide with events", opts: PodWatchOptions{Output: "wide", WatchEvents: true}, want: `EVENT   NAME         READY   STATUS    RESTARTS   AGE   IP       NODE
ADDED   etcd-node1   0/1     Running   0          5s    <none>   node1
ADDED   web          0/1     Pending   0          5s    <none>   node1
MODIFIED   web   0/1   Running   0     5s    <none>   node1
`},
		{name: "name", printer: "name", want: "pod/etcd-node1\npod/web\npod/web\n"},
		{name: "name with events", printer: "name", opts: PodWatchOptions{WatchEvents: true}, want: "pod/etcd-node1\npod/web\npod/web\n"},
		{name: "jsonpath", printer: `jsonpath={.metadata.name}{"\n"}`, want: "etcd-node1\nweb\nweb\n"},
		{name: "jsonpath with events", printer: `jsonpath={.type} {.object.metadata.name} {.object.status.phase}{"\n"}`, opts: PodWatchOptions{WatchEvents: true},
			want: "ADDED etcd-node1 Running\nADDED web Pending\nMODIFIED web Running\n"},
		{name: "custom-columns", printer: "custom-columns=NAME:.metadata.name,PHASE:.status.phase", want: `NAME         PHASE
etcd-node1   Running
web          Pending
web          Running
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if tt.printer != "" {
				p, err := Output{Format: tt.printer, AllowMissingKeys: true}.Printer(podFormats)
				if err != nil {
					t.Fatal(err)
				}
				tt.opts.Printer = p
			}
			pw, err := NewPodWatch(&b, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range [][]status.PodWatchEvent{initial, nil, change} {
				if err := pw.Print(batch, now); err != nil {
					t.Fatal(err)
				}
			}
			if b.String() != tt.want {
				t.Errorf("PodWatch printed\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestPodWatchObjects(t *testing.T) {
	var b bytes.Buffer
	pw, err := NewPodWatch(&b, PodWatchOptions{Output: "yaml"})
	if err != nil {
		t.Fatal(err)
	}
	pw.Print([]status.PodWatchEvent{{Type: status.WatchAdded, Object: watchPod("a", v1.PodPending)}, {Type: status.WatchBookmark}}, now)
	pw.Print([]status.PodWatchEvent{{Type: status.WatchModified, Object: watchPod("a", v1.PodRunning)}}, now)
	docs := strings.Split(b.String(), "---\n")
	if len(docs) != 2 || !strings.Contains(docs[0], "phase: Pending") || !strings.Contains(docs[1], "phase: Running") {
		t.Errorf("yaml watch printed\n%s\nwant two documents, Pending then Running", b.String())
	}

	b.Reset()
	pw, _ = NewPodWatch(&b, PodWatchOptions{Output: "json", WatchEvents: true})
	pw.Print([]status.PodWatchEvent{{Type: status.WatchDeleted, Object: watchPod("a", v1.PodRunning)}}, now)
	if out := b.String(); !strings.HasPrefix(out, "{\n    \"type\": \"DELETED\",\n    \"object\": {") {
		t.Errorf("json watch with events printed\n%s\nwant the watch event", out)
	}
	if _, err := NewPodWatch(&b, PodWatchOptions{Output: "name"}); err == nil {
		t.Error("NewPodWatch(name) = nil error, want unknown output format")
	}
}

func TestEvents(t *testing.T) {
	ev := func(d time.Duration, podKey, typ, reason, msg string) pod.Event {
		return pod.Event{Time: now.Add(-d), Pod: podKey, Type: typ, Reason: reason, Message: msg}
	}
	events := []pod.Event{
		ev(5*time.Minute, "default/web", pod.EventNormal, "Started", "Started container c"),
		ev(4*time.Minute, "default/web", pod.EventWarning, "BackOff", "Back-off restarting failed container c"),
		ev(3*time.Minute, "kube-system/etcd", pod.EventNormal, "Pulled", "Container image already present\n"),
		ev(time.Minute, "default/web", pod.EventWarning, "BackOff", "Back-off restarting failed container c"),
	}
	var b bytes.Buffer
	if err := Events(&b, events, now); err != nil {
		t.Fatal(err)
	}
	want := `LAST SEEN          TYPE      REASON    OBJECT     MESSAGE
5m                 Normal    Started   pod/web    Started container c
3m                 Normal    Pulled    pod/etcd   Container image already present
60s (x2 over 4m)   Warning   BackOff   pod/web    Back-off restarting failed container c
`
	if b.String() != want {
		t.Errorf("Events() =\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	ew, err := NewEventWatch(&b, "")
	if err != nil {
		t.Fatal(err)
	}
	ew.Print(recorded(events[:2]), now)
	ew.Print(recorded(events[3:]), now)
	want = `LAST SEEN   TYPE      REASON    OBJECT    MESSAGE
5m          Normal    Started   pod/web   Started container c
4m          Warning   BackOff   pod/web   Back-off restarting failed container c
60s (x2 over 4m)   Warning   BackOff   pod/web   Back-off restarting failed container c
`
	if b.String() != want {
		t.Errorf("EventWatch printed\n%s\nwant\n%s", b.String(), want)
	}
}

// TestEventsOfTheNode: an event of no pod shows the object it names, else
// the node.
func TestEventsOfTheNode(t *testing.T) {
	events := []pod.Event{
		{Time: now.Add(-30 * time.Second), Object: "node/n1", Type: pod.EventNormal, Reason: "ImageGarbageCollected", Message: "Removed image x"},
		{Time: now.Add(-20 * time.Second), Type: pod.EventNormal, Reason: "Imported", Message: "Imported x"},
	}
	var b bytes.Buffer
	if err := Events(&b, events, now); err != nil {
		t.Fatal(err)
	}
	want := `LAST SEEN   TYPE     REASON                  OBJECT    MESSAGE
30s         Normal   ImageGarbageCollected   node/n1   Removed image x
20s         Normal   Imported                node      Imported x
`
	if b.String() != want {
		t.Errorf("Events() =\n%s\nwant\n%s", b.String(), want)
	}
}

// recorded is events as the status socket serves them.
func recorded(events []pod.Event) []status.RecordedEvent {
	out := make([]status.RecordedEvent, len(events))
	for i, e := range events {
		out[i] = status.RecordedEvent{Event: e}
	}
	return out
}
