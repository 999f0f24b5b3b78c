package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pod"
)

func TestReadTerminationFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("a", 100) + strings.Repeat("b", maxMessageBytes)
	tests := []struct {
		name     string
		path     string
		fallback bool // the policy falls back and the container failed
		want     string
		wantLogs bool
	}{
		{"content", file("bye", "bye"), false, "bye", false},
		{"content wins over the fallback", file("bye2", "bye"), true, "bye", false},
		{"empty", file("empty", ""), false, "", false},
		{"empty with fallback", file("empty2", ""), true, "", true},
		{"missing", filepath.Join(dir, "none"), false, "", false},
		{"missing with fallback", filepath.Join(dir, "none"), true, "", true},
		{"no file", "", false, "", false},
		{"no file with fallback", "", true, "", true},
		{"capped to its end", file("long", long), false, strings.Repeat("b", maxMessageBytes), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, logs := readTerminationFile(tt.path, tt.fallback)
			if got != tt.want || logs != tt.wantLogs {
				t.Errorf("readTerminationFile(%q, %v) = %.20q (%d bytes), %v; want %.20q (%d bytes), %v",
					tt.path, tt.fallback, got, len(got), logs, tt.want, len(tt.want), tt.wantLogs)
			}
		})
	}
}

// writeLog writes a CRI log of the given lines, each split into partial
// records of at most split bytes.
func writeLog(t *testing.T, path string, lines []string, split int) {
	t.Helper()
	var b []byte
	now := time.Now()
	for i, l := range lines {
		stream := logs.Stdout
		if i%2 == 1 {
			stream = logs.Stderr
		}
		for len(l) > split {
			b = logs.AppendRecord(b, now, stream, true, []byte(l[:split]))
			l = l[split:]
		}
		b = logs.AppendRecord(b, now, stream, false, []byte(l))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadLogTail(t *testing.T) {
	dir := t.TempDir()
	lines := func(n, width int) []string {
		var out []string
		for i := range n {
			s := fmt.Sprintf("line %d", i)
			out = append(out, s+strings.Repeat(".", max(width-len(s), 0)))
		}
		return out
	}
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	tests := []struct {
		name  string
		lines []string
		split int
		want  string
	}{
		{"a few lines", []string{"starting", "failed: no config"}, 100, "starting\nfailed: no config\n"},
		{"partial records joined", []string{"a long line in parts", "end"}, 4, "a long line in parts\nend\n"},
		{"the last 80 lines", lines(200, 0), 100, join(lines(200, 0)[120:])},
		{"the last 2048 bytes of those", lines(80, 99), 1000, join(lines(80, 99))[80*100-maxLogMessageBytes:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".log")
			writeLog(t, path, tt.lines, tt.split)
			if got := readLogTail(t.Context(), path); got != tt.want {
				t.Errorf("readLogTail() = %q, want %q", got, tt.want)
			}
		})
	}
	if got := readLogTail(t.Context(), filepath.Join(dir, "none.log")); !strings.HasPrefix(got, "Error on reading termination message from logs: ") {
		t.Errorf("readLogTail(missing) = %q, want the kubelet's error message", got)
	}
}

func TestLastBytes(t *testing.T) {
	w := &lastBytes{max: 5}
	for _, s := range []string{"ab", "cd", "efg", "", "0123456789", "xy"} {
		w.Write([]byte(s))
	}
	if got := string(w.b); got != "789xy" {
		t.Errorf("lastBytes after writes = %q, want %q", got, "789xy")
	}
}

func TestTerminationFileAndLabels(t *testing.T) {
	r := &Runtime{cfg: Config{RootDir: t.TempDir()}}
	c := &v1.Container{Name: "app", TerminationMessagePath: "/dev/termination-log"}
	path, err := r.prepareTermination("uid1", c, "id1")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(r.cfg.RootDir, "pods", "uid1", "containers", "app", "id1"); path != want {
		t.Errorf("prepareTermination() = %q, want %q", path, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o666 {
		t.Errorf("termination file: %v, %v; want an empty file of mode 0666", fi, err)
	}

	labels := map[string]string{}
	terminationLabels(labels, c, path, "/logs/0.log")
	if labels[LabelTerminationFile] != path || len(labels) != 1 {
		t.Errorf("terminationLabels(File policy) = %v, want only the file", labels)
	}
	c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	terminationLabels(labels, c, path, "/logs/0.log")
	if labels[LabelTerminationLog] != "/logs/0.log" {
		t.Errorf("terminationLabels(FallbackToLogsOnError) = %v, want the log path", labels)
	}

	// The message is read once the container exited, and kept.
	ctx := context.Background()
	rec := pod.Record{ID: "id1", Kind: pod.KindApp, State: pod.TaskRunning, ExitCode: 1}
	if got := r.terminationMessage(ctx, rec, labels, true); got != "" {
		t.Errorf("message of a running container = %q, want none", got)
	}
	if err := os.WriteFile(path, []byte("bye"), 0o666); err != nil {
		t.Fatal(err)
	}
	rec.State = pod.TaskExited
	if got := r.terminationMessage(ctx, rec, labels, false); got != "bye" {
		t.Errorf("message = %q, want bye", got)
	}
	if err := os.WriteFile(path, []byte("changed"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := r.terminationMessage(ctx, rec, labels, false); got != "bye" {
		t.Errorf("message read again = %q, want the cached bye", got)
	}

	// Removed with the container.
	if err := r.forgetTermination("id1", labels); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("termination file after removal: %v, want it gone", err)
	}
	if _, ok := r.messages.get("id1"); ok {
		t.Errorf("message still cached after removal")
	}
	// A path outside staticlet's pods is never removed.
	outside := filepath.Join(t.TempDir(), "keep")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.removeTerminationFile(outside); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("a file outside the root dir was removed: %v", err)
	}

	// No path, or a volume mounted at it: no file.
	for _, c := range []*v1.Container{
		{Name: "none"},
		{Name: "vol", TerminationMessagePath: "/msg", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/msg"}}},
	} {
		if p, err := r.prepareTermination("uid1", c, "id2"); p != "" || err != nil {
			t.Errorf("prepareTermination(%s) = %q, %v; want no file", c.Name, p, err)
		}
	}
}
