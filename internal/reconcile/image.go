package reconcile

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// ensureImage pulls container c's image when its pull policy says so,
// before c starts in sandbox sb. While the pull runs the pod is reported
// with c waiting in ContainerCreating and a Pulling event, as the
// kubelet shows it; the pull blocks only this pod's worker.
func (w *worker) ensureImage(ctx context.Context, p *pod.Pod, sb pod.Record, c *v1.Container) error {
	need, err := w.rt.ImageNeedsPull(ctx, c)
	if err != nil {
		return err
	}
	if !need {
		if c.ImagePullPolicy != v1.PullNever {
			w.event(c.Name, pod.EventNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
		}
		return nil
	}
	// Keep the failure count for the backoff; the last failure's message
	// goes, so the next failure is told as an event again.
	w.waiting[c.Name] = waitingState{reason: "ContainerCreating", failures: w.waiting[c.Name].failures}
	// Only for the status shown during the pull: a failed listing leaves
	// the previous one, and the pass's own report follows.
	_ = w.reportFresh(ctx, p, sb)
	w.event(c.Name, pod.EventNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	start := time.Now()
	present, err := w.rt.PullImage(ctx, c)
	switch {
	case err == nil:
		w.event(c.Name, pod.EventNormal, "Pulled",
			fmt.Sprintf("Successfully pulled image %q in %s", c.Image, time.Since(start).Round(time.Millisecond)))
	case present:
		// Policy Always on a node that cannot reach the registry: run what
		// the node has rather than nothing.
		w.event(c.Name, pod.EventWarning, "Failed", fmt.Sprintf("%v; using the image already present", err))
		w.log.Warn("pull failed; using the image already present", "image", c.Image, "err", err)
		return nil
	}
	return err
}
