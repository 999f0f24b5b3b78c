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

// imagesArrived tells the worker that images became present, and wakes it
// if it has any container waiting for an image.
func (w *worker) imagesArrived(names []string) {
	w.mu.Lock()
	if w.arrived == nil {
		w.arrived = map[string]bool{}
	}
	for _, n := range names {
		w.arrived[n] = true
	}
	w.mu.Unlock()
	w.poke()
}

// retryArrived lets containers of p that wait for an image among arrived
// start now rather than after their backoff. The failure count stays, so
// that if the start fails again its backoff goes on growing.
func (w *worker) retryArrived(p *pod.Pod, arrived map[string]bool) {
	if p == nil || len(arrived) == 0 {
		return
	}
	retry := func(cs []v1.Container) {
		for _, c := range cs {
			ws, ok := w.waiting[c.Name]
			if ok && waitsForImage(ws.reason) && arrived[pod.ImageName(c.Image)] {
				ws.retryAt = w.now()
				w.waiting[c.Name] = ws
				w.log.Info("image arrived; starting the container without waiting out its backoff", "container", c.Name, "image", c.Image)
			}
		}
	}
	retry(p.Spec.InitContainers)
	retry(p.Spec.Containers)
}
