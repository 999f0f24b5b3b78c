package sandbox

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
)

// RemoveContainer deletes container id with its task and snapshot, killing
// the task if it still runs. Removing what is already gone succeeds.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading container %s: %w", id, err)
	}
	if err := deleteTask(ctx, c, client.WithProcessKill); err != nil {
		return err
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", id, err)
	}
	return nil
}

// deleteTask deletes c's task if it has one. The exit handler and a worker
// may both delete the same exited task; the loser sees the shim's connection
// close under it, which is success when the task is gone.
func deleteTask(ctx context.Context, c client.Container, opts ...client.ProcessDeleteOpts) error {
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading the task of container %s: %w", c.ID(), err)
	}
	if _, err := t.Delete(ctx, opts...); err != nil && !errdefs.IsNotFound(err) {
		if _, again := c.Task(ctx, nil); errdefs.IsNotFound(again) {
			return nil
		}
		return fmt.Errorf("deleting the task of container %s: %w", c.ID(), err)
	}
	return nil
}
