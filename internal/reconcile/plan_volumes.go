package reconcile

import (
	"errors"

	"github.com/staticlet/staticlet/internal/pod"
)

// A pod's configMap, secret and projected volumes hold what its objects
// (ConfigMaps and Secrets) say. The runtime writes them before each
// container starts; while containers run, an edited object reaches their
// files at the next pass (every new desired set brings one), through the
// kubelet's atomic ..data swap, without a restart, as with the kubelet.
// Environment variables taken from objects keep their values until the
// container starts again. The containers that mount a volume that
// staticlet.io/restart-on-change names restart when its objects change.

// objectVolumes is what a sandbox's object volumes were written from.
type objectVolumes struct {
	sandbox string // the sandbox's pod UID
	objects string // the pod's ObjectsHash
	// watched holds the digest of each volume restart-on-change names, as
	// the last pass saw it; nil before the first pass, which restarts
	// nothing (a change made while staticlet was not running is not seen).
	watched map[string]string
}

// volumesToSync returns the action that writes the pod's object volumes
// anew in its sandbox, unless they hold what its objects say already.
func (c *podCore) volumesToSync() (syncVolumes, bool) {
	p, sb := c.pass.p, c.pass.sync.sb
	if sb.ID == "" || !p.HasObjectVolumes() {
		return syncVolumes{}, false
	}
	v := c.sandbox.volumes
	if v.sandbox == sb.PodUID && v.objects == p.ObjectsHash {
		return syncVolumes{}, false
	}
	return syncVolumes{pod: p, sb: sb}, true
}

// volumesWritten records what the object volumes were written from, and
// goes on to the containers. A failure is tried again at the next pass:
// a warning, unless an object or a key is missing, which the container
// that needs it tells of when it cannot start (its volume keeps its files
// meanwhile).
func (c *podCore) volumesWritten(vs volumesSynced) []action {
	var out []action
	p, sb := c.pass.p, c.pass.sync.sb
	var missing *pod.WaitingError
	switch {
	case errors.As(vs.err, &missing):
	case vs.err != nil:
		out = append(out, note{warn: true, msg: "updating the pod's configMap, secret and projected volumes", args: []any{"err", vs.err}})
	default:
		c.sandbox.volumes.sandbox, c.sandbox.volumes.objects = sb.PodUID, p.ObjectsHash
	}
	return c.objectsChanged(out)
}

// objectsChanged restarts the running containers that mount a volume
// restart-on-change names whose objects changed since the last pass, and
// converges the containers.
func (c *podCore) objectsChanged(out []action) []action {
	p := c.pass.p
	watches := p.ObjectWatches()
	if len(watches) == 0 {
		c.sandbox.volumes.watched = nil
		return c.converge(out)
	}
	prev, now := c.sandbox.volumes.watched, make(map[string]string, len(watches))
	for _, w := range watches {
		now[w.Volume] = w.Digest
		if was, seen := prev[w.Volume]; !seen || was == w.Digest {
			continue
		}
		for _, name := range w.Containers {
			c.fileChanged(name, w.What+" (volume "+w.Volume+")")
		}
	}
	c.sandbox.volumes.watched = now
	return c.converge(out)
}
