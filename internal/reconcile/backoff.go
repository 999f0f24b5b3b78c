package reconcile

import "time"

// Backoff spaces the restarts of a container that keeps exiting.
//
// The first restart is immediate: most exits are one-off, and the kubelet
// restarts at once too. After that the delay starts at Initial and doubles
// up to Max; a container that ran for Reset before exiting starts over.
// staticlet's defaults (1 s doubling to 5 min, reset after 10 min) differ
// from the kubelet's 10 s start on purpose: a control-plane pod that crashes
// because a neighbour is not up yet (kube-apiserver waiting for etcd) comes
// back within seconds instead of tens of seconds, while a pod that keeps
// failing still costs at most one start every five minutes after nine tries.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Reset   time.Duration
}

// Delay returns how long to wait before the restart that follows level
// earlier restarts in the current streak.
func (b Backoff) Delay(level int) time.Duration {
	if level <= 0 {
		return 0
	}
	d := b.Initial
	for i := 1; i < level; i++ {
		d *= 2
		if d >= b.Max {
			return b.Max
		}
	}
	return min(d, b.Max)
}

// streak is the restart history of one container name within a pod.
type streak struct {
	level int       // restarts in the current streak
	exit  string    // ID of the exited container the streak last counted
	until time.Time // no restart before this
}

// next updates the streak for the exit of container id, which ran from
// started to finished, and returns when it may restart. Counting the same
// exit twice changes nothing.
func (b Backoff) next(s *streak, id string, started, finished time.Time) time.Time {
	if s.exit == id {
		return s.until
	}
	if finished.Sub(started) >= b.Reset {
		s.level = 0
	}
	s.exit = id
	s.until = finished.Add(b.Delay(s.level))
	s.level++
	return s.until
}
