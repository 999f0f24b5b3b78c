package pod

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// ProbeType says which of a container's probes a result is for.
type ProbeType string

// Probe types, named as the kubelet names them in events.
const (
	Liveness  ProbeType = "Liveness"
	Readiness ProbeType = "Readiness"
	Startup   ProbeType = "Startup"
)

// ProbeResult is a probe's outcome once its thresholds are applied.
type ProbeResult int

// Probe results. A probe that has not decided yet is ProbeUnknown.
const (
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
)

// String returns the result as describe shows it.
func (r ProbeResult) String() string {
	switch r {
	case ProbeSuccess:
		return "Success"
	case ProbeFailure:
		return "Failure"
	}
	return "Unknown"
}

// ProbeTarget is one running container whose probes are to run: what a
// probe needs to know to reach it.
type ProbeTarget struct {
	Pod         *Pod
	Container   *v1.Container
	ContainerID string
	SandboxID   string
	// PodIP is the pod's address; empty when it has none of its own, and
	// then a probe with no host dials 127.0.0.1 inside the pod's network
	// namespace (or on the host under hostNetwork).
	PodIP     string
	StartedAt time.Time
}

// ProbeVerdict is what a probe worker reports of one container's probe:
// its result after thresholds, and the message of a run that failed or
// warned, for an event.
type ProbeVerdict struct {
	Pod         Key
	Container   string
	ContainerID string
	Type        ProbeType
	Result      ProbeResult
	// Failed is the output of a probe run that failed, empty when it
	// passed; Warning that of a run that passed with a warning (an HTTP
	// redirect not followed).
	Failed, Warning string
	Time            time.Time
}

// ProbeRun is one run of a probe, before thresholds: what is counted and
// timed for metrics.
type ProbeRun struct {
	Pod       Key
	UID       string
	Container string
	Type      ProbeType
	// OK tells whether the run passed.
	OK bool
	// Took is how long the run took.
	Took time.Duration
}
