package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// terminationPod is a pod whose one container "main" runs script; extra
// (indented for the container) sets its termination message fields.
func terminationPod(name, policy, script, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  restartPolicy: %s
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", %q]
%s`, name, policy, script, extra)
}

// terminatedMessage returns the message of pod p's container's current
// state (or, with last, its last state), and whether it has terminated.
func terminatedMessage(p *v1.Pod, last bool) (string, bool) {
	if len(p.Status.ContainerStatuses) == 0 {
		return "", false
	}
	cs := p.Status.ContainerStatuses[0]
	t := cs.State.Terminated
	if last {
		t = cs.LastTerminationState.Terminated
	}
	if t == nil {
		return "", false
	}
	return t.Message, true
}

// TestTerminationMessages checks that what a container writes to its
// terminationMessagePath, or the end of its log when its policy falls back
// to it, is its terminated state's message, before and after staticlet is
// killed and started again; and that the files go with their containers.
func TestTerminationMessages(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()

	var lines strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	wantTail := lines.String()[strings.Index(lines.String(), "line 21\n"):] // the last 80 lines
	fallback := "    terminationMessagePolicy: FallbackToLogsOnError\n"
	pods := []struct {
		name, policy, script, extra string
		last                        bool // the message is in lastState, after a restart
		want                        string
	}{
		{"bye", "Always", "printf bye > /dev/termination-log; exit 1", "", true, "bye"},
		{
			"custom", "Never", "echo custom > /tmp/msg",
			"    terminationMessagePath: /tmp/msg\n    securityContext:\n      runAsUser: 1000\n", false, "custom\n",
		},
		{"fallback", "Never", "for i in $(seq 1 100); do echo line $i; done; exit 2", fallback, false, wantTail},
		{"file-wins", "Never", "echo noise; printf written > /dev/termination-log; exit 3", fallback, false, "written"},
		{"success", "Never", "echo all good", fallback, false, ""},
	}
	for _, p := range pods {
		e.Write(p.name+".yaml", terminationPod(p.name, p.policy, p.script, p.extra))
	}
	check := func(d *harness.Daemon, when string) {
		t.Helper()
		for _, p := range pods {
			d.WaitPod(p.name+"-"+harness.TestNode, 30*time.Second, fmt.Sprintf("%s: pod %s's message %q", when, p.name, p.want), func(pod *v1.Pod) bool {
				msg, ok := terminatedMessage(pod, p.last)
				return ok && msg == p.want && (!p.last || pod.Status.ContainerStatuses[0].RestartCount >= 1)
			})
		}
	}
	check(d, "first run")

	// Killed, staticlet finds the messages again in the files.
	d.Kill()
	d = e.Start()
	check(d, "after a restart")

	// The crash-looping pod keeps the files of the containers it keeps,
	// and no more.
	d.WaitPod("bye-"+harness.TestNode, 60*time.Second, "bye restarted 3 times", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount >= 3
	})
	harness.WaitFor(t, 30*time.Second, "at most 2 termination files of bye's container", func() (bool, string) {
		files, _ := filepath.Glob(filepath.Join(e.Root, "pods", "*", "containers", "main", "*"))
		var bye []string
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil && string(data) == "bye" {
				bye = append(bye, f)
			}
		}
		return len(bye) <= 2, fmt.Sprint(bye)
	})

	// And the pods' files go with the pods.
	for _, p := range pods {
		e.Remove(p.name + ".yaml")
	}
	harness.WaitFor(t, 60*time.Second, "no termination files once the pods are gone", func() (bool, string) {
		files, _ := filepath.Glob(filepath.Join(e.Root, "pods", "*", "containers", "*", "*"))
		return len(files) == 0, fmt.Sprint(files)
	})
}
