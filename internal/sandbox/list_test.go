package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc"

	"github.com/staticlet/staticlet/internal/pod"
)

// taskCalls records the task service calls a client makes: how many
// listings (each asks every task's shim for its state), and the
// containers whose task was asked for one by one.
type taskCalls struct {
	mu    sync.Mutex
	lists int
	gets  []string
}

func (tc *taskCalls) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tc.mu.Lock()
	switch r := req.(type) {
	case *tasks.ListTasksRequest:
		tc.lists++
	case *tasks.GetRequest:
		tc.gets = append(tc.gets, r.ContainerID)
	}
	tc.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// reset forgets the calls so far.
func (tc *taskCalls) reset() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.lists, tc.gets = 0, nil
}

// countTaskCalls makes the Runtime talk to containerd through a client
// that records its task service calls, until the test ends.
func (h *harness) countTaskCalls() *taskCalls {
	h.t.Helper()
	tc := &taskCalls{}
	c, err := client.New(h.env.Address, client.WithDefaultNamespace(testNS),
		client.WithExtraDialOpts([]grpc.DialOption{grpc.WithChainUnaryInterceptor(tc.intercept)}))
	if err != nil {
		h.t.Fatalf("connecting to containerd: %v", err)
	}
	old := h.rt.client
	h.rt.client = c
	h.t.Cleanup(func() {
		h.rt.client = old
		c.Close()
	})
	return tc
}

const listPodManifest = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: ns
spec:
  hostNetwork: true
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
`

// TestPodContainersAsksOnlyItsPod: listing a pod asks containerd for the
// tasks of that pod's containers, one by one, and for no other pod's: a
// resync, which lists every pod, then asks each shim for its own tasks
// once, not once per pod on the node. A sandbox without a pause process
// has no task to ask for.
func TestPodContainersAsksOnlyItsPod(t *testing.T) {
	h := newHarness(t)
	want := map[pod.Key][]string{}
	asked := map[pod.Key][]string{}
	var pods []*pod.Pod
	for _, name := range []string{"list-a", "list-b", "list-c"} {
		p := h.decode("/m/"+name+".yaml", fmt.Sprintf(listPodManifest, name, idleScript))
		sb := h.sandbox(p)
		c := h.start(p, sb, "c", 0)
		want[p.Key()] = []string{sb.ID, c.ID}
		asked[p.Key()] = []string{c.ID}
		pods = append(pods, p)
	}
	tc := h.countTaskCalls()
	for _, p := range pods {
		tc.reset()
		recs, err := h.rt.PodContainers(h.ctx(), p.Key())
		if err != nil {
			t.Fatalf("PodContainers(%s): %v", p.Key(), err)
		}
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.ID)
			if r.Pod != p.Key() || r.State != pod.TaskRunning || (r.Pid == 0) != (r.Kind == pod.KindSandbox) {
				t.Errorf("PodContainers(%s) lists %+v, want a running container of the pod (a pid but for the sandbox)", p.Key(), r)
			}
		}
		w := slices.Sorted(slices.Values(want[p.Key()]))
		if slices.Sort(ids); !slices.Equal(ids, w) {
			t.Errorf("PodContainers(%s) lists %v, want %v", p.Key(), ids, w)
		}
		tc.mu.Lock()
		lists, gets := tc.lists, slices.Sorted(slices.Values(tc.gets))
		tc.mu.Unlock()
		if w := asked[p.Key()]; lists != 0 || !slices.Equal(gets, w) {
			t.Errorf("PodContainers(%s) listed every task %d times and asked for the tasks of %v, want no listing and the tasks of %v only",
				p.Key(), lists, gets, w)
		}
	}

	// The whole node's listing is one task listing, whatever the pods.
	tc.reset()
	all, err := h.rt.AllContainers(h.ctx())
	if err != nil || len(all) != 2*len(pods) {
		t.Fatalf("AllContainers = %d records, %v; want %d", len(all), err, 2*len(pods))
	}
	if tc.lists != 1 || len(tc.gets) != 0 {
		t.Errorf("AllContainers listed every task %d times and asked for %d tasks one by one, want one listing", tc.lists, len(tc.gets))
	}

	// The sweep of pods' files, at every resync, reads labels only.
	tc.reset()
	if _, err := h.rt.SweepPodFiles(h.ctx(), func(string) bool { return true }); err != nil {
		t.Fatalf("SweepPodFiles: %v", err)
	}
	if tc.lists != 0 || len(tc.gets) != 0 {
		t.Errorf("SweepPodFiles listed every task %d times and asked for %d tasks one by one, want neither", tc.lists, len(tc.gets))
	}
}

// TestContainerTaskAfterSettledExit: a container listed before its exit
// was settled (labels recorded, task deleted), whose task is looked up
// after, is read again, and shows its exit rather than a container that
// never ran; one removed meanwhile is not found.
func TestContainerTaskAfterSettledExit(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/list-exit.yaml", fmt.Sprintf(listPodManifest, "list-exit", "exit 4"))
	c := h.start(p, h.sandbox(p), "c", 0)
	listed, err := h.rt.client.ContainerService().Get(h.nsCtx(), c.ID)
	if err != nil {
		t.Fatalf("reading container %s: %v", c.ID, err)
	}
	ctr, err := h.client.LoadContainer(h.nsCtx(), c.ID)
	if err != nil {
		t.Fatalf("loading container %s: %v", c.ID, err)
	}
	exitedAt := h.waitStopped(ctr)
	exit := pod.TaskExit{Pod: p.Key(), ContainerID: c.ID, ExitCode: 4, ExitedAt: exitedAt}
	if err := h.rt.settleExit(h.ctx(), ctr, exit, c.Pid); err != nil {
		t.Fatalf("settleExit: %v", err)
	}
	if _, ok := listed.Labels[LabelExitCode]; ok {
		t.Fatalf("the listing taken before the exit was settled has its exit label: %v", listed.Labels)
	}

	got, task, err := h.rt.containerTask(h.ctx(), listed)
	if err != nil {
		t.Fatalf("containerTask(%s) after the exit was settled: %v", c.ID, err)
	}
	rec := h.rt.record(h.ctx(), got, task)
	if rec.State != pod.TaskExited || rec.ExitCode != 4 || rec.Lost || !rec.FinishedAt.Equal(exitedAt.UTC()) {
		t.Errorf("record of %s listed before its exit was settled = %+v, want exited with code 4 at %v", c.ID, rec, exitedAt)
	}

	if err := h.rt.RemoveContainer(h.ctx(), c.ID); err != nil {
		t.Fatalf("RemoveContainer(%s): %v", c.ID, err)
	}
	if _, _, err := h.rt.containerTask(h.ctx(), listed); !errdefs.IsNotFound(err) {
		t.Errorf("containerTask(%s) after its removal: %v, want not found", c.ID, err)
	}
}

// TestStartedAtIsTheProcessStart: a running container's start is when its
// task was started, not its record's creation, which comes before its
// task's (a shim's queue can put a second or more between them): as the
// staticlet that started it saw it, for another staticlet too.
func TestStartedAtIsTheProcessStart(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/started.yaml", sleeper("started", ""))
	sb := h.sandbox(p)
	before := time.Now()
	c := h.start(p, sb, "c", 0)
	if r := h.record(p, c.ID); !r.StartedAt.Equal(c.StartedAt) || !r.StartedAt.After(r.CreatedAt) || r.StartedAt.Before(before) {
		t.Errorf("listed start %v, created %v; want the start StartContainer saw, %v", r.StartedAt, r.CreatedAt, c.StartedAt)
	}
	// A staticlet that did not start it (restarted since) reads the same.
	other, err := New(h.ctx(), h.rt.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	orig := h.rt
	h.rt = other
	defer func() { h.rt = orig }()
	if r := h.record(p, c.ID); !r.StartedAt.Equal(c.StartedAt) {
		t.Errorf("start listed by another staticlet %v, created %v; want %v", r.StartedAt, r.CreatedAt, c.StartedAt)
	}
}

// record returns the record of container id of pod p, as listed.
func (h *harness) record(p *pod.Pod, id string) pod.Record {
	h.t.Helper()
	for _, r := range h.records(p) {
		if r.ID == id {
			return r
		}
	}
	h.t.Fatalf("container %s of %s not listed", id, p.Key())
	return pod.Record{}
}

// records lists pod p's containers.
func (h *harness) records(p *pod.Pod) []pod.Record {
	h.t.Helper()
	recs, err := h.rt.PodContainers(h.ctx(), p.Key())
	if err != nil {
		h.t.Fatalf("PodContainers(%s): %v", p.Key(), err)
	}
	return recs
}
