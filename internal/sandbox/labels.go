package sandbox

import (
	"strconv"
	"strings"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// podLabels are the labels every container of p carries.
func podLabels(p *pod.Pod, kind pod.ContainerKind) map[string]string {
	labels := map[string]string{
		LabelPodName:      p.Name,
		LabelPodNamespace: p.Namespace,
		LabelPodUID:       string(p.UID),
		LabelKind:         string(kind),
	}
	if needs := p.StopNeeds().String(); needs != "" {
		labels[LabelStopNeeds] = needs
	}
	return labels
}

// recordFromLabels rebuilds what staticlet knew of a container when it
// created it.
func recordFromLabels(id string, labels map[string]string, created time.Time) pod.Record {
	attempt, _ := strconv.Atoi(labels[LabelAttempt])
	rec := pod.Record{
		ID:        id,
		Pod:       pod.Key{Namespace: labels[LabelPodNamespace], Name: labels[LabelPodName]},
		PodUID:    labels[LabelPodUID],
		Kind:      pod.ContainerKind(labels[LabelKind]),
		Name:      labels[LabelContainer],
		Hash:      labels[LabelHash],
		Attempt:   attempt,
		SandboxID: labels[LabelSandboxID],
		Image:     labels[LabelImageRef],
		ImageID:   labels[LabelImageID],
		State:     pod.TaskCreated,
		CreatedAt: created,
		StartedAt: created,
	}
	if ips := labels[LabelPodIPs]; ips != "" {
		rec.IPs = strings.Split(ips, ",")
	}
	rec.Pinned = labels[LabelPinned] == "true"
	// A sandbox whose pause process was started again: the exit of an
	// earlier one, recorded late, is no exit of this one.
	restarted := false
	if at, err := time.Parse(time.RFC3339Nano, labels[LabelStartedAt]); err == nil {
		rec.StartedAt, restarted = at, true
	}
	// A container whose task is gone keeps its exit in labels written when
	// it exited.
	if code, ok := labels[LabelExitCode]; ok {
		finished, _ := time.Parse(time.RFC3339Nano, labels[LabelFinishedAt])
		if !restarted || !finished.Before(rec.StartedAt) {
			c, _ := strconv.ParseInt(code, 10, 32)
			rec.State = pod.TaskExited
			rec.ExitCode = int32(c)
			rec.FinishedAt = finished
		}
	}
	rec.OOMKilled = labels[LabelOOMKilled] == "true"
	rec.StopNeeds = labels[LabelStopNeeds]
	rec.Evicted = labels[LabelEvicted]
	rec.Devices = splitList(labels[LabelDevices])
	// A sandbox without a pause process is up from its creation; record
	// tells when it is gone (sandboxGone).
	if rec.Kind == pod.KindSandbox && labels[LabelPause] == pauseNone {
		rec.NoPause, rec.State = true, pod.TaskRunning
	}
	return rec
}

// lostExit is the exit of container rec, whose task is gone with no exit
// recorded, when it may have run (it was labelled starting, at the time
// given): exited, code 137, lost.
func lostExit(rec *pod.Record, starting string) {
	if starting == "" || rec.State != pod.TaskCreated {
		return
	}
	rec.State, rec.ExitCode, rec.Lost = pod.TaskExited, 137, true
	if at, err := time.Parse(time.RFC3339Nano, starting); err == nil {
		rec.StartedAt, rec.FinishedAt = at, at
	}
}
