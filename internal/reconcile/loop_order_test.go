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

func TestStopsBefore(t *testing.T) {
	k := func(name string) pod.Key { return pod.Key{Namespace: "kube-system", Name: name + "-n"} }
	pods := map[pod.Key]*pod.Pod{}
	for _, spec := range []struct{ name, after string }{
		{"etcd", ""}, {"api", "etcd"}, {"ctrl", "api"}, {"lone", ""}, {"early", "late"}, {"late", ""},
	} {
		p := &pod.Pod{Pod: decodePod(t, fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: kube-system\nspec:\n  containers:\n  - name: c\n    image: busybox\n", spec.name)).Pod}
		if spec.after != "" {
			annotate(p, pod.AnnotationAfter, spec.after)
		}
		pods[k(spec.name)] = p
	}
	book := newReadyBook()
	// Ready in this order; "lone" never; "early" (which starts after
	// "late") became Ready before it, its wait having run out.
	for _, n := range []string{"etcd", "early", "api", "ctrl", "late"} {
		book.note(k(n), true)
	}
	all := []pod.Key{k("etcd"), k("api"), k("ctrl"), k("lone"), k("early"), k("late")}
	for _, tt := range []struct {
		pod  string
		want []string
	}{
		{"etcd", []string{"api", "ctrl", "early", "late"}}, // all became Ready after it
		{"api", []string{"ctrl", "late"}},
		{"ctrl", []string{"late"}},
		{"lone", nil},                      // never Ready, needed by none: it goes at once
		{"late", []string{"early"}},        // needed by "early", which goes first whatever their readiness
		{"early", []string{"api", "ctrl"}}, // not "late", which it needs: it goes before it, though "late" became Ready after it
	} {
		got := stopsBefore(k(tt.pod), all, pods, book)
		var names []string
		for _, g := range got {
			names = append(names, strings.TrimSuffix(g.Name, "-n"))
		}
		slices.Sort(names)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("stopsBefore(%s) = %q, want %q", tt.pod, names, want)
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

// readyABC runs pods a, b and c, made Ready in that order.
func readyABC(t *testing.T) (*harness, []*pod.Pod) {
	t.Helper()
	a := shutdownPod(t, "a", "", 5, false)
	b := shutdownPod(t, "b", "", 5, false)
	c := shutdownPod(t, "c", "", 5, false)
	h := newHarness(t, Config{})
	h.set(a)
	h.set(a, b)
	h.set(a, b, c)
	return h, []*pod.Pod{a, b, c}
}

// waitAllGone waits until nothing of pods is left.
func (h *harness) waitAllGone(pods []*pod.Pod) {
	h.t.Helper()
	h.waitFor(time.Minute, "every pod gone", func() bool {
		return !slices.ContainsFunc(pods, func(p *pod.Pod) bool { return len(h.rt.records(p.Key())) > 0 })
	})
}

// TestRemoveInReverseReadyOrder: pods removed together stop in the
// reverse of the order they became Ready, each once the containers of the
// one before ended.
func TestRemoveInReverseReadyOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, pods := readyABC(t)
		m := h.mark()
		h.set()
		h.waitAllGone(pods)
		if got := h.stopOrder(m); !slices.Equal(got, []string{"c", "b", "a"}) {
			t.Errorf("stopped %q, want c, b, a: the reverse of the order they became Ready", got)
		}
	})
}

// TestRemoveOrderWaitsForProcessesOnly: a pod that stops after another
// begins once that one's containers ended, not once they and its sandbox
// are gone: with every sandbox's stop and every removal held, the three
// pods' containers still stop, in the reverse of the order they became
// Ready.
func TestRemoveOrderWaitsForProcessesOnly(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h, pods := readyABC(t)
		m := h.mark()
		gate := make(chan struct{})
		h.rt.mu.Lock()
		h.rt.sandboxStopGate, h.rt.removeGate = gate, gate
		h.rt.mu.Unlock()
		h.set()
		synctest.Wait()
		if got := h.stopOrder(m); !slices.Equal(got, []string{"c", "b", "a"}) {
			t.Errorf("containers stopped while the sandboxes' stops and every removal are held: %q, want c, b, a", got)
		}
		close(gate)
		h.waitAllGone(pods)
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

// TestShutdownInReverseReadyOrder: a node shutdown stops the regular pods
// in the reverse of the order they became Ready, the one that starts after
// another first.
func TestShutdownInReverseReadyOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		a := shutdownPod(t, "a", "", 5, false)
		b := shutdownPod(t, "b", "", 5, false)
		etcd := shutdownPod(t, "etcd", "", 5, false)
		api := shutdownPod(t, "api", "", 5, false)
		annotate(api, pod.AnnotationAfter, "etcd")
		h := newHarness(t, Config{})
		h.set(a)
		h.set(a, b)
		h.set(a, b, etcd, api)
		m := h.mark()
		if err := h.shutdownNode(t.Context(), 20*time.Second, 10*time.Second, time.Minute); err != nil {
			t.Fatalf("ShutdownNode = %v, want nil", err)
		}
		got := h.stopOrder(m)
		if len(got) != 4 || !slices.Equal(got[2:], []string{"b", "a"}) || slices.Index(got, "api") > slices.Index(got, "etcd") {
			t.Errorf("stopped %q, want api before etcd, both before b, then a", got)
		}
	})
}
