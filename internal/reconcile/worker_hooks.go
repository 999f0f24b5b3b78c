package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

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
