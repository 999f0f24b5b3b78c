package reconcile

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestRunPullShowsContainerCreating: while an image is pulled the pod is
// reported with its container in ContainerCreating and a Pulling event;
// then Pulled, and the container starts.
func TestRunPullShowsContainerCreating(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{image: "busybox"}) // no tag: policy Always
		h := newHarness(t, Config{})
		gate := make(chan struct{})
		h.rt.pullGate = gate
		h.set(p)

		st := h.status(p)
		if st == nil {
			t.Fatal("no status reported while the image is pulled")
		}
		if cs := containerStatusOf(t, st, "app"); cs.State.Waiting == nil || cs.State.Waiting.Reason != "ContainerCreating" {
			t.Errorf("app while pulling: %s, want waiting:ContainerCreating", stateString(cs.State))
		}
		if st.Status.Phase != v1.PodPending {
			t.Errorf("phase while pulling = %s, want Pending", st.Status.Phase)
		}
		ev := h.rep.eventsWith("Pulling")
		if len(ev) != 1 || ev[0].Type != pod.EventNormal || ev[0].Message != `Pulling image "busybox"` || ev[0].Container != "app" {
			t.Errorf("Pulling events = %+v, want one for app", ev)
		}
		if n := len(h.since(0, "start")); n != 0 {
			t.Errorf("%d starts before the pull ended, want none", n)
		}

		close(gate)
		h.sleep(0)
		ev = h.rep.eventsWith("Pulled")
		if len(ev) != 1 || !strings.HasPrefix(ev[0].Message, `Successfully pulled image "busybox" in `) {
			t.Errorf("Pulled events = %+v, want one saying how long it took", ev)
		}
		if got := h.ops(0, "pull", "start"); strings.Join(got, ",") != "pull busybox,start app app#0" {
			t.Errorf("ops = %v, want the pull, then the start", got)
		}
		if cs := containerStatusOf(t, h.status(p), "app"); cs.State.Running == nil {
			t.Errorf("app after the pull: %s, want running", stateString(cs.State))
		}
	})
}

// TestRunImagePullBackOff: a failed pull is ErrImagePull, then
// ImagePullBackOff with a growing delay, the registry's reason in the
// status and events; once the registry answers, the container starts.
func TestRunImagePullBackOff(t *testing.T) {
	bubble(t, func(t *testing.T) {
		image := "registry.example/app:1"
		p := mkPod(t, podSpec{image: image})
		h := newHarness(t, Config{})
		pullErr := &pod.WaitingError{Reason: "ErrImagePull", Err: errors.New(`pulling image "registry.example/app:1": 401 Unauthorized`)}
		h.rt.setImage(image, false, pullErr)
		h.set(p)

		waiting := func(reason string) {
			t.Helper()
			st := h.status(p)
			cs := containerStatusOf(t, st, "app")
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != reason || !strings.Contains(cs.State.Waiting.Message, "401 Unauthorized") {
				t.Errorf("app: %+v, want waiting %s with the registry's reason", cs.State, reason)
			}
			if st.Status.Phase != v1.PodPending || cs.RestartCount != 0 {
				t.Errorf("phase %s, restartCount %d; want Pending, 0", st.Status.Phase, cs.RestartCount)
			}
		}
		waiting("ErrImagePull")
		if ev := h.rep.eventsWith("Failed"); len(ev) != 1 || ev[0].Type != pod.EventWarning || !strings.Contains(ev[0].Message, "401") {
			t.Errorf("Failed events = %+v, want one warning with the registry's reason", ev)
		}

		// Retried after 1s, then 2s more, then 4s more.
		m := h.mark()
		h.sleep(1500 * time.Millisecond)
		waiting("ImagePullBackOff")
		h.sleep(5 * time.Second)
		if got := h.ops(m, "pull", "start"); strings.Join(got, ",") != "pull registry.example/app:1 failed,pull registry.example/app:1 failed" {
			t.Errorf("calls in 6.5s = %v, want two failed pulls (at 1s and 3s)", got)
		}
		if n := len(h.rep.eventsWith("BackOff")); n != 2 {
			t.Errorf("%d BackOff events, want 2", n)
		}
		if n := len(h.rep.eventsWith("Failed")); n != 3 {
			t.Errorf("%d Failed events, want 3: one per failed pull", n)
		}

		// The registry lets the pull through: the next retry starts it.
		h.rt.setImage(image, false, nil)
		m = h.mark()
		h.sleep(4 * time.Second)
		if got := h.ops(m, "pull", "start"); strings.Join(got, ",") != "pull registry.example/app:1,start app app#0" {
			t.Errorf("calls = %v, want a pull, then the start", got)
		}
		if cs := containerStatusOf(t, h.status(p), "app"); cs.State.Running == nil {
			t.Errorf("app: %s, want running", stateString(cs.State))
		}
	})
}

// TestRunPullFailsImagePresent: under policy Always, a failed pull of an
// image the node has runs that image, with a warning.
func TestRunPullFailsImagePresent(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{image: "registry.example/app"})
		h := newHarness(t, Config{})
		h.rt.setImage("registry.example/app", true, errors.New("dial tcp: connection refused"))
		h.set(p)
		if got := h.ops(0, "pull", "start"); strings.Join(got, ",") != "pull registry.example/app failed,start app app#0" {
			t.Errorf("calls = %v, want a failed pull, then the start", got)
		}
		ev := h.rep.eventsWith("Failed")
		if len(ev) != 1 || ev[0].Type != pod.EventWarning || !strings.Contains(ev[0].Message, "using the image already present") {
			t.Errorf("Failed events = %+v, want one warning that the present image runs", ev)
		}
		if cs := containerStatusOf(t, h.status(p), "app"); cs.State.Running == nil {
			t.Errorf("app: %s, want running", stateString(cs.State))
		}
	})
}

// TestRunPullPolicies: IfNotPresent pulls only a missing image, Never
// pulls nothing.
func TestRunPullPolicies(t *testing.T) {
	bubble(t, func(t *testing.T) {
		p := mkPod(t, podSpec{apps: []string{"a", "b"}, imageOf: map[string]string{"a": "present:1", "b": "missing:1"}})
		h := newHarness(t, Config{})
		h.rt.setImage("missing:1", false, nil)
		h.set(p)
		if got := h.ops(0, "pull"); strings.Join(got, ",") != "pull missing:1" {
			t.Errorf("pulls = %v, want only the missing image's", got)
		}
		ev := h.rep.eventsWith("Pulled")
		if len(ev) != 2 {
			t.Fatalf("Pulled events = %+v, want one per container", ev)
		}
		for _, e := range ev {
			want := map[string]string{"a": `Container image "present:1" already present on machine`, "b": `Successfully pulled image "missing:1" in `}[e.Container]
			if !strings.HasPrefix(e.Message, want) {
				t.Errorf("Pulled event of %s = %q, want %q", e.Container, e.Message, want)
			}
		}

		never := mkPod(t, podSpec{name: "never", image: "busybox"})
		never.Spec.Containers[0].ImagePullPolicy = v1.PullNever
		m := h.mark()
		h.set(p, never)
		if got := h.ops(m, "pull", "start"); strings.Join(got, ",") != "start app app#0" {
			t.Errorf("calls for a Never pod = %v, want a start and no pull", got)
		}
	})
}
