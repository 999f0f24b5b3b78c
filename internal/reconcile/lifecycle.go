package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// minGraceAfterPreStop is the least time a container gets between its stop
// signal and SIGKILL once its preStop hook has run, however much of the
// grace period the hook used: the kubelet's minimum of 2 seconds.
const minGraceAfterPreStop = 2 * time.Second

// stopContainer stops container r, started from a spec of p or of the pod
// as last specified: its preStop hook first, when that spec has one and r
// runs, then its stop signal. grace bounds the two together: what the hook
// used is taken from it, leaving at least minGraceAfterPreStop for the
// signal, as with the kubelet.
func (w *worker) stopContainer(ctx context.Context, r pod.Record, grace time.Duration, p *pod.Pod) error {
	if r.Kind != pod.KindSandbox && r.State == pod.TaskRunning && grace > 0 {
		if req, ok := w.requestFor(r, p); ok && req.Container.Lifecycle != nil && req.Container.Lifecycle.PreStop != nil {
			start := time.Now()
			w.preStop(ctx, r.ID, req, grace)
			grace = max(grace-time.Since(start), minGraceAfterPreStop)
		}
	}
	return w.rt.StopContainer(ctx, r.ID, grace)
}

// preStop runs the preStop hook of container id for at most grace. A
// failure is an event; the container is stopped all the same.
func (w *worker) preStop(ctx context.Context, id string, req pod.ContainerRequest, grace time.Duration) {
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	msg, err := w.runHook(hctx, id, req, req.Container.Lifecycle.PreStop)
	switch {
	case err == nil:
	case ctx.Err() != nil:
	case hctx.Err() != nil:
		// The grace period is over: the stop signal follows at once.
		w.log.Info("preStop hook did not finish within the grace period", "container", req.Container.Name, "grace", grace)
	default:
		w.event(req.Container.Name, pod.EventWarning, "FailedPreStopHook", msg)
	}
}

// postStart runs the postStart hook of container rec, just started for
// req, as the kubelet does: until it returns the container does not count
// as started. A failed hook is a FailedPostStartHook event, and the
// container is stopped (its preStop hook included) so that its restart
// policy decides what follows; the error returned is a retryLater for the
// next look. A hook made pointless by a new spec is abandoned.
func (w *worker) postStart(ctx context.Context, rec pod.Record, req pod.ContainerRequest) error {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	w.hook = &runningHook{cancel: cancel, pod: req.Pod, container: req.Container}
	if w.hook.obsolete(w.desired) {
		cancel()
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.hook = nil
		w.mu.Unlock()
	}()

	msg, err := w.runHook(hctx, rec.ID, req, req.Container.Lifecycle.PostStart)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case hctx.Err() != nil:
		// The spec changed under the hook: the next look replaces or
		// removes the container.
		w.log.Info("postStart hook abandoned: the pod changed", "container", req.Container.Name)
		return &retryLater{at: w.now()}
	}
	c := req.Container
	w.event(c.Name, pod.EventWarning, "FailedPostStartHook", msg)
	w.event(c.Name, pod.EventNormal, "Killing", fmt.Sprintf("Container %s failed post-start hook, will be killed", c.Name))
	if err := w.stopContainer(ctx, rec, podGrace(req.Pod), req.Pod); err != nil {
		return fmt.Errorf("stopping container %q of pod %s after its postStart hook failed: %w", c.Name, req.Pod, err)
	}
	return &retryLater{at: w.now(), err: fmt.Errorf("postStart hook of container %q of pod %s: %w", c.Name, req.Pod, err)}
}

// runningHook is the postStart hook the worker is waiting on, which set
// cancels when the pod changes so much that the hook is pointless.
type runningHook struct {
	cancel    context.CancelFunc
	pod       *pod.Pod
	container *v1.Container
}

// obsolete tells whether the container the hook runs for will be stopped
// for desired: the pod is removed or replaced, or the container changed.
func (h *runningHook) obsolete(desired *pod.Pod) bool {
	if desired == nil || desired.SandboxHash != h.pod.SandboxHash {
		return true
	}
	want := pod.ContainerHash(h.container)
	for _, cs := range [][]v1.Container{desired.Spec.InitContainers, desired.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == h.container.Name {
				return pod.ContainerHash(&cs[i]) != want
			}
		}
	}
	return true
}

// runHook runs lifecycle handler h of container id and, when it fails,
// returns the message the kubelet gives the failure's event.
func (w *worker) runHook(ctx context.Context, id string, req pod.ContainerRequest, h *v1.LifecycleHandler) (string, error) {
	c, p := req.Container.Name, fmt.Sprintf("%s_%s(%s)", req.Pod.Name, req.Pod.Namespace, req.Pod.UID)
	switch {
	case h.Exec != nil:
		if err := w.rt.RunHook(ctx, id, req, h); err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v", h.Exec.Command, c, p, err), err
		}
	case h.HTTPGet != nil:
		if err := w.rt.RunHook(ctx, id, req, h); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c, p, err), err
		}
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			err := fmt.Errorf("container terminated before sleep hook finished: %w", ctx.Err())
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, c, p, err), err
		}
	default:
		// tcpSocket passes validation but is no lifecycle handler.
		err := errors.New("invalid handler: tcpSocket is not supported as a lifecycle handler")
		return fmt.Sprintf("Cannot run handler: %v", err), err
	}
	return "", nil
}

// requestFor finds the spec container r was started from, by name and
// hash, in p or in the pod as last specified; false when neither has it
// (a container of a pod staticlet has not seen since it started).
func (w *worker) requestFor(r pod.Record, p *pod.Pod) (pod.ContainerRequest, bool) {
	// The pod r was started for, by UID, comes first: its pod-level
	// settings (hostNetwork) are the ones r runs with.
	cands := []*pod.Pod{p, w.last}
	if w.last != nil && string(w.last.UID) == r.PodUID {
		cands[0], cands[1] = w.last, p
	}
	for _, cand := range cands {
		if cand == nil {
			continue
		}
		for _, cs := range [][]v1.Container{cand.Spec.InitContainers, cand.Spec.Containers} {
			for i := range cs {
				if cs[i].Name == r.Name && pod.ContainerHash(&cs[i]) == r.Hash {
					return pod.ContainerRequest{Pod: cand, Sandbox: pod.Record{ID: r.SandboxID, PodUID: r.PodUID},
						Container: &cs[i], Kind: r.Kind, Attempt: r.Attempt}, true
				}
			}
		}
	}
	return pod.ContainerRequest{}, false
}

// podGrace is p's termination grace period.
func podGrace(p *pod.Pod) time.Duration {
	if p != nil && p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return defaultGrace
}
