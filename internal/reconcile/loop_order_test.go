package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// orderPod is a hostNetwork pod that needs the pods after names
// (staticlet.io/after), serves port serves (when not 0) and reaches port
// reaches (when not 0) on 127.0.0.1; it has a preStop hook.
func orderPod(t *testing.T, name, after string, serves, reaches int) *pod.Pod {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: kube-system\n", name)
	if after != "" {
		fmt.Fprintf(&b, "  annotations: {%s: %q}\n", pod.AnnotationAfter, after)
	}
	b.WriteString("spec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: c\n    image: busybox:1.36\n")
	fmt.Fprintf(&b, "    command: [app, --listen=127.0.0.1:%d, --server=https://127.0.0.1:%d]\n", serves, reaches)
	b.WriteString("    lifecycle:\n" + preStopExec)
	return decodePod(t, b.String())
}

func TestStopGraph(t *testing.T) {
	k := func(name string) pod.Key { return pod.Key{Namespace: "kube-system", Name: name + "-n"} }
	pods := map[pod.Key]*pod.Pod{}
	for _, spec := range []struct {
		name, after     string
		serves, reaches int
	}{
		{"etcd", "", 2379, 0},
		{"api", "", 6443, 2379},   // needs etcd by its port
		{"ctrl", "api", 10257, 0}, // needs api by its annotation
		{"lone", "", 9000, 0},
		{"lone2", "", 0, 0},
		// peers reach each other: one of the two needs is left out
		{"peer-a", "", 7001, 7002},
		{"peer-b", "", 7002, 7001},
		// a declared need wins over an inferred one the other way
		{"decl", "infer", 7101, 0},
		{"infer", "", 7102, 7101},
	} {
		pods[k(spec.name)] = orderPod(t, spec.name, spec.after, spec.serves, spec.reaches)
	}
	// An orphan's needs come from its labels; one with none needs nothing.
	orphans := map[pod.Key]pod.StopNeeds{k("orphan-api"): pods[k("api")].StopNeeds()}
	needsOf := func(key pod.Key) (pod.StopNeeds, bool) {
		if p := pods[key]; p != nil {
			return p.StopNeeds(), true
		}
		n, ok := orphans[key]
		return n, ok
	}
	all := []pod.Key{k("lone"), k("etcd"), k("api"), k("ctrl"), k("lone2"), k("peer-a"), k("peer-b"), k("decl"), k("infer"), k("orphan")}
	tests := []struct {
		keys []pod.Key
		want map[string][]string // pod: those that stop before it
	}{
		{all, map[string][]string{"etcd": {"api"}, "api": {"ctrl"}, "peer-b": {"peer-a"}, "infer": {"decl"}}},
		// apart, what stops with them is what counts
		{[]pod.Key{k("etcd"), k("ctrl")}, map[string][]string{}},
		{[]pod.Key{k("etcd"), k("orphan-api"), k("orphan")}, map[string][]string{"etcd": {"orphan-api"}}},
		{[]pod.Key{k("peer-b"), k("peer-a")}, map[string][]string{"peer-b": {"peer-a"}}},
	}
	for _, tt := range tests {
		graph := stopGraph(tt.keys, needsOf)
		got := map[string][]string{}
		for key, before := range graph {
			for _, b := range before {
				got[strings.TrimSuffix(key.Name, "-n")] = append(got[strings.TrimSuffix(key.Name, "-n")], strings.TrimSuffix(b.Name, "-n"))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("stopGraph(%v) = %v, want %v", tt.keys, got, tt.want)
		}
	}
}

// stopOrder returns the pods whose containers (named "c") were stopped
// after mark, in the order of their first stop.
func (h *harness) stopOrder(mark int) []string {
	var out []string
	for _, c := range h.since(mark, "stop") {
		if c.name == "c" || strings.HasSuffix(c.id, "-c") {
			if name := strings.TrimSuffix(c.pod.Name, "-n"); !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// chainABC runs pods a, b and c, where c needs b, and b needs a by its
// port, and the slow pods s1..s12, whose preStop hooks take 3s.
func chainABC(t *testing.T) (*harness, []*pod.Pod) {
	t.Helper()
	a := orderPod(t, "a", "", 7001, 0)
	b := orderPod(t, "b", "", 7002, 7001)
	c := orderPod(t, "c", "b", 7003, 0)
	h := newHarness(t, Config{})
	pods := []*pod.Pod{c, b, a}
	for i := range 12 {
		s := shutdownPod(t, fmt.Sprintf("s%d", i+1), "", 5, true)
		pods = append(pods, s)
	}
	h.rt.setHook("preStop", "c", fakeHook{takes: 3 * time.Second})
	h.set(pods...)
	return h, pods
}

// chainStops returns the order chainABC's chain stopped in after mark.
func (h *harness) chainStops(mark int) []string {
	return slices.DeleteFunc(h.stopOrder(mark), func(n string) bool { return n != "a" && n != "b" && n != "c" })
}

// waitAllGone waits until nothing of pods is left.
func (h *harness) waitAllGone(pods []*pod.Pod) {
	h.t.Helper()
	h.waitFor(time.Minute, "every pod gone", func() bool {
		return !slices.ContainsFunc(pods, func(p *pod.Pod) bool { return len(h.rt.records(p.Key())) > 0 })
	})
}

// TestRemoveTogether: pods removed together stop at once, but a pod that
// needs another before it: twelve unrelated pods that take 3s each to stop
// are gone after 3s, not 36s, beside a chain of three that takes 9s.
func TestRemoveTogether(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, pods := chainABC(t)
		m := h.mark()
		begin := time.Now()
		h.set()
		h.waitFor(time.Minute, "the unrelated pods gone", func() bool {
			return !slices.ContainsFunc(pods[3:], func(p *pod.Pod) bool { return len(h.rt.records(p.Key())) > 0 })
		})
		if took := time.Since(begin); took > 4*time.Second {
			t.Errorf("twelve unrelated pods that take 3s to stop were gone after %s, want about 3s: they stop at once", took)
		}
		h.waitAllGone(pods)
		if took := time.Since(begin); took > 10*time.Second {
			t.Errorf("every pod gone after %s, want about 9s: three in a row of 3s", took)
		}
		if chain := h.chainStops(m); !slices.Equal(chain, []string{"c", "b", "a"}) {
			t.Errorf("stopped %q, want c, b, a: each needs the next", chain)
		}
	})
}

// TestRemoveOrderWaitsForProcessesOnly: a pod that stops after another
// begins once that one's containers ended, not once they and its sandbox
// are gone: with every sandbox's stop and every removal held, the chain's
// containers still stop, each after the one that needs it.
func TestRemoveOrderWaitsForProcessesOnly(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, pods := chainABC(t)
		m := h.mark()
		gate := make(chan struct{})
		h.rt.mu.Lock()
		h.rt.sandboxStopGate, h.rt.removeGate = gate, gate
		h.rt.mu.Unlock()
		h.set()
		synctest.Wait()
		h.sleep(10 * time.Second)
		if chain := h.chainStops(m); !slices.Equal(chain, []string{"c", "b", "a"}) {
			t.Errorf("containers stopped while the sandboxes' stops and every removal are held: %q, want c, b, a", chain)
		}
		close(gate)
		h.waitAllGone(pods)
	})
}

// TestHeldPodStartsNothing: a pod whose removal waits for another to stop
// first is not restarted when it exits meanwhile: its manifest is gone.
func TestHeldPodStartsNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		etcd := orderPod(t, "etcd", "", 2379, 0)
		api := orderPod(t, "api", "", 6443, 2379)
		h := newHarness(t, Config{})
		h.rt.setHook("preStop", "c", fakeHook{takes: 3 * time.Second})
		h.set(etcd, api)
		m := h.mark()
		h.set()
		synctest.Wait()
		h.exit(h.rt.newest(t, etcd.Key(), "c").ID, 1)
		h.waitAllGone([]*pod.Pod{etcd, api})
		for _, c := range h.since(m, "start", "create") {
			t.Errorf("%s %s/%s while both pods were being removed", c.op, c.pod, c.name)
		}
	})
}

// TestOrphansStopInOrder: pods found at start with no manifest stop in
// the order their containers' labels tell: with kube-apiserver's stop
// held, etcd is not stopped.
func TestOrphansStopInOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		etcd := orderPod(t, "etcd", "", 2379, 0)
		api := orderPod(t, "api", "", 6443, 2379)
		var recs []pod.Record
		for _, p := range []*pod.Pod{etcd, api} {
			for _, r := range runningRecs(p, "sb-"+strings.TrimSuffix(p.Name, "-n"), 0) {
				r.StopNeeds = p.StopNeeds().String()
				recs = append(recs, r)
			}
		}
		h := newHarness(t, Config{}, recs...)
		gate := make(chan struct{})
		h.rt.mu.Lock()
		h.rt.stopGates = map[pod.Key]chan struct{}{api.Key(): gate}
		h.rt.mu.Unlock()
		h.set()
		h.sleep(time.Second)
		if stops := h.since(0, "stop"); len(stops) != 0 {
			t.Errorf("stopped %v while kube-apiserver's stop is held, want nothing: etcd waits for it", stops)
		}
		close(gate)
		h.waitAllGone([]*pod.Pod{etcd, api})
		if got := h.stopOrder(0); !slices.Equal(got, []string{"api", "etcd"}) {
			t.Errorf("stopped %q, want api, then etcd", got)
		}
	})
}

// TestAfterStartsAndStopsInOrder: a pod that starts after another is made
// once that one is Ready, and stopped before it.
func TestAfterStartsAndStopsInOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		etcd := shutdownPod(t, "etcd", "", 5, false)
		api := shutdownPod(t, "api", "", 5, false)
		annotate(api, pod.AnnotationAfter, "etcd")
		h := newHarness(t, Config{})
		h.set(api, etcd)
		var order []string
		for _, c := range h.since(0, "create", "start") {
			order = append(order, c.op+" "+strings.TrimSuffix(c.pod.Name, "-n"))
		}
		if i, j := slices.Index(order, "start etcd"), slices.Index(order, "create api"); i < 0 || j < 0 || j < i {
			t.Errorf("calls %q: want api's sandbox made after etcd's container started", order)
		}
		// Whether api's first look comes before etcd is Ready is up to the
		// scheduler: it waits once at most.
		if n := len(h.rep.eventsWith("WaitingForPods")); n > 1 {
			t.Errorf("%d WaitingForPods events, want at most 1", n)
		}
		m := h.mark()
		h.set()
		h.waitFor(time.Minute, "every pod gone", func() bool { return len(h.rt.records(etcd.Key())) == 0 && len(h.rt.records(api.Key())) == 0 })
		if got := h.stopOrder(m); !slices.Equal(got, []string{"api", "etcd"}) {
			t.Errorf("stopped %q, want api before etcd", got)
		}
	})
}

// TestAfterMissingWaitsThenStarts: a pod that starts after one that is
// not there waits AfterWait, then starts, and says so.
func TestAfterMissingWaitsThenStarts(t *testing.T) {
	bubble(t, func(t *testing.T) {
		api := shutdownPod(t, "api", "", 5, false)
		annotate(api, pod.AnnotationAfter, "etcd")
		h := newHarness(t, Config{AfterWait: 30 * time.Second})
		h.set(api)
		if n := len(h.since(0, "create")); n != 0 {
			t.Fatalf("%d sandboxes made before the wait, want none", n)
		}
		h.sleep(29 * time.Second)
		if n := len(h.since(0, "create")); n != 0 {
			t.Fatalf("%d sandboxes made before the wait is over, want none", n)
		}
		h.sleep(2 * time.Second)
		if n := len(h.since(0, "create")); n != 1 {
			t.Errorf("%d sandboxes made once the wait is over, want 1", n)
		}
		if n := len(h.rep.eventsWith("DependencyTimeout")); n != 1 {
			t.Errorf("%d DependencyTimeout events, want 1", n)
		}
	})
}

// TestShutdownOrder: a node shutdown stops the regular pods at once, but
// a pod that needs another before it: fifty unrelated pods whose preStop
// hooks take 4s are all stopped within the 6s grace period, and so is
// the one that waits for another.
func TestShutdownOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		etcd := orderPod(t, "etcd", "", 2379, 0)
		api := orderPod(t, "api", "", 6443, 2379)
		pods := []*pod.Pod{etcd, api}
		for i := range 50 {
			pods = append(pods, shutdownPod(t, fmt.Sprintf("s%d", i+1), "", 30, true))
		}
		h := newHarness(t, Config{})
		// etcd waits for api's 4s: it has 2s left for its own 4s.
		h.rt.setHook("preStop", "c", fakeHook{takes: 4 * time.Second})
		h.set(pods...)
		m := h.mark()
		begin := time.Now()
		if err := h.shutdownNode(t.Context(), 6*time.Second, 6*time.Second, time.Minute); err != nil {
			t.Fatalf("ShutdownNode = %v, want nil", err)
		}
		if took := time.Since(begin); took > 6*time.Second {
			t.Errorf("the shutdown took %s, want within the 6s grace period", took)
		}
		got := h.stopOrder(m)
		if len(got) != len(pods) || slices.Index(got, "api") > slices.Index(got, "etcd") {
			t.Errorf("stopped %q, want all %d, api before etcd", got, len(pods))
		}
		for _, c := range h.since(m, "hook") {
			if cut := c.err != nil; cut != (c.pod == etcd.Key()) {
				t.Errorf("preStop hook of %s: %v; want only etcd's cut short, by what is left of the grace period", c.pod, c.err)
			}
		}
	})
}
