package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestRestartOnChange: a pod with staticlet.io/restart-on-change restarts
// the container that mounts a hostPath file when the file's content
// changes, as a renaming editor writes it, with an event naming the file;
// a touch restarts nothing; a pod without the annotation is left alone.
func TestRestartOnChange(t *testing.T) {
	e := harness.NewEnv(t)
	conf := filepath.Join(e.Dir, "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(conf, "lb.cfg")
	if err := os.WriteFile(cfg, []byte("backend one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := func(name, annotation string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
%sspec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: lb
    image: localhost/busybox:test
    command: [sh, -c, "cat /etc/lb/lb.cfg; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: conf, mountPath: /etc/lb}]
  volumes:
  - {name: conf, hostPath: {path: %s, type: Directory}}
`, name, annotation, conf)
	}
	e.Write("lb.yaml", manifest("lb", "  annotations:\n    staticlet.io/restart-on-change: \"true\"\n"))
	e.Write("plain.yaml", manifest("plain", ""))
	d := e.Start()
	restarts := func(p *v1.Pod) int32 { return p.Status.ContainerStatuses[0].RestartCount }
	d.WaitPod("lb-"+harness.TestNode, time.Minute, "lb running", harness.Running)
	d.WaitPod("plain-"+harness.TestNode, time.Minute, "plain running", harness.Running)

	// A touch is no change of content. What follows shows it restarted
	// nothing: the next restart is the one of the real change.
	now := time.Now().Add(time.Minute)
	if err := os.Chtimes(cfg, now, now); err != nil {
		t.Fatal(err)
	}
	// An editor's write: a new file renamed over the old one.
	tmp := filepath.Join(conf, ".lb.cfg.swp")
	if err := os.WriteFile(tmp, []byte("backend two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	lb := d.WaitPod("lb-"+harness.TestNode, time.Minute, "lb restarted", func(p *v1.Pod) bool { return harness.Running(p) && restarts(p) >= 1 })
	if n := restarts(lb); n != 1 {
		t.Errorf("lb restarted %d times, want once: a touch is no change", n)
	}
	events, err := d.Client().Events(context.Background(), "default/lb-"+harness.TestNode)
	if err != nil {
		t.Fatal(err)
	}
	told := false
	for _, ev := range events {
		told = told || (ev.Reason == "Killing" && strings.Contains(ev.Message, conf) && strings.Contains(ev.Message, "changed"))
	}
	if !told {
		t.Errorf("no Killing event naming %s among %+v", conf, events)
	}
	logs, err := d.CLI("logs", "lb-"+harness.TestNode)
	if err != nil || !strings.Contains(logs, "backend two") {
		t.Errorf("logs of lb = %q, %v; want the new content read at the restart", logs, err)
	}
	if p, err := d.Pod("plain-" + harness.TestNode); err != nil {
		t.Error(err)
	} else if restarts(p) != 0 {
		t.Errorf("plain: %s; want it never restarted: it has no annotation", harness.Describe(p))
	}
}
