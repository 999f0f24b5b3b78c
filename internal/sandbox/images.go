package sandbox

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/images"
)

// Images is the store of the images containers run, for what wants them
// without the rest of the runtime (the import directory, the status
// socket's image list).
func (r *Runtime) Images() *images.Store { return r.images }

// ImageNeedsPull tells whether container c's image is to be pulled before
// it starts (images.Store.NeedsPull).
func (r *Runtime) ImageNeedsPull(ctx context.Context, c *v1.Container) (need bool, from string, err error) {
	return r.images.NeedsPull(ctx, c)
}

// PullImage pulls container c's image, joining a pull of it in flight
// (images.Store.Pull).
func (r *Runtime) PullImage(ctx context.Context, c *v1.Container) (present bool, err error) {
	return r.images.Pull(ctx, c)
}
