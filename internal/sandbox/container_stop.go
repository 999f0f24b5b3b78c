package sandbox

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/moby/sys/signal"
)

// killWait bounds the wait for a process to die after SIGKILL.
const killWait = 10 * time.Second

// LabelStopSignal records, when a container is created, the signal that
// stops it (lifecycle.stopSignal, else the image's STOPSIGNAL, else
// SIGTERM), so that a restarted staticlet stops it the same way.
const LabelStopSignal = labelPrefix + "stop-signal"

// StopContainer stops container id's process: its stop signal (SIGTERM
// unless its label says otherwise), then SIGKILL once grace has passed. It
// returns when the process has exited, or at once if it is not running.
// Running a preStop hook first is the caller's business.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	nctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(nctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading container %s: %w", id, err)
	}
	// Loading fetched the labels: the stop signal is among them.
	info, err := c.Info(nctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return fmt.Errorf("loading container %s: %w", id, err)
	}
	t, err := r.loadTask(nctx, c)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	// A task that exited already answers the wait at once and the signal
	// with NotFound; one the exit handler deleted meanwhile (settleExit)
	// is NotFound to both, or, when it was its shim's last task, may fail
	// for the shim going away (stoppedWithShim). Pods stopped in order
	// stop one after another, so each call here counts.
	wctx, wcancel := context.WithCancel(r.nsContext(ctx))
	defer wcancel()
	exited, err := t.Wait(wctx)
	if errdefs.IsNotFound(err) || err != nil && r.stoppedWithShim(nctx, id, err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("waiting on container %s: %w", id, err)
	}
	if err := t.Kill(nctx, r.stopSignal(c.ID(), info.Labels)); err != nil && !errdefs.IsNotFound(err) {
		if r.stoppedWithShim(nctx, id, err) {
			return nil
		}
		return fmt.Errorf("signalling container %s: %w", id, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
	}
	kctx, kcancel := r.call(ctx)
	defer kcancel()
	if err := t.Kill(kctx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
		if r.stoppedWithShim(kctx, id, err) {
			return nil
		}
		return fmt.Errorf("killing container %s: %w", id, err)
	}
	select {
	case <-exited:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("container %s still running %s after SIGKILL", id, killWait)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopSignal is the signal that stops container id, whose labels are
// given: the one they name, SIGTERM when they name none (a sandbox, or a
// container made before the label) or one this system does not know.
func (r *Runtime) stopSignal(id string, labels map[string]string) syscall.Signal {
	name, ok := labels[LabelStopSignal]
	if !ok {
		return syscall.SIGTERM
	}
	sig, err := signal.ParseSignal(name)
	if err != nil {
		r.cfg.Logger.Warn("unknown stop signal; using SIGTERM", "container", id, "signal", name)
		return syscall.SIGTERM
	}
	return sig
}
