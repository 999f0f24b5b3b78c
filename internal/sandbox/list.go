package sandbox

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"

	"github.com/staticlet/staticlet/internal/pod"
)

// PodContainers lists the containers of one pod, with their processes'
// states. Its cost is the pod's own: its share of a listing of every
// container (containerd's metadata, no shim), which the pods listed at
// the same time share (listBatcher), and one task lookup per container of
// the pod (one State call to the pod's shim each). Other pods' tasks are
// never asked for, so that a resync, which lists every pod at once, costs
// linear in the pods and not their square.
func (r *Runtime) PodContainers(ctx context.Context, key pod.Key) ([]pod.Record, error) {
	all, err := r.listContainers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the containers of pod %s: %w", key, err)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	var out []pod.Record
	for _, c := range all { // shared: read, not written
		if c.Labels[LabelPodNamespace] != key.Namespace || c.Labels[LabelPodName] != key.Name {
			continue
		}
		if c.Labels[LabelPause] == pauseNone {
			out = append(out, r.record(ctx, c, nil)) // no task to ask for
			continue
		}
		c, t, err := r.containerTask(ctx, c)
		if errdefs.IsNotFound(err) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.record(ctx, c, t))
	}
	return out, nil
}

// listContainers lists every container staticlet made, from containerd's
// metadata alone (no shim is asked), in a listing shared with the other
// callers of the time (listBatcher): read it, do not write it.
func (r *Runtime) listContainers(ctx context.Context) ([]containers.Container, error) {
	return r.listings.list(ctx, func() ([]containers.Container, error) {
		// Shared by the callers of the time: none's cancellation ends it.
		ctx, cancel := r.call(context.WithoutCancel(ctx))
		defer cancel()
		return r.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelKind))
	})
}

// containerTask returns listed container c's task (nil when it has none),
// with c as it is after the task was read. Its labels are read again when
// the task does not match them: a task gone where the labels keep no
// exit, or one running where they keep one. An exit kept is final for a
// container whose task is gone, and a stopped task tells its own exit:
// those cost no second read. An exit is recorded in the labels before its
// task is deleted (settleExit), and a sandbox's exit label cleared before its
// pause process runs again (StartSandbox), so labels read after the task
// are never older than it: an exit settled between the listing and the
// lookup cannot make a container look never-run, nor a restarted one
// look exited. A container removed meanwhile is NotFound.
func (r *Runtime) containerTask(ctx context.Context, c containers.Container) (containers.Container, *task.Process, error) {
	t, err := r.getTask(ctx, c.ID) // through a task's shim going away with it
	switch {
	case errdefs.IsNotFound(err):
		t = nil
	case err != nil:
		return c, nil, fmt.Errorf("getting the task of container %s: %w", c.ID, err)
	}
	exited := recordFromLabels(c.ID, c.Labels, c.CreatedAt).State == pod.TaskExited
	gone := t == nil && !exited
	restarted := t != nil && t.Status != task.Status_STOPPED && exited
	if !gone && !restarted {
		return c, t, nil
	}
	again, err := r.client.ContainerService().Get(ctx, c.ID)
	if err != nil {
		return c, nil, fmt.Errorf("reading container %s: %w", c.ID, err)
	}
	return again, t, nil
}

// AllContainers lists every container staticlet made in its namespace.
// It asks every task's shim for its state, through one task listing: it
// is for what looks at the whole node now and then (adoption at start),
// not for each pod.
func (r *Runtime) AllContainers(ctx context.Context) ([]pod.Record, error) {
	recs, err := r.listAll(ctx)
	if err == nil {
		ids := make(map[string]bool, len(recs))
		for _, rec := range recs {
			ids[rec.ID] = true
		}
		r.messages.retain(ids)
		r.sandboxGroups.retain(ids)
	}
	return recs, err
}

// listAll lists every container of staticlet's, with its process. Tasks
// are listed before containers: an exit settled between the two calls is
// then in the containers' labels, which win over the task list. The other
// order could see a container before its exit was recorded and its task
// after it was deleted, a container that seems never to have run.
func (r *Runtime) listAll(ctx context.Context) ([]pod.Record, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	cs, procs, err := r.listWithTasks(ctx)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	out := make([]pod.Record, 0, len(cs))
	for _, c := range cs {
		out = append(out, r.record(ctx, c, procs[c.ID]))
	}
	return out, nil
}

// listWithTasks lists every container of staticlet's and every task, by
// its container's ID, in that order (listAll says why). ctx has the
// call's deadline.
func (r *Runtime) listWithTasks(ctx context.Context) ([]containers.Container, map[string]*task.Process, error) {
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing tasks: %w", err)
	}
	cs, err := r.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelKind))
	if err != nil {
		return nil, nil, fmt.Errorf("listing containers: %w", err)
	}
	procs := make(map[string]*task.Process, len(resp.Tasks))
	for _, t := range resp.Tasks {
		// A task's ID is its container's; containerd 1.6 leaves ContainerID empty.
		procs[t.ID] = t
	}
	return cs, procs, nil
}

// record is what container c and its task t (nil when it has none) say
// of it, with what the files it left add: an OOM kill, a termination
// message, a pause process's last words. A sandbox without a pause
// process has no task: it is what its labels and pins say.
func (r *Runtime) record(ctx context.Context, c containers.Container, t *task.Process) pod.Record {
	rec := recordFromLabels(c.ID, c.Labels, c.CreatedAt)
	if rec.NoPause {
		if why := r.sandboxGone(c.ID, c.Labels); why != "" {
			rec.State, rec.Pinned, rec.Message = pod.TaskExited, false, why
		}
		return rec
	}
	applyTask(&rec, t)
	if rec.Kind == pod.KindSandbox && rec.Pinned && rec.State != pod.TaskRunning && pinsGone(c) {
		// Its pause can no longer be started in place (a reboot took the
		// pins of an earlier build's sandbox): it is re-created.
		rec.Pinned = false
	}
	live := t != nil
	if !live {
		lostExit(&rec, c.Labels[LabelStarting])
	}
	// An exit not recorded yet, missed while staticlet was not
	// running, say: its cgroup is still there to tell an OOM kill.
	if rec.State == pod.TaskExited && !rec.OOMKilled && c.Labels[LabelExitCode] == "" {
		n, _ := r.cgroups.OOMKills(specCgroupsPath(c.Spec))
		rec.OOMKilled = n > 0
	}
	rec.Message = r.terminationMessage(ctx, rec, c.Labels, live)
	if rec.Kind == pod.KindSandbox && rec.State == pod.TaskExited {
		rec.Message = r.pauseOutput(c.ID)
	}
	return rec
}

// applyTask adds what task t (nil when the container has none) tells of
// its process to rec, built from the container's labels. An exit in the
// labels is final: a container's process runs once.
func applyTask(rec *pod.Record, t *task.Process) {
	if t == nil || rec.State == pod.TaskExited {
		return
	}
	rec.Pid = t.Pid
	switch t.Status {
	case task.Status_RUNNING, task.Status_PAUSED, task.Status_PAUSING:
		rec.State = pod.TaskRunning
	case task.Status_STOPPED:
		rec.State = pod.TaskExited
		rec.ExitCode = int32(t.ExitStatus)
		if t.ExitedAt != nil {
			rec.FinishedAt = t.ExitedAt.AsTime()
		}
	}
}
