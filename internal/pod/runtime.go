package pod

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ContainerKind says what part of a pod a runtime container plays.
type ContainerKind string

// Container kinds, the values of the io.staticlet.kind label.
const (
	KindSandbox ContainerKind = "sandbox"
	KindInit    ContainerKind = "init"
	KindApp     ContainerKind = "app"
)

// TaskState is the state of a runtime container's process.
type TaskState string

// Task states as staticlet sees them.
const (
	TaskCreated TaskState = "created" // container exists, process never started or not yet running
	TaskRunning TaskState = "running"
	TaskExited  TaskState = "exited"
)

// Record is one container as the runtime reports it: what staticlet wrote in
// its labels when it created it, plus what containerd knows of its process.
// Everything a restarted staticlet needs to rebuild a pod's status is here.
// It is outsized as a container's status is: one field for each fact of
// the kubelet's ContainerStatus that staticlet reports, flat so that the
// runtime fills it from labels and task state in one place.
type Record struct {
	ID        string
	Pod       Key
	PodUID    string
	Kind      ContainerKind
	Name      string   // container name; empty for the sandbox
	Hash      string   // SandboxHash for a sandbox, ContainerHash for a container
	Attempt   int      // restart count of this container name when it was created
	SandboxID string   // the sandbox a container belongs to; empty for the sandbox
	Image     string   // image reference as written in the manifest
	ImageID   string   // image digest
	IPs       []string // a sandbox's pod addresses off the host network, in the order of the pod CIDRs

	State      TaskState
	Pid        uint32
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// OOMKilled says the kernel's OOM killer killed a process of the
	// container during its life: the reason of its exit is OOMKilled, as
	// with the kubelet, whatever the exit code.
	OOMKilled bool
	// Evicted is the message of a container killed for using more local
	// ephemeral storage than a limit allows (the kubelet's): the reason
	// of its exit is Evicted. Empty for any other exit.
	Evicted string
	// Lost says the container's task went with no exit recorded, after
	// it may have started: containerd lost it (killed as it loaded the
	// task). It counts as exited, code 137, as the kubelet counts a
	// container it cannot find: ContainerStatusUnknown.
	Lost bool
	// Message is an exited container's termination message: what it
	// wrote to its terminationMessagePath or, by its policy, the tail of
	// its log. For an exited sandbox, the end of its pause process's
	// output.
	Message string
	// Pinned is set on a sandbox whose pod's namespaces (network, UTS,
	// IPC) are pinned apart from its pause process: the pod's containers
	// joined them by path, and the pause can be started again in place
	// without them. Unset on sandboxes made before staticlet pinned them.
	Pinned bool
	// NoPause is set on a sandbox made without a pause process, its pod's
	// containers sharing no PID namespace: it is up while its namespaces
	// stay pinned, from the node's boot it was made in. It has no task to
	// start, and one that is down is re-created, never started again.
	NoPause bool
	// StopNeeds is what ordered the pod's stop among others when the
	// container was made (StopNeeds.String): for a pod whose manifest
	// went while staticlet was not running.
	StopNeeds string
	// Devices are the CDI devices the container holds, by its resource
	// limits, by their qualified names (vendor.com/class=name), sorted.
	Devices []string
}

// ContainerRequest asks the runtime to create and start one container of a
// pod inside its running sandbox.
type ContainerRequest struct {
	Pod       *Pod
	Sandbox   Record
	Container *v1.Container
	Kind      ContainerKind
	Attempt   int
}

// TaskExit reports that a container's main process exited, as the runtime's
// event stream tells it, or, with OOM set, that the kernel's OOM killer
// killed a process of the container (before or after its exit): either
// way, the pod's containers are worth listing again.
type TaskExit struct {
	ContainerID string
	Pod         Key
	ExitCode    uint32
	ExitedAt    time.Time
	OOM         bool
}

// WaitingError is an error that leaves a container waiting with a
// kubelet-style reason such as ErrImageNeverPull or CreateContainerError.
type WaitingError struct {
	Reason string
	Err    error
}

// Error returns the underlying error's text.
func (e *WaitingError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *WaitingError) Unwrap() error { return e.Err }

// RunsAgain tells whether a container that exited with code is started
// again under restart policy policy, as the kubelet decides: always under
// Always, after a failure under OnFailure, never under Never.
func RunsAgain(policy v1.RestartPolicy, code int32) bool {
	switch policy {
	case v1.RestartPolicyAlways:
		return true
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return false
}

// WaitingReason returns the kubelet-style reason carried by err, or fallback
// when err carries none.
func WaitingReason(err error, fallback string) string {
	var we *WaitingError
	if errors.As(err, &we) {
		return we.Reason
	}
	return fallback
}
