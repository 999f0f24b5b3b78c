package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/status"
)

// writeLog writes lines into a container instance's log file with the
// log writer, the first line logged at start and each next one a step
// later.
func writeLog(t *testing.T, path string, start time.Time, step time.Duration, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	now := start
	w, err := logs.NewWriter(logs.WriterConfig{Path: path, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		now = start.Add(time.Duration(i) * step)
		if err := w.Feed(logs.Stdout, []byte(l+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLogOpener: the opener the status socket and the Kubernetes API
// share reads the files the log writer wrote, with every option of
// kubectl logs.
func TestLogOpener(t *testing.T) {
	dir := t.TempDir()
	store := status.NewStore()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
			Name: "c", RestartCount: 1, ContainerID: "containerd://2",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://2"}},
		}}},
	}
	store.SetPod(p)
	cdir := filepath.Join(logs.PodDir(dir, "ns", "web", "u1"), "c")
	now := time.Now()
	writeLog(t, filepath.Join(cdir, logs.FileName(0)), now.Add(-3*time.Hour), time.Second, "before the restart")
	writeLog(t, filepath.Join(cdir, logs.FileName(1)), now.Add(-3*time.Hour), time.Hour, "three hours ago", "two hours ago", "an hour ago")
	open := logOpener(store, dir)
	tests := []struct {
		name string
		opts status.LogOptions
		want string
	}{
		{"all", status.LogOptions{TailLines: -1}, "three hours ago\ntwo hours ago\nan hour ago\n"},
		{"tail", status.LogOptions{TailLines: 1}, "an hour ago\n"},
		{"previous", status.LogOptions{TailLines: -1, Previous: true}, "before the restart\n"},
		{"since seconds", status.LogOptions{TailLines: -1, SinceSeconds: int64((150 * time.Minute).Seconds())}, "two hours ago\nan hour ago\n"},
		{"since time", status.LogOptions{TailLines: -1, SinceTime: now.Add(-90 * time.Minute)}, "an hour ago\n"},
		{"limit bytes", status.LogOptions{TailLines: -1, LimitBytes: 5}, "three"},
		{"limit bytes following a stopped container", status.LogOptions{TailLines: -1, Follow: true, LimitBytes: 20}, "three hours ago\ntwo "},
	}
	for _, tt := range tests {
		rc, err := open(t.Context(), "ns/web", "c", tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != tt.want {
			t.Errorf("%s: read %q, %v; want %q", tt.name, b, err, tt.want)
		}
	}
	if _, err := open(t.Context(), "ns/web", "other", status.LogOptions{}); err == nil || !strings.Contains(err.Error(), "not been created") {
		t.Errorf("log of an unknown container: %v, want not created", err)
	}
}
