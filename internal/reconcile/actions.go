package reconcile

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// The core (podCore) and the executor (worker) speak in two vocabularies
// of plain data. An action is what the core wants done; an outcome is
// what came of an action that did I/O, and goes back into the core. The
// core never waits and never calls out; the executor never decides.

// action is one thing for the executor to do. Every step of the core
// returns at most one action that does I/O, last in its list, so the
// executor never has to choose an order.
type action interface{ isAction() }

// Actions that do I/O; each has the outcome named beside it.
type (
	// listPod lists the pod's containers: listed.
	listPod struct{}
	// createSandbox creates the pod's sandbox, not started: sandboxMade.
	createSandbox struct{ pod *pod.Pod }
	// startSandbox starts the pause process of sandbox sb: sandboxStarted.
	startSandbox struct{ sb pod.Record }
	// stopGroup stops containers, each after its preStop hook, and removes
	// them when remove is set: stopped. Without sequential, the app
	// containers stop together, then the init containers, then the
	// sandboxes, each tier waiting for the one before; with sequential,
	// one after the other in order, up to the first failure.
	stopGroup struct {
		stops      []stopOrder
		remove     bool
		sequential bool
	}
	// removeContainer removes container id: removed.
	removeContainer struct{ id string }
	// resumeContainer finishes the start of container id: resumed.
	resumeContainer struct{ id string }
	// checkImage asks whether container c's image is to be pulled:
	// imageChecked.
	checkImage struct{ c *v1.Container }
	// pullImage pulls container c's image: pulled.
	pullImage struct{ c *v1.Container }
	// startContainer starts a container: started.
	startContainer struct{ req pod.ContainerRequest }
	// postStart runs the postStart hook of container rec, started for req:
	// hookRan. The executor abandons it when the core says it is obsolete.
	postStart struct {
		rec pod.Record
		req pod.ContainerRequest
	}
	// syncVolumes writes the files of the pod's configMap, secret and
	// projected volumes in its sandbox sb anew from the pod's objects:
	// volumesSynced.
	syncVolumes struct {
		pod *pod.Pod
		sb  pod.Record
	}
	// removeFiles removes the files of the pod's sandboxes by UID:
	// filesRemoved. With all set, every UID is tried; else up to the first
	// failure.
	removeFiles struct {
		uids []string
		all  bool
	}
)

// Actions that do no I/O but report; they never fail.
type (
	// emit records an event.
	emit struct{ e pod.Event }
	// report hands the reporter the pod's status.
	report struct{ pod *v1.Pod }
	// forget tells the reporter the pod is gone.
	forget struct{}
	// probe hands the prober the pod's probe targets (none: stop probing).
	probe struct{ targets []pod.ProbeTarget }
	// watchFiles hands the file watcher the files whose changes restart
	// the pod's containers (none: stop watching).
	watchFiles struct{ targets []pod.WatchTarget }
	// readiness tells the loop the pod became Ready, or stopped being.
	readiness struct{ ready bool }
	// note is a line for the log.
	note struct {
		warn bool
		msg  string
		args []any
	}
	// finish ends the pass: look again after again (0: at the next
	// trigger); err is what went wrong, to be tried again soon. gone is
	// set when the pod is removed and nothing of it is left.
	finish struct {
		again time.Duration
		err   error
		gone  bool
	}
)

// stopOrder is one container to stop: grace bounds its preStop hook (hook,
// run for req, nil when it has none) and its stop signal together.
type stopOrder struct {
	rec   pod.Record
	grace time.Duration
	hook  *v1.LifecycleHandler
	req   pod.ContainerRequest
}

func (listPod) isAction()         {}
func (createSandbox) isAction()   {}
func (startSandbox) isAction()    {}
func (stopGroup) isAction()       {}
func (removeContainer) isAction() {}
func (resumeContainer) isAction() {}
func (checkImage) isAction()      {}
func (pullImage) isAction()       {}
func (startContainer) isAction()  {}
func (postStart) isAction()       {}
func (removeFiles) isAction()     {}
func (syncVolumes) isAction()     {}
func (emit) isAction()            {}
func (report) isAction()          {}
func (forget) isAction()          {}
func (probe) isAction()           {}
func (watchFiles) isAction()      {}
func (readiness) isAction()       {}
func (note) isAction()            {}
func (finish) isAction()          {}

// outcome is what an action that did I/O came to.
type outcome interface{ isOutcome() }

type (
	listed struct {
		recs []pod.Record
		err  error
	}
	sandboxMade struct {
		rec pod.Record
		err error
	}
	sandboxStarted struct {
		rec pod.Record
		err error
	}
	// stopped: hookFailed holds the message of each preStop hook that
	// failed (not one cut short by the grace period).
	stopped struct {
		hookFailed []hookFailure
		err        error
	}
	removed struct{ err error }
	resumed struct {
		rec pod.Record
		err error
	}
	imageChecked struct {
		need bool
		from string // where the image present was taken from; "" if the runtime's own
		err  error
	}
	pulled struct {
		present bool
		took    time.Duration
		err     error
	}
	started struct {
		rec pod.Record
		err error
	}
	// hookRan: abandoned means the hook was cut short because the core
	// found it obsolete; msg is the kubelet's message for a failure.
	hookRan struct {
		msg       string
		abandoned bool
		err       error
	}
	volumesSynced struct{ err error }
	// filesRemoved: failed holds the UIDs whose files remain, with why.
	filesRemoved struct {
		done   []string
		failed map[string]error
	}
)

// hookFailure is a preStop hook that failed: the container it ran in, and
// the kubelet's message.
type hookFailure struct {
	container, msg string
}

func (listed) isOutcome()         {}
func (sandboxMade) isOutcome()    {}
func (sandboxStarted) isOutcome() {}
func (stopped) isOutcome()        {}
func (removed) isOutcome()        {}
func (resumed) isOutcome()        {}
func (imageChecked) isOutcome()   {}
func (pulled) isOutcome()         {}
func (started) isOutcome()        {}
func (hookRan) isOutcome()        {}
func (filesRemoved) isOutcome()   {}
func (volumesSynced) isOutcome()  {}
