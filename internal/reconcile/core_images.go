package reconcile

import (
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// waitsForImage reports whether a waiting reason means the container's
// image is missing.
func waitsForImage(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull":
		return true
	}
	return false
}

// retryArrived lets containers of p that wait for an image among those
// arrived start now rather than after their backoff. The failure count
// stays, so that if the start fails again its backoff goes on growing.
func (c *podCore) retryArrived(p *pod.Pod) []action {
	arrived := c.mem.arrived
	c.mem.arrived = nil
	if len(arrived) == 0 {
		return nil
	}
	var out []action
	retry := func(cs []v1.Container) {
		for _, ctr := range cs {
			ws, ok := c.mem.waiting[ctr.Name]
			if ok && waitsForImage(ws.reason) && arrived[pod.ImageName(ctr.Image)] {
				ws.retryAt = c.now
				c.mem.waiting[ctr.Name] = ws
				out = append(out, note{msg: "image arrived; starting the container without waiting out its backoff",
					args: []any{"container", ctr.Name, "image", ctr.Image}})
			}
		}
	}
	retry(p.Spec.InitContainers)
	retry(p.Spec.Containers)
	return out
}
