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
	t, err := c.Task(nctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	// The exit handler deletes an exited task (settleExit), maybe between
	// the two calls: a task gone is stopped.
	st, err := t.Status(nctx)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the state of container %s: %w", id, err)
	}
	if st.Status == client.Stopped {
		return nil
	}
	// The wait is long-lived: it must outlast the per-call deadline.
	wctx, wcancel := context.WithCancel(r.nsContext(ctx))
	defer wcancel()
	exited, err := t.Wait(wctx)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("waiting on container %s: %w", id, err)
	}
	if err := t.Kill(nctx, r.stopSignal(nctx, c)); err != nil && !errdefs.IsNotFound(err) {
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

// stopSignal is the signal that stops container c: the one its label
// names, SIGTERM when it has none (a sandbox, or a container made before
// the label) or names one this system does not know.
func (r *Runtime) stopSignal(ctx context.Context, c client.Container) syscall.Signal {
	labels, err := c.Labels(ctx)
	if err != nil {
		r.cfg.Logger.Warn("reading the stop signal of a container; using SIGTERM", "container", c.ID(), "err", err)
		return syscall.SIGTERM
	}
	name, ok := labels[LabelStopSignal]
	if !ok {
		return syscall.SIGTERM
	}
	sig, err := signal.ParseSignal(name)
	if err != nil {
		r.cfg.Logger.Warn("unknown stop signal; using SIGTERM", "container", c.ID(), "signal", name)
		return syscall.SIGTERM
	}
	return sig
}
