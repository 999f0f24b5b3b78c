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

// sandboxRetry is the restart history of a pod's sandbox: its pause
// process exiting, or the sandbox failing to be created or started. A
// sandbox keeps its ID when its pause is started again in place, so its
// failures are counted per attempt, not per exited container as a
// container's are; the first restart is immediate too, and a pause that
// ran for Reset starts a new streak.
type sandboxRetry struct {
	hash     string    // the pod spec (SandboxHash) the history is of
	failures int       // failed runs in the current streak
	failedAt time.Time // when the latest failure happened
	counted  bool      // the failure of the latest attempt is counted
}

// failed counts a failure at (the pause's exit, or a failed create or
// start) of a sandbox that ran from ranFrom (zero: it never ran), unless
// the failure of the latest attempt is counted already. It reports
// whether it counted this one.
func (b Backoff) failed(s *sandboxRetry, ranFrom, at time.Time) bool {
	if s.counted {
		return false
	}
	if !ranFrom.IsZero() && at.Sub(ranFrom) >= b.Reset {
		s.failures = 0
	}
	s.failures++
	s.failedAt, s.counted = at, true
	return true
}

// due returns when the sandbox may be tried again.
func (b Backoff) due(s *sandboxRetry) time.Time {
	return s.failedAt.Add(b.Delay(s.failures - 1))
}

// attempted notes that the sandbox is being created or started: its next
// failure counts.
func (s *sandboxRetry) attempted() { s.counted = false }
