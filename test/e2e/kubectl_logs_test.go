package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// countingPod writes four lines, the last after a pause, and exits 1, so
// that it restarts and has a previous log.
const countingPod = `apiVersion: v1
kind: Pod
metadata:
  name: counting
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "echo one; echo two; echo three; sleep 3; echo four; exit 1"]
`

// TestKubectlLogsAndEvents drives a real kubectl 1.30's logs (previous,
// tail, limit-bytes, since, follow), get events and describe pod against
// a container that restarts.
func TestKubectlLogsAndEvents(t *testing.T) {
	e := harness.NewEnv(t)
	d, _, kubeconfig := startWithAPI(t, e)
	k := kubectl{t: t, bin: kubetools.Kubectl(t), kubeconfig: kubeconfig}
	e.Write("counting.yaml", countingPod)
	counting := "counting-" + harness.TestNode
	d.WaitPod(counting, 90*time.Second, "counting restarted", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--previous"}, "one\ntwo\nthree\nfour\n"},
		{[]string{"--previous", "--tail=1"}, "four\n"},
		{[]string{"--previous", "--limit-bytes=6"}, "one\ntw"},
		{[]string{"--previous", "--since=1h", "--tail=2"}, "three\nfour\n"},
		{[]string{"--previous", "--since-time=2000-01-01T00:00:00Z", "--tail=1"}, "four\n"},
	} {
		out := k.must(append([]string{"logs", counting}, tt.args...)...)
		if out != tt.want {
			t.Errorf("kubectl logs %s = %q, want %q", strings.Join(tt.args, " "), out, tt.want)
		}
	}
	// -f reads until the container ends; retried, as the container may
	// be between two runs.
	harness.WaitFor(t, 60*time.Second, "kubectl logs -f to print a whole run", func() (bool, string) {
		out, err := k.run("logs", "-f", counting)
		return err == nil && strings.HasPrefix(out, "one\n"), out
	})
	if out, err := k.run("logs", counting, "-c", "nope"); err == nil || !strings.Contains(out, "container nope is not valid for pod "+counting) {
		t.Errorf("kubectl logs -c nope = %v:\n%s", err, out)
	}

	out := k.must("get", "events", "-o", "wide")
	if !strings.Contains(out, "LAST SEEN") || !strings.Contains(out, "pod/"+counting) ||
		!strings.Contains(out, "spec.containers{main}") || !strings.Contains(out, "kubelet, "+harness.TestNode) || !strings.Contains(out, "Started") {
		t.Errorf("kubectl get events -o wide:\n%s", out)
	}
	// staticlet get events sees the Events kubectl gets: the same names,
	// pods (by UID) and containers. Retried, as the counting goes on.
	const same = `jsonpath={.items[*].metadata.name} {.items[*].involvedObject.uid} {.items[*].involvedObject.fieldPath} {.items[*].source.host}`
	harness.WaitFor(t, 30*time.Second, "staticlet get events to show kubectl's Events", func() (bool, string) {
		api := k.must("get", "events", "-A", "-o", same)
		cli, err := d.CLI("get", "events", "-o", same)
		return err == nil && cli == api, fmt.Sprintf("kubectl: %s\nstaticlet: %s (%v)", api, cli, err)
	})
	out = k.must("describe", "pod", counting)
	events := out[strings.Index(out, "Events:"):]
	if !strings.Contains(events, "Started") || !strings.Contains(events, "kubelet") {
		t.Errorf("kubectl describe pod shows no events of the pod:\n%s", out)
	}
}
