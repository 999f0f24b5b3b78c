package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestRestartOnChange: a pod with staticlet.io/restart-on-change restarts
// the container that mounts a hostPath file when the file's content
// changes, as a renaming editor writes it, with an event naming the file;
// a touch restarts nothing; a pod without the annotation is left alone.
func TestRestartOnChange(t *testing.T) {
	e := newEnv(t)
	conf := filepath.Join(e.dir, "conf")
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
	e.write("lb.yaml", manifest("lb", "  annotations:\n    staticlet.io/restart-on-change: \"true\"\n"))
	e.write("plain.yaml", manifest("plain", ""))
	d := e.start()
	restarts := func(p *v1.Pod) int32 { return p.Status.ContainerStatuses[0].RestartCount }
	lb := d.waitPod("lb-"+testNode, time.Minute, "lb running", running)
	d.waitPod("plain-"+testNode, time.Minute, "plain running", running)

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
	lb = d.waitPod("lb-"+testNode, time.Minute, "lb restarted", func(p *v1.Pod) bool { return running(p) && restarts(p) >= 1 })
	if n := restarts(lb); n != 1 {
		t.Errorf("lb restarted %d times, want once: a touch is no change", n)
	}
	events, err := d.client().Events(context.Background(), "default/lb-"+testNode)
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
	logs, err := d.cli("logs", "lb-"+testNode)
	if err != nil || !strings.Contains(logs, "backend two") {
		t.Errorf("logs of lb = %q, %v; want the new content read at the restart", logs, err)
	}
	if p, err := d.pod("plain-" + testNode); err != nil {
		t.Error(err)
	} else if restarts(p) != 0 {
		t.Errorf("plain: %s; want it never restarted: it has no annotation", describe(p))
	}
}
