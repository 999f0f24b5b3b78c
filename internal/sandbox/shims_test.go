package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
)

// TestShimGroupOf: ordinary pods share a shim per QoS class and containerd
// release; a critical pod, whatever its class, has its sandbox's own.
func TestShimGroupOf(t *testing.T) {
	const id, release = "0123456789abcdef", "1.7.0-abc"
	const guaranteed = "limits: {cpu: 100m, memory: 64Mi}"
	tests := []struct {
		name, spec, resources, want string
	}{
		{"BestEffort", "", "", "staticlet-besteffort-" + release},
		{"Burstable", "", "requests: {memory: 1Mi}", "staticlet-burstable-" + release},
		{"Guaranteed", "", guaranteed, "staticlet-guaranteed-" + release},
		{"lower priority", "priority: 1000", "", "staticlet-besteffort-" + release},
		{"system-node-critical", "priorityClassName: system-node-critical", "", id},
		{"system-cluster-critical", "priorityClassName: system-cluster-critical", "", id},
		{"critical by priority", "priority: 2000000000", "", id},
		{"critical and Guaranteed", "priorityClassName: system-node-critical", guaranteed, id},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
			if tt.resources != "" {
				manifest += "    resources: {" + tt.resources + "}\n"
			}
			if tt.spec != "" {
				manifest += "  " + tt.spec + "\n"
			}
			pods, err := pod.Decode("/m/p.yaml", []byte(manifest), pod.Options{NodeName: "node"})
			if err != nil {
				t.Fatal(err)
			}
			if got := shimGroupOf(pods[0], id, release); got != tt.want {
				t.Errorf("shimGroupOf(%s) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestReleaseKey(t *testing.T) {
	tests := []struct {
		v    client.Version
		want string
	}{
		{client.Version{Version: "1.6.20~ds1", Revision: "1.6.20~ds1-1+deb12u3"}, "1.6.20~ds1-1.6.20~ds1-1+deb12u3"},
		{client.Version{Version: "v2.1.0", Revision: "abc123"}, "v2.1.0-abc123"},
		{client.Version{Version: "v2.1.0/dirty x", Revision: ""}, "v2.1.0_dirty_x-"},
	}
	for _, tt := range tests {
		if got := releaseKey(tt.v); got != tt.want {
			t.Errorf("releaseKey(%+v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// TestShimGroups: two ordinary pods share one shim process, a critical pod
// has its own; removing the pod that started the shared shim leaves it
// serving the other, and a pod added later, by a restarted staticlet,
// joins it; the shared shim goes with its last pod.
func TestShimGroups(t *testing.T) {
	h := newHarness(t)
	type running struct {
		p      *pod.Pod
		sb, ct pod.Record
	}
	run := func(name, spec string) running {
		t.Helper()
		p := h.decode("/m/"+name+".yaml", sleeper(name, spec))
		sb := h.sandbox(p)
		return running{p, sb, h.start(p, sb, "c", 0)}
	}
	// shimOf is the shim serving pod r's container (and pause, when it
	// has one): their parent, the shim being their subreaper; both must
	// have the same.
	shimOf := func(r running) int {
		t.Helper()
		ct := parentOf(t, r.ct.Pid)
		if r.sb.Pid == 0 {
			return ct
		}
		if pause := parentOf(t, r.sb.Pid); pause != ct {
			t.Fatalf("pod %s: the pause runs under shim %d, its container under %d, want one shim", r.p.Name, pause, ct)
		}
		return ct
	}

	first, second := run("first", ""), run("second", "")
	// The critical pod's sandbox has a pause process, which joins its shim.
	critical := run("critical", "  priorityClassName: system-node-critical\n"+sharedPID)
	shared := shimOf(first)
	if s := shimOf(second); s != shared {
		t.Errorf("two BestEffort pods run under shims %d and %d, want one", shared, s)
	}
	if s := shimOf(critical); s == shared {
		t.Errorf("the critical pod runs under the shared shim %d, want one of its own", s)
	}
	if n := shimCount(t, h.env.Address); n != 2 {
		t.Errorf("three pods run under %d shims, want 2", n)
	}

	// The shared shim's working directory is the bundle of the first
	// pod's first task, which goes with it.
	for _, id := range []string{first.ct.ID, first.sb.ID} {
		if err := h.rt.RemoveContainer(h.ctx(), id); err != nil {
			t.Fatalf("RemoveContainer(%s): %v", id, err)
		}
	}
	if gone(uint32(shared)) {
		t.Fatalf("the shared shim %d went with the first pod, while the second runs in it", shared)
	}
	if gone(second.ct.Pid) {
		t.Fatalf("the second pod's processes went with the first pod")
	}
	// A restarted staticlet puts its new pods where the pods it adopts
	// run.
	restarted, err := New(h.ctx(), h.rt.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { restarted.Close() })
	before := h.rt
	h.rt = restarted
	third := run("third", "")
	h.rt = before
	if s := shimOf(third); s != shared {
		t.Errorf("a BestEffort pod added after the first went, by a restarted staticlet, runs under shim %d, want the shared %d", s, shared)
	}

	for _, r := range []running{second, third} {
		for _, id := range []string{r.ct.ID, r.sb.ID} {
			if err := h.rt.RemoveContainer(h.ctx(), id); err != nil {
				t.Fatalf("RemoveContainer(%s): %v", id, err)
			}
		}
	}
	waitFor(t, 10*time.Second, "the shared shim to exit with its last pod", func() (bool, string) {
		return gone(uint32(shared)), fmt.Sprintf("shim %d still runs", shared)
	})
	if gone(critical.sb.Pid) || gone(critical.ct.Pid) {
		t.Errorf("the critical pod's processes went with the shared shim")
	}
}

// TestSharedShimKilled: when a shared shim dies, every task it served is
// reported exited, so that each pod is restarted as after any exit (a
// container started again starts a new shim), and the critical pod's shim
// and tasks are untouched.
func TestSharedShimKilled(t *testing.T) {
	h := newHarness(t)
	exits := h.runExits()
	var ids []string
	var cts []pod.Record
	var pods []*pod.Pod
	for _, name := range []string{"one", "two"} {
		p := h.decode("/m/"+name+".yaml", sleeper(name, ""))
		sb := h.sandbox(p)
		ct := h.start(p, sb, "c", 0)
		ids = append(ids, ct.ID)
		cts, pods = append(cts, ct), append(pods, p)
	}
	shared := parentOf(t, cts[0].Pid)
	cp := h.decode("/m/critical.yaml", sleeper("critical", "  priorityClassName: system-cluster-critical\n"+sharedPID))
	csb := h.sandbox(cp)

	if err := unix.Kill(shared, unix.SIGKILL); err != nil {
		t.Fatalf("killing the shared shim %d: %v", shared, err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		e := nextExit(t, exits)
		if !want[e.ContainerID] {
			t.Fatalf("TaskExit of %s, want only those of the shared shim's tasks %v", e.ContainerID, want)
		}
		delete(want, e.ContainerID)
	}
	if gone(csb.Pid) {
		t.Errorf("the critical pod's pause went with the shared shim")
	}
	// A container started again, as after any exit, starts a new shared
	// shim.
	again := h.start(pods[0], h.sandboxRecord(pods[0]), "c", 1)
	if s := parentOf(t, again.Pid); s == shared || s == parentOf(t, csb.Pid) {
		t.Errorf("the container started again runs under shim %d, want a new one (the dead was %d)", s, shared)
	}
}

// TestSharedShimAcrossContainerdRestart: a containerd restarted under a
// shared shim, whose first pod is gone, reconnects to it: the other pod's
// tasks are still running and can be stopped, and a new pod joins the
// shim.
func TestSharedShimAcrossContainerdRestart(t *testing.T) {
	h := newHarness(t)
	var sbs, cts []pod.Record
	for _, name := range []string{"first", "second"} {
		p := h.decode("/m/"+name+".yaml", sleeper(name, ""))
		sb := h.sandbox(p)
		sbs, cts = append(sbs, sb), append(cts, h.start(p, sb, "c", 0))
	}
	shared := parentOf(t, cts[1].Pid)
	for _, id := range []string{cts[0].ID, sbs[0].ID} {
		if err := h.rt.RemoveContainer(h.ctx(), id); err != nil {
			t.Fatalf("RemoveContainer(%s): %v", id, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := h.env.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := h.rt.PodContainers(h.ctx(), sbs[1].Pod)
	if err != nil {
		t.Fatalf("PodContainers(%s) after the restart: %v", sbs[1].Pod, err)
	}
	if len(recs) != 2 {
		t.Errorf("after the restart, pod %s has %d containers, want 2", sbs[1].Pod, len(recs))
	}
	for _, r := range recs {
		if r.State != pod.TaskRunning || (r.Pid == 0) != r.NoPause {
			t.Errorf("after the restart, container %s = %+v, want running", r.ID, r)
		}
	}
	p := h.decode("/m/third.yaml", sleeper("third", ""))
	if s := parentOf(t, h.start(p, h.sandbox(p), "c", 0).Pid); s != shared {
		t.Errorf("a pod started after the restart runs under shim %d, want the shared %d", s, shared)
	}
	if err := h.rt.StopContainer(h.ctx(), cts[1].ID, 10*time.Second); err != nil {
		t.Errorf("StopContainer(%s) after the restart: %v", cts[1].ID, err)
	}
}

// sleeper is the manifest of pod name in namespace ns, whose spec starts
// with specHead, with one container c that sleeps.
func sleeper(name, specHead string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: ns
spec:
` + specHead + `  containers:
  - name: c
    image: localhost/busybox:test
    command: [sleep, "3600"]
`
}

// parentOf is the parent of process pid.
func parentOf(t *testing.T, pid uint32) int {
	t.Helper()
	p, err := procfs.Read(int(pid))
	if err != nil {
		t.Fatalf("reading process %d: %v", pid, err)
	}
	return p.PPID
}

// TestShimGone: the failures of a task's creation that pass when the shim
// it joined has gone are tried again; the others are not.
func TestShimGone(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{errors.New("failed to create shim task: ttrpc: closed"), true},
		{errors.New("failed to create shim task: dial unix /run/containerd/s/0a1b: connect: connection refused"), true},
		{errors.New("read unix @->/run/containerd/s/0a1b: read: connection reset by peer"), true},
		{errors.New("failed to create shim task: mkdir /run/containerd/io.containerd.runtime.v2.task/staticlet/0a1b: file exists"), false},
		{errors.New(`failed to create shim task: OCI runtime create failed: exec: "nope": executable file not found in $PATH`), false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := shimGone(tt.err); got != tt.want {
			t.Errorf("shimGone(%q) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestPickGroup: a sandbox goes to the group with fewest members among
// its class's first spread, to a later one once those are full, a full
// one passed over, one that emptied taken again.
func TestPickGroup(t *testing.T) {
	tests := []struct {
		count  map[string]int
		spread int
		want   string
	}{
		{nil, 1, "g"},
		{map[string]int{"g": 15}, 1, "g"},
		{map[string]int{"g": 16}, 1, "g-1"},
		{map[string]int{"g": 16, "g-1": 16, "g-2": 3}, 1, "g-2"},
		{map[string]int{"g": 2, "g-1": 16}, 1, "g"},
		{map[string]int{"g": 16, "g-2": 16}, 1, "g-1"},
		{map[string]int{"other": 40}, 1, "g"},
		{nil, 0, "g"},
		{nil, 2, "g"},
		{map[string]int{"g": 1}, 2, "g-1"},
		{map[string]int{"g": 1, "g-1": 1}, 2, "g"},
		{map[string]int{"g": 5, "g-1": 3}, 2, "g-1"},
		{map[string]int{"g": 2, "g-1": 3}, 4, "g-2"},
		{map[string]int{"g": 16, "g-1": 16}, 2, "g-2"},
		{map[string]int{"g": 16, "g-1": 16, "g-2": 16, "g-3": 9}, 2, "g-3"},
		{map[string]int{"g": 16, "g-1": 15, "g-2": 0}, 2, "g-1"},
	}
	for _, tt := range tests {
		if got := pickGroup("g", tt.count, 16, tt.spread); got != tt.want {
			t.Errorf("pickGroup(g, %v, spread %d) = %q, want %q", tt.count, tt.spread, got, tt.want)
		}
	}
}

// TestShimGroupsFillAtOnce: sandboxes made all at once, as at boot, each
// take a place in a shared shim group with room, though none waits for
// another's creation: with a spread of 1, the first shimGroupPods fill
// the class's first group and the rest go to the next; with 2, they
// split evenly.
func TestShimGroupsFillAtOnce(t *testing.T) {
	t.Run("spread 1", func(t *testing.T) { testShimGroupsFillAtOnce(t, 1, []int{shimGroupPods, 4}) })
	t.Run("spread 2", func(t *testing.T) { testShimGroupsFillAtOnce(t, 2, []int{10, 10}) })
}

func testShimGroupsFillAtOnce(t *testing.T, spread int, want []int) {
	h := newHarnessWith(t, func(c *Config) { c.ShimSpread = spread })
	const n = shimGroupPods + 4
	pods := make([]*pod.Pod, n)
	for i := range pods {
		pods[i] = h.decode(fmt.Sprintf("/m/many%d.yaml", i), sleeper(fmt.Sprintf("many%d", i), ""))
	}
	recs := make([]pod.Record, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { recs[i], errs[i] = h.rt.CreateSandbox(h.ctx(), p) })
	}
	wg.Wait()
	for i, p := range pods {
		if errs[i] != nil {
			t.Fatalf("CreateSandbox(%s): %v", p, errs[i])
		}
		h.removeAtEnd(recs[i].ID)
		t.Cleanup(func() { _ = h.rt.removePodCgroups(context.Background(), string(p.UID)) })
	}
	cs, err := h.client.ContainerService().List(h.nsCtx(), fmt.Sprintf("labels.%q", LabelShimGroup))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range cs {
		count[c.Labels[LabelShimGroup]]++
	}
	var sizes []int
	for _, k := range slices.Sorted(maps.Keys(count)) {
		sizes = append(sizes, count[k])
	}
	if !slices.Equal(sizes, want) {
		t.Errorf("sandboxes per shim group = %v, want %v", count, want)
	}
	// The next choice counts them from its listing, and forgets them.
	next := h.createSandbox(h.decode("/m/next.yaml", sleeper("next", "")))
	if _, ok := h.rt.groups.making[next.ID]; !ok || len(h.rt.groups.making) != 1 {
		t.Errorf("sandboxes pending after the next was made: %v, want the next only", slices.Collect(maps.Keys(h.rt.groups.making)))
	}
	if got := h.sandboxLabel(next.ID, LabelShimGroup); count[got] != slices.Min(sizes) {
		t.Errorf("the next sandbox went to group %q, want one with fewest (%v)", got, count)
	}
}

// sandboxLabel returns label key of container id.
func (h *harness) sandboxLabel(id, key string) string {
	h.t.Helper()
	c, err := h.client.ContainerService().Get(h.nsCtx(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return c.Labels[key]
}
