package sandbox

import (
	"context"
	"maps"
	"path"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/client"
	"google.golang.org/grpc"
)

// callCounter counts the containerd calls of a Runtime, by service and
// method ("Tasks/Get").
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// option is the client option that counts the client's unary calls.
func (c *callCounter) option() client.Opt {
	return client.WithExtraDialOpts([]grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			// "/containerd.services.tasks.v1.Tasks/Get" is "Tasks/Get".
			service, name := path.Split(method)
			key := path.Ext(path.Clean(service))[1:] + "/" + name
			c.mu.Lock()
			if c.n == nil {
				c.n = map[string]int{}
			}
			c.n[key]++
			c.mu.Unlock()
			return invoke(ctx, method, req, reply, cc, opts...)
		})})
}

// take returns the calls counted since the last take.
func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	if n == nil {
		n = map[string]int{}
	}
	return n
}

// TestContainerCalls holds a container's start, stop and removal to the
// containerd calls each needs. A pod's removal is a chain, pod after pod,
// and pods start many at once, each call with its share of containerd's
// CPU: the client's conveniences (loading a container, then its task, then
// reading both again to delete them) made a pod's life about 45 calls.
// Nothing else runs in the Runtime meanwhile (no exit handler), so the
// counts are exact.
func TestContainerCalls(t *testing.T) {
	var calls callCounter
	h := newHarnessWith(t, func(cfg *Config) { cfg.ClientOptions = append(cfg.ClientOptions, calls.option()) })
	p := h.decode("/m/calls.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: calls
spec:
  containers:
  - name: first
    image: localhost/busybox:test
    command: [sleep, "1000"]
  - name: second
    image: localhost/busybox:test
    command: [sleep, "1000"]
`)
	sb := h.sandbox(p)
	// The first start reads the image, which is then known.
	h.start(p, sb, "first", 0)

	calls.take()
	rec, err := h.rt.StartContainer(h.ctx(), h.request(p, sb, "second", 0))
	if err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	h.removeAtEnd(rec.ID)
	check(t, "StartContainer", calls.take(), map[string]int{
		"Images/Get":        1, // the image as it is now
		"Leases/Create":     1,
		"Snapshots/Prepare": 1, // whose mounts the task is created with
		"Containers/Create": 1,
		"Tasks/Create":      1,
		"Tasks/Start":       1,
		"Containers/Update": 1, // when it started
		"Leases/Delete":     1,
	})

	// sleep as PID 1 ignores SIGTERM: the stop ends in a SIGKILL.
	if err := h.rt.StopContainer(h.ctx(), rec.ID, 0); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	check(t, "StopContainer", calls.take(), map[string]int{
		"Containers/Get": 1, // its stop signal
		"Tasks/Get":      1,
		"Tasks/Wait":     1,
		"Tasks/Kill":     2,
	})

	if err := h.rt.RemoveContainer(h.ctx(), rec.ID); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	check(t, "RemoveContainer of a stopped container", calls.take(), map[string]int{
		"Containers/Get":    1,
		"Tasks/Get":         1, // stopped: deleted at once
		"Tasks/Delete":      1,
		"Snapshots/Remove":  1,
		"Containers/Delete": 1,
	})
	if err := h.rt.RemoveContainer(h.ctx(), rec.ID); err != nil {
		t.Fatalf("RemoveContainer again: %v", err)
	}
	check(t, "RemoveContainer of a removed container", calls.take(), map[string]int{"Containers/Get": 1})

	// A Runtime that did not make the sandbox (a restarted staticlet's)
	// reads its shim group once.
	var restarted callCounter
	rt, err := New(h.ctx(), Config{Address: h.env.Address, Namespace: testNS, RootDir: h.root, Logs: LogConfig{Dir: h.logs},
		Snapshotter: h.env.Snapshotter, ShimSpread: 1, ClientOptions: []client.Opt{restarted.option()}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer rt.Close()
	for attempt, want := range []int{1, 0} {
		restarted.take()
		rec, err := rt.StartContainer(h.ctx(), h.request(p, sb, "second", attempt+1))
		if err != nil {
			t.Fatalf("StartContainer, restarted: %v", err)
		}
		h.removeAtEnd(rec.ID)
		if got := restarted.take()["Containers/Get"]; got != want {
			t.Errorf("StartContainer %d of a restarted Runtime read %d containers, want %d", attempt+1, got, want)
		}
	}

	// A sandbox without a pause process is a record and no task.
	if !sb.NoPause {
		t.Fatalf("sandbox %+v has a pause process; want none", sb)
	}
	for _, id := range h.containers() {
		if id == sb.ID {
			continue
		}
		if err := h.rt.RemoveContainer(h.ctx(), id); err != nil {
			t.Fatalf("RemoveContainer(%s): %v", id, err)
		}
	}
	calls.take()
	if err := h.rt.RemoveContainer(h.ctx(), sb.ID); err != nil {
		t.Fatalf("RemoveContainer(sandbox): %v", err)
	}
	check(t, "RemoveContainer of a sandbox without a pause process", calls.take(), map[string]int{
		"Containers/Get":    1,
		"Tasks/Get":         1, // none
		"Containers/Delete": 1,
	})
}

// check compares the calls of op with want.
func check(t *testing.T, op string, got, want map[string]int) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s made the containerd calls\n%v\nwant\n%v", op, got, want)
	}
}
