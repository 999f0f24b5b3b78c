package sandbox

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestRecordFromLabels(t *testing.T) {
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	finished := time.Date(2025, 1, 2, 3, 5, 0, 123456789, time.UTC)
	base := map[string]string{
		LabelPodName: "web-n", LabelPodNamespace: "ns", LabelPodUID: "uid", LabelKind: "app",
		LabelContainer: "c", LabelHash: "h", LabelAttempt: "4", LabelSandboxID: "sb",
		LabelImageRef: "busybox", LabelImageID: "docker.io/library/busybox:latest@sha256:x",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	want := pod.Record{
		ID: "id", Pod: pod.Key{Namespace: "ns", Name: "web-n"}, PodUID: "uid", Kind: pod.KindApp,
		Name: "c", Hash: "h", Attempt: 4, SandboxID: "sb", Image: "busybox",
		ImageID: "docker.io/library/busybox:latest@sha256:x", State: pod.TaskCreated,
		CreatedAt: created, StartedAt: created,
	}
	exited := want
	exited.State, exited.ExitCode, exited.FinishedAt = pod.TaskExited, 137, finished
	sandbox := want
	sandbox.Kind, sandbox.IPs = pod.KindSandbox, []string{"10.213.0.2", "fd00:213::2"}
	pinned := want
	pinned.Kind, pinned.Pinned = pod.KindSandbox, true
	// A pause process started again after the one that exited at finished.
	restart := finished.Add(time.Second)
	restarted := pinned
	restarted.StartedAt = restart
	// ... and exited in turn.
	exitedAgain := restarted
	exitedAgain.State, exitedAgain.ExitCode, exitedAgain.FinishedAt = pod.TaskExited, 2, restart.Add(time.Minute)
	tests := []struct {
		name   string
		labels map[string]string
		want   pod.Record
	}{
		{"created", base, want},
		{"exited", with(map[string]string{LabelExitCode: "137", LabelFinishedAt: finished.Format(time.RFC3339Nano)}), exited},
		{"sandbox with pod IPs", with(map[string]string{LabelKind: "sandbox", LabelPodIPs: "10.213.0.2,fd00:213::2"}), sandbox},
		{"pinned sandbox", with(map[string]string{LabelKind: "sandbox", LabelPinned: "true"}), pinned},
		{"sandbox restarted", with(map[string]string{LabelKind: "sandbox", LabelPinned: "true",
			LabelStartedAt: restart.Format(time.RFC3339Nano)}), restarted},
		{"sandbox restarted, the earlier exit recorded late", with(map[string]string{LabelKind: "sandbox", LabelPinned: "true",
			LabelStartedAt: restart.Format(time.RFC3339Nano),
			LabelExitCode:  "137", LabelFinishedAt: finished.Format(time.RFC3339Nano)}), restarted},
		{"sandbox restarted, then exited", with(map[string]string{LabelKind: "sandbox", LabelPinned: "true",
			LabelStartedAt: restart.Format(time.RFC3339Nano),
			LabelExitCode:  "2", LabelFinishedAt: restart.Add(time.Minute).Format(time.RFC3339Nano)}), exitedAgain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := recordFromLabels("id", tt.labels, created); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("recordFromLabels() =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}

	// Labels written by podLabels read back.
	p := &pod.Pod{Pod: &v1.Pod{}}
	p.Name, p.Namespace, p.UID = "web-n", "ns", "uid"
	p.Spec.HostNetwork = true
	p.Spec.Containers = []v1.Container{{Name: "c", Command: []string{"app", "--etcd-servers=https://127.0.0.1:2379"}}}
	got := recordFromLabels("id", podLabels(p, pod.KindSandbox), created)
	if got.Pod != p.Key() || got.PodUID != "uid" || got.Kind != pod.KindSandbox || got.StopNeeds != "reaches=2379" {
		t.Errorf("recordFromLabels(podLabels()) = %+v, want pod %s uid uid kind sandbox, stop needs reaches=2379", got, p.Key())
	}
}

func TestLostExit(t *testing.T) {
	const at = "2026-11-24T01:00:00Z"
	tests := []struct {
		name     string
		state    pod.TaskState
		starting string
		want     pod.TaskState
		lost     bool
	}{
		{"never labelled starting: not started yet", pod.TaskCreated, "", pod.TaskCreated, false},
		{"labelled starting, no task: may have run", pod.TaskCreated, at, pod.TaskExited, true},
		{"its exit recorded: the exit stands", pod.TaskExited, at, pod.TaskExited, false},
		{"running", pod.TaskRunning, at, pod.TaskRunning, false},
	}
	for _, tt := range tests {
		rec := pod.Record{State: tt.state}
		lostExit(&rec, tt.starting)
		if rec.State != tt.want || rec.Lost != tt.lost || (tt.lost && (rec.ExitCode != 137 || rec.FinishedAt.Format(time.RFC3339) != at)) {
			t.Errorf("%s: lostExit = %+v, want state %s, lost %v (exit 137 at %s)", tt.name, rec, tt.want, tt.lost, at)
		}
	}
}
