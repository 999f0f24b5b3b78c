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

func (r *Runtime) list(ctx context.Context, filter string) ([]pod.Record, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	cs, err := r.client.ContainerService().List(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	resp, err := r.client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	procs := make(map[string]*task.Process, len(resp.Tasks))
	for _, t := range resp.Tasks {
		// A task's ID is its container's; containerd 1.6 leaves ContainerID empty.
		procs[t.ID] = t
	}
	out := make([]pod.Record, 0, len(cs))
	for _, c := range cs {
		rec := recordFromLabels(c.ID, c.Labels, c.CreatedAt)
		if t, ok := procs[c.ID]; ok {
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
		_, live := procs[c.ID]
		rec.Message = r.terminationMessage(ctx, rec, c.Labels, live)
		out = append(out, rec)
	}
	return out, nil
}
