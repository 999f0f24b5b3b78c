package sandbox

import (
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/task"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestApplyTask: the task list tells a process's state, unless the labels
// already hold its exit, which is final.
func TestApplyTask(t *testing.T) {
	exitedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	settled := recordFromLabels("c1", map[string]string{LabelExitCode: "3", LabelFinishedAt: exitedAt.Format(time.RFC3339Nano)}, exitedAt)
	tests := []struct {
		name  string
		rec   pod.Record
		task  *task.Process
		state pod.TaskState
		code  int32
	}{
		{"no task", pod.Record{State: pod.TaskCreated}, nil, pod.TaskCreated, 0},
		{"running", pod.Record{State: pod.TaskCreated}, &task.Process{Status: task.Status_RUNNING, Pid: 7}, pod.TaskRunning, 0},
		{"stopped", pod.Record{State: pod.TaskCreated}, &task.Process{Status: task.Status_STOPPED, ExitStatus: 137, ExitedAt: timestamppb.New(exitedAt)}, pod.TaskExited, 137},
		{"settled, task still listed as running", settled, &task.Process{Status: task.Status_RUNNING, Pid: 7}, pod.TaskExited, 3},
		{"settled, task gone", settled, nil, pod.TaskExited, 3},
	}
	for _, tt := range tests {
		rec := tt.rec
		applyTask(&rec, tt.task)
		if rec.State != tt.state || rec.ExitCode != tt.code {
			t.Errorf("%s: state %s, exit %d; want %s, %d", tt.name, rec.State, rec.ExitCode, tt.state, tt.code)
		}
		if tt.state == pod.TaskExited && !rec.FinishedAt.Equal(exitedAt) {
			t.Errorf("%s: finished at %v, want %v", tt.name, rec.FinishedAt, exitedAt)
		}
	}
}
