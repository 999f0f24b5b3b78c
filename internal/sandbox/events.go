package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/pod"
)

// resubscribeDelay spaces attempts to re-subscribe after containerd's event
// stream broke (containerd restarting, say).
const resubscribeDelay = time.Second

// Exits subscribes to containerd's task-exit and OOM events and sends one
// TaskExit per exited container of staticlet's, and one with OOM set per
// OOM kill in one, until ctx ends. After sending an exit, it writes the
// exit, and an OOM kill the container's cgroup counted, into the
// container's labels and deletes the task, so the shim goes away and the
// exit survives it. When the stream breaks and is re-established, it sends
// a TaskExit with an empty ContainerID: exits may have been missed, and
// every pod should be looked at again.
func (r *Runtime) Exits(ctx context.Context, out chan<- pod.TaskExit) error {
	filters := []string{
		fmt.Sprintf(`topic=="/tasks/exit",namespace==%q`, r.cfg.Namespace),
		fmt.Sprintf(`topic=="/tasks/oom",namespace==%q`, r.cfg.Namespace),
	}
	first := true
	for {
		sctx, cancel := context.WithCancel(ctx)
		evs, errs := r.client.Subscribe(sctx, filters...)
		if !first {
			select {
			case out <- pod.TaskExit{}:
			case <-ctx.Done():
				cancel()
				return nil
			}
		}
		first = false
		err := r.forwardExits(ctx, evs, errs, out)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		r.cfg.Logger.Warn("containerd event stream broke; subscribing again", "err", err)
		select {
		case <-time.After(resubscribeDelay):
		case <-ctx.Done():
			return nil
		}
	}
}

func (r *Runtime) forwardExits(ctx context.Context, evs <-chan *events.Envelope, errs <-chan error, out chan<- pod.TaskExit) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case env := <-evs:
			if env == nil || env.Event == nil {
				continue
			}
			v, err := typeurl.UnmarshalAny(env.Event)
			if err != nil {
				r.cfg.Logger.Warn("decoding a containerd event", "topic", env.Topic, "err", err)
				continue
			}
			var exit pod.TaskExit
			var pid uint32
			switch e := v.(type) {
			case *apievents.TaskExit:
				// Exits of exec'd processes have their own ID; only the
				// main process ends a container.
				if e.ID != e.ContainerID {
					continue
				}
				exit = pod.TaskExit{ContainerID: e.ContainerID, ExitCode: e.ExitStatus, ExitedAt: e.ExitedAt.AsTime()}
				pid = e.Pid
			case *apievents.TaskOOM:
				exit = pod.TaskExit{ContainerID: e.ContainerID, OOM: true}
			default:
				continue
			}
			c, key, err := r.exitOwner(ctx, exit.ContainerID)
			if err != nil {
				r.cfg.Logger.Warn("looking up a container's task event", "container", exit.ContainerID, "err", err)
			}
			if key == (pod.Key{}) {
				continue // not staticlet's, or already removed
			}
			exit.Pod = key
			if exit.OOM {
				// Marked first, so that the pass this wakes sees it.
				if err := r.noteOOM(ctx, c); err != nil {
					r.cfg.Logger.Warn("recording an OOM kill", "container", exit.ContainerID, "err", err)
				}
			}
			// The reconciler hears of an exit before the bookkeeping
			// below, so a restart does not wait for it; until the labels
			// tell the exit, the task list does, and the cgroup its OOM
			// kill.
			select {
			case out <- exit:
			case <-ctx.Done():
				return nil
			}
			if exit.OOM {
				continue
			}
			marked, err := r.noteCgroupOOM(ctx, c)
			if err != nil {
				r.cfg.Logger.Warn("recording an OOM kill", "container", exit.ContainerID, "err", err)
			}
			if marked {
				// The pass the exit woke may have listed the container
				// before the kill was marked (with the systemd driver its
				// scope, where the count was, is gone by then): it is
				// worth listing again.
				select {
				case out <- pod.TaskExit{ContainerID: exit.ContainerID, Pod: key, OOM: true}:
				case <-ctx.Done():
					return nil
				}
			}
			if err := r.settleExit(ctx, c, exit, pid); err != nil {
				r.cfg.Logger.Warn("recording a container exit", "container", exit.ContainerID, "err", err)
			}
			r.exitFrees(ctx, c, exit.ExitCode)
		}
	}
}

// exitOwner returns an exited container and the pod it belongs to, or a
// zero key when the container is gone or not staticlet's.
func (r *Runtime) exitOwner(ctx context.Context, id string) (client.Container, pod.Key, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil, pod.Key{}, nil
	}
	if err != nil {
		return nil, pod.Key{}, fmt.Errorf("loading container %s: %w", id, err)
	}
	// LoadContainer has just read the record: its labels need no second call.
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, pod.Key{}, fmt.Errorf("reading container %s: %w", id, err)
	}
	return c, pod.Key{Namespace: info.Labels[LabelPodNamespace], Name: info.Labels[LabelPodName]}, nil
}

// noteCgroupOOM records an OOM kill that the cgroup of exited container c
// counted, before its task is deleted along with the cgroup; with the
// systemd driver, a kill its pod's slice counted when the container's
// scope is already gone (package cgroups). It tells whether it marked one.
func (r *Runtime) noteCgroupOOM(ctx context.Context, c client.Container) (bool, error) {
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return false, fmt.Errorf("reading container %s: %w", c.ID(), err)
	}
	if info.Labels[LabelOOMKilled] == "true" {
		return false, nil
	}
	killed, err := r.cgroups.ExitOOM(specCgroupsPath(info.Spec))
	if !killed || err != nil {
		return false, err
	}
	if err := r.markOOM(ctx, c); err != nil {
		return false, err
	}
	return true, nil
}

// noteOOM marks container c as OOM-killed, as containerd's event says,
// unless it is already.
func (r *Runtime) noteOOM(ctx context.Context, c client.Container) error {
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return fmt.Errorf("reading container %s: %w", c.ID(), err)
	}
	if info.Labels[LabelOOMKilled] == "true" {
		return nil
	}
	r.cgroups.ClaimOOM(specCgroupsPath(info.Spec))
	return r.markOOM(ctx, c)
}

// markOOM labels container c OOM-killed.
func (r *Runtime) markOOM(ctx context.Context, c client.Container) error {
	ctx, cancel := r.call(context.WithoutCancel(ctx))
	defer cancel()
	if _, err := c.SetLabels(ctx, map[string]string{LabelOOMKilled: "true"}); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("marking container %s OOM-killed: %w", c.ID(), err)
	}
	return nil
}

// settleExit keeps an exit of process pid in the container's labels and
// deletes its task, so that the shim can go and the exit outlives it. It
// finishes even when ctx ends meanwhile, within the call timeout:
// staticlet stopped right after an exit (as a node shutdown stops it once
// the pods are stopped) still lets the shim go. A sandbox's task may be a
// new pause process by now (StartSandbox started one in place): that one
// is left alone, and the exit label, older than its start, is ignored.
func (r *Runtime) settleExit(ctx context.Context, c client.Container, e pod.TaskExit, pid uint32) error {
	ctx, cancel := r.call(context.WithoutCancel(ctx))
	defer cancel()
	t, terr := c.Task(ctx, nil)
	if terr == nil && pid != 0 && t.Pid() != pid {
		return nil
	}
	if _, err := c.SetLabels(ctx, map[string]string{
		LabelExitCode:   strconv.FormatUint(uint64(e.ExitCode), 10),
		LabelFinishedAt: e.ExitedAt.UTC().Format(time.RFC3339Nano),
	}); errdefs.IsNotFound(err) {
		return nil // removed meanwhile
	} else if err != nil {
		return fmt.Errorf("recording the exit of container %s: %w", e.ContainerID, err)
	}
	switch {
	case terr == nil:
		return r.deleteLoadedTask(ctx, c, t)
	case errdefs.IsNotFound(terr):
		return nil // deleted already
	default:
		return r.deleteTask(ctx, c)
	}
}

// specCgroupsPath returns the cgroupsPath of a container's spec as
// containerd stores it, empty when it has none or cannot be read.
func specCgroupsPath(a typeurl.Any) string {
	if a == nil {
		return ""
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return ""
	}
	if s, ok := v.(*specs.Spec); ok && s.Linux != nil {
		return s.Linux.CgroupsPath
	}
	return ""
}
