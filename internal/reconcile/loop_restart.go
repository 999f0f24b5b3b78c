package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Errors Restart returns, to be told apart with errors.Is. The first two
// also match fs.ErrNotExist.
var (
	// ErrUnknownPod says no desired pod has the key.
	ErrUnknownPod error = notFound("no such pod")
	// ErrUnknownContainer says the pod has no container of that name.
	ErrUnknownContainer error = notFound("no such container")
	// ErrNotRestartable says the pod or container is not to run again: a
	// pod under restartPolicy Never, an init container that is no
	// sidecar, a node shutting down.
	ErrNotRestartable = errors.New("not restartable")
)

// notFound is an error that matches fs.ErrNotExist, so that the status
// socket answers 404 without knowing this package.
type notFound string

func (e notFound) Error() string      { return string(e) }
func (notFound) Is(target error) bool { return target == fs.ErrNotExist }

// restartRequest asks Run's loop to restart container (all the app
// containers when empty) of pod key. The loop answers on answer, which
// has room for the answer, at once.
type restartRequest struct {
	key       pod.Key
	container string
	answer    chan error
}

// Restart restarts container of pod key now, or every app container of
// the pod when container is empty, and resets their restart backoff, as
// after a fix to what made them crash. A running container is stopped as
// for a failed liveness probe (preStop hook, the pod's grace period) and
// started again at once; one waiting out its backoff (CrashLoopBackOff,
// or a failed start) starts at once. Its restart counts in restartCount
// as any restart, and its next failure waits the backoff's initial delay.
// The sandbox and the init containers are kept, as when a container
// restarts after a crash.
//
// It returns once the pod's worker has the request; the restart itself
// follows within the worker's next pass. It refuses an unknown pod
// (ErrUnknownPod), container (ErrUnknownContainer), and what must not run
// twice (ErrNotRestartable): a pod whose restartPolicy is Never, an init
// container that is not a sidecar, any pod while the node shuts down.
func (r *Reconciler) Restart(ctx context.Context, key pod.Key, container string) error {
	req := restartRequest{key: key, container: container, answer: make(chan error, 1)}
	select {
	case r.restarts <- req:
	case <-r.stopped:
		return fmt.Errorf("restarting pod %s: staticlet is stopping", key)
	case <-ctx.Done():
		return fmt.Errorf("restarting pod %s: %w", key, ctx.Err())
	}
	return <-req.answer
}

// restart hands a restart request to the pod's worker, or refuses it.
func (l *loop) restart(req restartRequest) {
	req.answer <- l.tellRestart(req)
}

func (l *loop) tellRestart(req restartRequest) error {
	p, w := l.pods[req.key], l.workers[req.key]
	if p == nil || w == nil || l.rm.removing[req.key] || l.rm.held[req.key].before != nil {
		return fmt.Errorf("restarting pod %s: %w", req.key, ErrUnknownPod)
	}
	if l.halted {
		return fmt.Errorf("restarting pod %s: the node is shutting down: %w", req.key, ErrNotRestartable)
	}
	names, err := restartTargets(p, req.container)
	if err != nil {
		return fmt.Errorf("restarting pod %s: %w", req.key, err)
	}
	if !w.box.send(restartMsg{names}) {
		return fmt.Errorf("restarting pod %s: %w", req.key, ErrUnknownPod)
	}
	l.r.cfg.Logger.Info(restartedBy, "pod", req.key.String(), "containers", fmt.Sprint(names))
	return nil
}

// restartTargets returns the containers of p that a restart of container
// (all app containers when empty) restarts, or why there are none.
func restartTargets(p *pod.Pod, container string) ([]string, error) {
	if p.Spec.RestartPolicy == v1.RestartPolicyNever {
		return nil, fmt.Errorf("its restartPolicy is Never: its containers never run twice: %w", ErrNotRestartable)
	}
	if container == "" {
		names := make([]string, len(p.Spec.Containers))
		for i, c := range p.Spec.Containers {
			names[i] = c.Name
		}
		return names, nil
	}
	for _, c := range p.Spec.Containers {
		if c.Name == container {
			return []string{container}, nil
		}
	}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if c.Name != container {
			continue
		}
		if isSidecar(c) {
			return []string{container}, nil
		}
		return nil, fmt.Errorf("init container %q runs once before the app containers, and only a new sandbox runs it again: %w", container, ErrNotRestartable)
	}
	return nil, fmt.Errorf("container %q: %w", container, ErrUnknownContainer)
}
