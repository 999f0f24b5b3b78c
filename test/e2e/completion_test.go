package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const completionPod = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: setup
    image: localhost/busybox:test
    command: ["true"]
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "3600"]
  - name: side
    image: localhost/busybox:test
    command: ["sleep", "3600"]
`

// TestCompletion asks the shell completion cobra generates (its hidden
// __complete command) for pod and container names, from a running
// staticlet.
func TestCompletion(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("web.yaml", strings.ReplaceAll(completionPod, "NAME", "web"))
	e.Write("db.yaml", strings.ReplaceAll(completionPod, "NAME", "db"))
	for _, name := range []string{"web", "db"} {
		d.WaitPod(name+"-"+harness.TestNode, 30*time.Second, name+" listed", func(*v1.Pod) bool { return true })
	}
	complete := func(args ...string) []string {
		t.Helper()
		// The word being completed is last, and the socket must not
		// take the place of a flag's value: it goes after the first word.
		args = append([]string{"__complete", args[0], "--status-socket=" + d.Socket}, args[1:]...)
		out, err := exec.Command(harness.Binary(t), args...).Output()
		if err != nil {
			t.Fatalf("staticlet %s: %v", strings.Join(args, " "), err)
		}
		// The last line is cobra's directive (":4" and so on).
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[:len(lines)-1]
	}
	web, db := "web-"+harness.TestNode, "db-"+harness.TestNode
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"logs", ""}, []string{db, web}},
		{[]string{"logs", "w"}, []string{web}},
		{[]string{"logs", web, ""}, nil},
		{[]string{"logs", web, "-c", ""}, []string{"setup", "main", "side"}},
		{[]string{"logs", web, "-c", "s"}, []string{"setup", "side"}},
		{[]string{"describe", "pod", ""}, []string{db, web}},
		{[]string{"restart", "w"}, []string{web}},
		{[]string{"restart", web, "-c", "m"}, []string{"main"}},
		{[]string{"get", "pods", "d"}, []string{db}},
		{[]string{"top", "pods", "w"}, []string{web}},
		{[]string{"wait", "pod/" + web, ""}, []string{"pod/" + db}},
		{[]string{"logs", "-n", "kube-system", ""}, nil},
	} {
		if got := complete(tt.args...); !slices.Equal(got, tt.want) {
			t.Errorf("completing staticlet %s: %q, want %q", strings.Join(tt.args, " "), got, tt.want)
		}
	}
}
