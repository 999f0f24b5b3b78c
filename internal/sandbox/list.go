package sandbox

import (
	"context"
	"fmt"
	"strconv"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"

	"github.com/staticlet/staticlet/internal/pod"
)

// PodContainers lists the containers of one pod, with their processes'
// states.
func (r *Runtime) PodContainers(ctx context.Context, key pod.Key) ([]pod.Record, error) {
	filter := fmt.Sprintf("labels.%q==%s,labels.%q==%s",
		LabelPodNamespace, strconv.Quote(key.Namespace), LabelPodName, strconv.Quote(key.Name))
	return r.list(ctx, filter)
}

// AllContainers lists every container staticlet made in its namespace.
func (r *Runtime) AllContainers(ctx context.Context) ([]pod.Record, error) {
	recs, err := r.list(ctx, fmt.Sprintf("labels.%q", LabelKind))
	if err == nil {
		r.messages.retain(recs)
	}
	return recs, err
}

// list lists the containers filter selects, with their processes. Tasks
// are listed before containers: an exit settled between the two calls is
// then in the containers' labels, which win over the task list. The other
// order could see a container before its exit was recorded and its task
// after it was deleted, a container that seems never to have run.
func (r *Runtime) list(ctx context.Context, filter string) ([]pod.Record, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	cs, err := r.client.ContainerService().List(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	procs := make(map[string]*task.Process, len(resp.Tasks))
	for _, t := range resp.Tasks {
		// A task's ID is its container's; containerd 1.6 leaves ContainerID empty.
		procs[t.ID] = t
	}
	out := make([]pod.Record, 0, len(cs))
	for _, c := range cs {
		rec := recordFromLabels(c.ID, c.Labels, c.CreatedAt)
		t, live := procs[c.ID]
		applyTask(&rec, t)
		if !live {
			lostExit(&rec, c.Labels[LabelStarting])
		}
		// An exit not recorded yet, missed while staticlet was not
		// running, say: its cgroup is still there to tell an OOM kill.
		if rec.State == pod.TaskExited && !rec.OOMKilled && c.Labels[LabelExitCode] == "" {
			n, _ := r.cgroups.oomKills(specCgroupsPath(c.Spec))
			rec.OOMKilled = n > 0
		}
		rec.Message = r.terminationMessage(ctx, rec, c.Labels, live)
		if rec.Kind == pod.KindSandbox && rec.State == pod.TaskExited {
			rec.Message = r.pauseOutput(c.ID)
		}
		out = append(out, rec)
	}
	return out, nil
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
