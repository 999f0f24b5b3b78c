package reconcile

import (
	"slices"
)

// reasonNoDevices is the waiting reason of a container whose devices are
// all held by other containers (the runtime's).
const reasonNoDevices = "InsufficientDevices"

// devicesFreed lets the containers of the pod that wait for devices of
// one of kinds start at the next pass, without waiting out their backoff;
// it tells whether any waits so.
func (c *podCore) devicesFreed(kinds []string) bool {
	p := c.desired
	if p == nil {
		return false
	}
	woke := false
	for _, r := range p.DeviceRequests() {
		ws, ok := c.mem.waiting[r.Container]
		if !ok || ws.reason != reasonNoDevices || !slices.Contains(kinds, r.Kind) {
			continue
		}
		ws.retryAt = c.now
		c.mem.waiting[r.Container] = ws
		woke = true
	}
	return woke
}
