package reconcile

import (
	"fmt"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// stage is where a pass stands: the I/O action it waits on, whose outcome
// step hands to the method the stage names. Each stage waits for one
// outcome type, the one its action's comment names (actions.go); resume
// lists them by outcome.
type stage int

const (
	idle stage = iota // no pass under way

	// A sync pass (plan_sync.go).
	atSyncList         // listPod: decide the sandbox (syncListed)
	atSyncStopStale    // stopGroup: what no kept sandbox holds stopped (staleStopped)
	atSyncRemoveStale  // removeFiles: their pods' files (staleFilesRemoved)
	atSyncCreate       // createSandbox (sandboxCreated)
	atSyncStartPause   // startSandbox, before the containers (pauseStarted)
	atSyncVolumes      // syncVolumes: the objects' volumes (volumesWritten)
	atSyncStartLater   // startSandbox, after the containers (pauseStartedLater)
	atSyncReport       // listPod: report, then end the pass (reported)
	atConvStopOne      // stopGroup: one container (oneStopped)
	atConvRemoveOne    // removeContainer: one container, to start anew (oneRemoved)
	atConvResume       // resumeContainer (resumedOne)
	atConvCheckImage   // checkImage (imageChecked)
	atConvPullReport   // listPod: report while the image is pulled (pullReported)
	atConvPull         // pullImage (pulledImage)
	atConvStart        // startContainer (startedOne)
	atConvPostStart    // postStart (hookRan)
	atConvStopUnwanted // stopGroup: containers the spec no longer has (unwantedStopped)
	atConvStopSidecars // stopGroup: what runs on in a terminal pod (sidecarsStopped)
	atConvStopSandbox  // stopGroup: a terminal pod's sandbox (sandboxStopped)

	// A remove pass (plan_stop.go).
	atRemoveList  // listPod (removeListed)
	atRemoveStop  // stopGroup: all the pod has (removeStopped)
	atRemoveFiles // removeFiles: the files of its sandboxes (filesGone)

	// A halt pass for a node shutdown (plan_stop.go).
	atHaltList   // listPod (haltListed)
	atHaltStop   // stopGroup (haltStopped)
	atHaltReport // listPod: report the pod as shut down (haltReported)
)

var stageNames = [...]string{
	idle:               "idle",
	atSyncList:         "sync: list",
	atSyncStopStale:    "sync: stop stale",
	atSyncRemoveStale:  "sync: remove stale files",
	atSyncCreate:       "sync: create sandbox",
	atSyncStartPause:   "sync: start pause",
	atSyncVolumes:      "sync: volumes",
	atSyncStartLater:   "sync: start pause after containers",
	atSyncReport:       "sync: report",
	atConvStopOne:      "containers: stop one",
	atConvRemoveOne:    "containers: remove one",
	atConvResume:       "containers: resume",
	atConvCheckImage:   "containers: check image",
	atConvPullReport:   "containers: report pulling",
	atConvPull:         "containers: pull",
	atConvStart:        "containers: start",
	atConvPostStart:    "containers: postStart hook",
	atConvStopUnwanted: "containers: stop unwanted",
	atConvStopSidecars: "containers: stop sidecars",
	atConvStopSandbox:  "containers: stop sandbox",
	atRemoveList:       "remove: list",
	atRemoveStop:       "remove: stop",
	atRemoveFiles:      "remove: remove files",
	atHaltList:         "halt: list",
	atHaltStop:         "halt: stop",
	atHaltReport:       "halt: report",
}

func (s stage) String() string {
	if s >= 0 && int(s) < len(stageNames) && stageNames[s] != "" {
		return stageNames[s]
	}
	return fmt.Sprintf("stage(%d)", int(s))
}

// pass is the pass under way: where it stands, and what it learnt so far
// that the core does not remember between passes. begin resets it.
type pass struct {
	at stage
	// p is the pod synced or halted; nil in a remove pass, or a halt of
	// a pod being removed.
	p *pod.Pod
	// recs are the records being stopped, to remove their files after.
	recs []pod.Record
	// uids are the pods whose files are being removed.
	uids []string
	// err is what went wrong so far, for the pass's end.
	err error
	// limit bounds each container's stop in a halt pass.
	limit time.Duration
	// sync is what a sync pass knows, conv what converging its
	// containers does.
	sync syncPass
	conv convergePass
}

// resume carries the pass on from stage at with outcome o. An outcome the
// stage does not wait for is a bug in the executor: the pass ends with an
// error, and the next one starts afresh.
func (c *podCore) resume(at stage, o outcome) []action {
	g := &c.pass.conv
	switch o := o.(type) {
	case listed:
		switch at {
		case atSyncList:
			return c.syncListed(o)
		case atSyncReport:
			return c.reported(o)
		case atConvPullReport:
			return g.pullReported(o)
		case atRemoveList:
			return c.removeListed(o)
		case atHaltList:
			return c.haltListed(o)
		case atHaltReport:
			return c.haltReported(o)
		}
	case stopped:
		switch at {
		case atSyncStopStale:
			return c.staleStopped(o)
		case atConvStopOne:
			return g.oneStopped(o)
		case atConvStopUnwanted:
			return g.unwantedStopped(o)
		case atConvStopSidecars:
			return g.sidecarsStopped(o)
		case atConvStopSandbox:
			return g.sandboxStopped(o)
		case atRemoveStop:
			return c.removeStopped(o)
		case atHaltStop:
			return c.haltStopped(o)
		}
	case filesRemoved:
		switch at {
		case atSyncRemoveStale:
			return c.staleFilesRemoved(o)
		case atRemoveFiles:
			return c.filesGone(o)
		}
	case sandboxStarted:
		switch at {
		case atSyncStartPause:
			return c.pauseStarted(o)
		case atSyncStartLater:
			return c.pauseStartedLater(o)
		}
	default:
		return c.resumeOne(at, o)
	}
	return done(nil, 0, fmt.Errorf("pod %s: outcome %T does not answer the pass at %s", c.key, o, at))
}

// resumeOne is resume for the outcomes that answer one stage each.
func (c *podCore) resumeOne(at stage, o outcome) []action {
	g := &c.pass.conv
	switch o := o.(type) {
	case sandboxMade:
		if at == atSyncCreate {
			return c.sandboxCreated(o)
		}
	case removed:
		if at == atConvRemoveOne {
			return g.oneRemoved(o)
		}
	case resumed:
		if at == atConvResume {
			return g.resumedOne(o)
		}
	case imageChecked:
		if at == atConvCheckImage {
			return g.imageChecked(o)
		}
	case pulled:
		if at == atConvPull {
			return g.pulledImage(o)
		}
	case started:
		if at == atConvStart {
			return g.startedOne(o)
		}
	case hookRan:
		if at == atConvPostStart {
			return g.hookRan(o)
		}
	case volumesSynced:
		if at == atSyncVolumes {
			return c.volumesWritten(o)
		}
	}
	return done(nil, 0, fmt.Errorf("pod %s: outcome %T does not answer the pass at %s", c.key, o, at))
}
