package reconcile

import (
	"fmt"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// A pod's sandbox goes down when its pause process exits, or fails to be
// created or started. What follows depends on whether the pod's containers
// need that process. Off the shared PID namespace, they joined the pod's
// pinned namespaces by path and run on without it: a new pause is started
// in place, the containers, network and addresses untouched. With
// shareProcessNamespace the pause is the pod's PID 1, whose death took the
// containers with it, and a sandbox made before staticlet pinned
// namespaces holds them itself: the pod is re-created, as the kubelet
// does. Either way the retries back off as a crashing container's
// restarts do, so a pause that cannot run costs a try every few minutes,
// not a loop. A sandbox without a pause process (pod.Record.NoPause) goes
// down only with its pinned namespaces, a reboot say, and is re-created.

// sandboxStep is what a pod's sandbox needs next.
type sandboxStep int

const (
	sandboxKeep    sandboxStep = iota // running, or not to run again (the pod is done)
	sandboxCreate                     // none for the pod's spec: create one
	sandboxRestart                    // down, containers independent of it: start a new pause in place
	sandboxReplace                    // down, containers dependent on it: re-create the pod
	sandboxWait                       // down or not creatable: nothing before until
)

// sandboxDecision is decideSandbox's answer.
type sandboxDecision struct {
	step  sandboxStep
	until time.Time // for sandboxWait
	// exited is set when this decision counted a new failure of a pause
	// process that had started: an exit to tell of.
	exited bool
}

// decideSandbox decides what sandbox sb (exists false: there is none for
// the pod's spec) needs, given whether the pod is done (terminal) and its
// containers share the pause's PID namespace, and counts a failure in s.
// Like decideContainer it is pure but for the retry history it keeps.
func decideSandbox(sb pod.Record, exists, terminal, sharesPID bool, b Backoff, s *sandboxRetry, now time.Time) sandboxDecision {
	var d sandboxDecision
	if exists && (sb.State == pod.TaskRunning || terminal) {
		return sandboxDecision{step: sandboxKeep}
	}
	if exists {
		at, ran := sb.FinishedAt, sb.StartedAt
		if sb.State != pod.TaskExited || at.IsZero() {
			at, ran = now, time.Time{} // created, never started
		}
		d.exited = b.failed(s, ran, at) && sb.State == pod.TaskExited
	}
	if s.failures > 0 {
		if due := b.due(s); due.After(now) {
			d.step, d.until = sandboxWait, due
			return d
		}
	}
	switch {
	case !exists:
		d.step = sandboxCreate
	case sb.Pinned && !sharesPID:
		d.step = sandboxRestart
	default:
		d.step = sandboxReplace
	}
	return d
}

// inPlace tells whether sandbox sb of p can have its pause started again
// without touching the pod's containers.
func inPlace(p *pod.Pod, sb pod.Record) bool { return sb.Pinned && !sharesPID(p) }

// decideSandbox decides for the pod's current sandbox and tells of a pause
// process that exited, and of a wait, in events and in the status.
func (c *podCore) decideSandbox(out []action, p *pod.Pod, v view, sb pod.Record, exists bool) (sandboxDecision, []action) {
	if c.sandbox.retry.hash != p.SandboxHash || len(c.mem.restartNow) > 0 {
		// A new pod spec starts without the old one's backoff, and so
		// does a restart asked now (staticlet restart): the containers
		// to restart need their sandbox first.
		c.sandbox.retry = sandboxRetry{hash: p.SandboxHash}
	}
	terminal := exists && c.terminal(p, v, sb.ID)
	d := decideSandbox(sb, exists, terminal, sharesPID(p), c.backoff, &c.sandbox.retry, c.now)
	if d.exited && sb.NoPause {
		// No process exited: what the sandbox stood for is gone.
		msg := fmt.Sprintf("Pod sandbox %s is gone: %s; the pod will be re-created", shortID(sb.ID), sb.Message)
		out = append(out, c.event(c.now, "", pod.EventWarning, "SandboxGone", msg))
		c.sandbox.down = waitingState{reason: "SandboxGone", message: msg}
	} else if d.exited {
		next := "the pod will be re-created"
		if inPlace(p, sb) {
			next = "it will be started again; the pod's containers keep running"
		}
		msg := fmt.Sprintf("Pod sandbox's pause process exited with code %d: %s; %s", sb.ExitCode, outputOrNone(sb.Message), next)
		out = append(out, c.event(c.now, "", pod.EventWarning, "SandboxExited", msg))
		c.sandbox.down = waitingState{reason: "SandboxExited", message: msg}
	}
	if d.step == sandboxWait && c.sandbox.down.reason != "BackOff" {
		msg := fmt.Sprintf("Back-off restarting failed pod sandbox: next try in %s", d.until.Sub(c.now).Round(time.Second))
		if c.sandbox.down.message != "" {
			msg += " (" + c.sandbox.down.message + ")"
		}
		out = append(out, c.event(c.now, "", pod.EventWarning, "BackOff", msg))
		c.sandbox.down = waitingState{reason: "BackOff", message: msg}
	}
	if d.step == sandboxKeep && sb.State == pod.TaskRunning {
		c.sandbox.down = waitingState{}
	}
	return d, out
}

// outputOrNone is a pause process's output as an event tells it.
func outputOrNone(out string) string {
	if out == "" {
		return "no output"
	}
	return out
}

// sandboxFailed tells that creating or starting the pod's sandbox failed
// with err, and counts the failure.
func (c *podCore) sandboxFailed(out []action, err error) []action {
	c.backoff.failed(&c.sandbox.retry, time.Time{}, c.now)
	c.sandbox.down = waitingState{reason: "FailedCreatePodSandBox", message: err.Error()}
	return append(out, c.event(c.now, "", pod.EventWarning, "FailedCreatePodSandBox", err.Error()))
}

// sandboxDue is how long until the sandbox may be tried again after a
// failure; at least a millisecond.
func (c *podCore) sandboxDue() time.Duration {
	return max(c.backoff.due(&c.sandbox.retry).Sub(c.now), time.Millisecond)
}

// minAgain is the sooner of two "look again" delays, 0 meaning never.
func minAgain(a, b time.Duration) time.Duration {
	if a <= 0 {
		return max(b, time.Millisecond)
	}
	return min(a, max(b, time.Millisecond))
}
