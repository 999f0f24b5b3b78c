package sandbox

import (
	"testing"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestResumeContainer: a container left half started is started, whether
// it has no task yet or a task never started; one whose start landed
// after all is reported as it is, not run again.
func TestResumeContainer(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/resume.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: resume
spec:
  containers:
  - name: long
    image: localhost/busybox:test
    command: [sleep, "600"]
  - name: once
    image: localhost/busybox:test
    command: ["true"]
`)
	sb := h.sandbox(p)
	tests := []struct {
		name      string
		container string
		// leave makes what a dead staticlet left of container c: its
		// task deleted, then maybe a new one created or started.
		leave     func(t *testing.T, c client.Container)
		wantState pod.TaskState
	}{
		{"no task", "long", func(t *testing.T, c client.Container) {}, pod.TaskRunning},
		{"task created", "long", func(t *testing.T, c client.Container) {
			if _, err := c.NewTask(h.nsCtx(), cio.NullIO); err != nil {
				t.Fatal(err)
			}
		}, pod.TaskRunning},
		{"task lost after it may have started", "once", func(t *testing.T, c client.Container) {
			if _, err := c.SetLabels(h.nsCtx(), map[string]string{LabelStarting: "2026-11-24T01:00:00Z"}); err != nil {
				t.Fatal(err)
			}
		}, pod.TaskExited},
		{"task started and exited", "once", func(t *testing.T, c client.Container) {
			task, err := c.NewTask(h.nsCtx(), cio.NullIO)
			if err != nil {
				t.Fatal(err)
			}
			exited, err := task.Wait(h.nsCtx())
			if err != nil {
				t.Fatal(err)
			}
			if err := task.Start(h.nsCtx()); err != nil {
				t.Fatal(err)
			}
			<-exited
		}, pod.TaskExited},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := h.start(p, sb, tt.container, i)
			c, err := h.client.LoadContainer(h.nsCtx(), rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.rt.deleteTask(h.nsCtx(), c, client.WithProcessKill); err != nil {
				t.Fatal(err)
			}
			tt.leave(t, c)
			got, err := h.rt.ResumeContainer(h.ctx(), rec.ID)
			if err != nil {
				t.Fatalf("ResumeContainer: %v", err)
			}
			if got.State != tt.wantState || got.ID != rec.ID || got.Name != tt.container || got.Attempt != i {
				t.Errorf("ResumeContainer = %+v, want container %s attempt %d %s", got, tt.container, i, tt.wantState)
			}
			task, err := c.Task(h.nsCtx(), nil)
			if tt.name == "task lost after it may have started" {
				if !got.Lost || got.ExitCode != 137 || err == nil {
					t.Errorf("ResumeContainer = %+v, task %v; want lost, exit 137, and no task made", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantState == pod.TaskRunning && (gone(task.Pid()) || task.Pid() != got.Pid) {
				t.Errorf("task pid %d (gone: %v), record pid %d: want the running task's", task.Pid(), gone(task.Pid()), got.Pid)
			}
		})
	}
}
