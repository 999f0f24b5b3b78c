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
	if t, err := c.Task(ctx, nil); err == nil {
		if _, err := t.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("deleting the task of container %s: %w", id, err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("deleting container %s: %w", id, err)
	}
	return nil
}
