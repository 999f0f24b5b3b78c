package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// RemoveContainer deletes container id with its task and snapshot, killing
// the task if it still runs. Removing what is already gone succeeds.
//
// It talks to containerd's services directly: the client's Load, Task,
// Delete and their options read the container's record three times and its
// task's state three, and wait on and kill a task that has stopped (as it
// has after StopContainer), ten calls for what takes five. A pod is
// removed one after another in its order (issue 13), so each call counts.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	info, err := r.client.ContainerService().Get(ctx, id)
	if errdefs.IsNotFound(err) {
		r.messages.forget(id)
		r.sandboxGroups.forget(id)
		return r.removeSandboxHostState(id)
	}
	if err != nil {
		return fmt.Errorf("loading container %s: %w", id, err)
	}
	if err := r.removeTask(ctx, id); err != nil {
		return err
	}
	// As the client's WithSnapshotCleanup: the snapshot, then the record.
	if info.SnapshotKey != "" {
		err := r.client.SnapshotService(info.Snapshotter).Remove(ctx, info.SnapshotKey)
		if err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("deleting container %s: removing its snapshot: %w", id, err)
		}
	}
	if err := r.client.ContainerService().Delete(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", id, err)
	}
	r.devices.tellFreed(info.Labels[LabelDevices])
	// The record told where the container's termination message is kept.
	if err := r.forgetTermination(id, info.Labels); err != nil {
		return err
	}
	if info.Labels[LabelKind] != string(pod.KindSandbox) {
		return nil
	}
	r.sandboxGroups.forget(id)
	return r.removeSandboxHostState(id)
}

// removeTask deletes container id's task if it has one: at once when it
// has stopped, else once it is killed.
func (r *Runtime) removeTask(ctx context.Context, id string) error {
	proc, err := r.getTask(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	if proc.Status != task.Status_STOPPED {
		// Still running, or never started: the client's kill, wait and
		// delete. Deleting a task that runs would fail, and containerd
		// would stop watching it for OOM kills first.
		c, err := r.client.LoadContainer(ctx, id)
		if errdefs.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("loading container %s: %w", id, err)
		}
		return r.deleteTask(ctx, c, client.WithProcessKill)
	}
	_, err = r.client.TaskService().Delete(ctx, &tasks.DeleteTaskRequest{ContainerID: id})
	if err = errgrpc.ToNative(err); err != nil && !errdefs.IsNotFound(err) {
		// The exit handler may be deleting it too (see deleteTask), and
		// its shim may be going away with it.
		if _, again := r.getTask(ctx, id); errdefs.IsNotFound(again) {
			return nil
		}
		return fmt.Errorf("deleting the task of container %s: %w", id, err)
	}
	return nil
}

// removeSandboxHostState removes what a sandbox holds on the host besides
// its container: its network (hostPort rules, veth, addresses), then its
// pinned namespaces. The order matters for a staticlet killed half way:
// the pin directory stays until the end, so the next Sweep finds the
// sandbox and finishes.
func (r *Runtime) removeSandboxHostState(id string) error {
	if err := r.network.TearDown(id); err != nil {
		return fmt.Errorf("removing the network of sandbox %s: %w", id, err)
	}
	if err := netns.Remove(r.sandboxDir(id)); err != nil {
		return fmt.Errorf("removing the namespaces of sandbox %s: %w", id, err)
	}
	return nil
}

// Sweep removes what a staticlet killed in the middle of a call left, at
// start, before anything is made: the leases it held (lease.Maker.Sweep), and
// the pinned namespaces and network (addresses, veth, hostPort rules) of
// sandboxes that no longer exist, as it was creating or removing one.
func (r *Runtime) Sweep(ctx context.Context) error {
	n, err := r.leases.Sweep(ctx)
	if n > 0 {
		r.cfg.Logger.Info("deleted the leases of an earlier staticlet", "leases", n)
	}
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(r.cfg.RootDir, "sandboxes"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("listing sandbox namespaces: %w", err)
	}
	candidates := map[string]bool{}
	for _, e := range entries {
		candidates[e.Name()] = true
	}
	owners, err := r.network.Owners()
	if err != nil {
		return fmt.Errorf("listing the pod network's allocations: %w", err)
	}
	for _, id := range owners {
		candidates[id] = true
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	var errs []error
	for id := range candidates {
		// An allocation file created but not yet written names no one.
		if id != "" {
			_, err := r.client.LoadContainer(ctx, id)
			if err == nil {
				continue
			}
			if !errdefs.IsNotFound(err) {
				return fmt.Errorf("looking up sandbox %s: %w", id, err)
			}
		}
		r.cfg.Logger.Info("removing the namespaces and network of a sandbox that is gone", "sandbox", id)
		if id == "" {
			errs = append(errs, r.network.Release(""))
			continue
		}
		if err := r.removeSandboxHostState(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteTask deletes c's task if it has one. The exit handler and a worker
// may both delete the same exited task; the loser sees NotFound, or the
// shim's connection close under it (loadTask, getTask), which is success
// when the task is gone.
func (r *Runtime) deleteTask(ctx context.Context, c client.Container, opts ...client.ProcessDeleteOpts) error {
	t, err := r.loadTask(ctx, c)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading the task of container %s: %w", c.ID(), err)
	}
	return r.deleteLoadedTask(ctx, c, t, opts...)
}

// deleteLoadedTask deletes task t of container c, as deleteTask does.
func (r *Runtime) deleteLoadedTask(ctx context.Context, c client.Container, t client.Task, opts ...client.ProcessDeleteOpts) error {
	if _, err := t.Delete(ctx, opts...); err != nil && !errdefs.IsNotFound(err) {
		if _, again := r.getTask(ctx, c.ID()); errdefs.IsNotFound(again) {
			return nil
		}
		return fmt.Errorf("deleting the task of container %s: %w", c.ID(), err)
	}
	return nil
}
