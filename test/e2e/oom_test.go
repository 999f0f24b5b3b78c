package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// oomPods go over a 64Mi memory limit: dd's 128M buffer is touched whole
// by its read of /dev/zero. In oom-child, dd is a child the kernel kills
// while the shell lives on and exits 3 of its own accord: the kubelet's
// reason is OOMKilled all the same. oom-restart is killed again and again.
const oomPods = `apiVersion: v1
kind: Pod
metadata:
  name: oom-app
spec:
  restartPolicy: Never
  containers:
  - name: hog
    image: localhost/busybox:test
    command: ["dd", "if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"]
    resources:
      limits: {memory: 64Mi}
---
apiVersion: v1
kind: Pod
metadata:
  name: oom-child
spec:
  restartPolicy: Never
  containers:
  - name: shell
    image: localhost/busybox:test
    command: ["sh", "-c", "dd if=/dev/zero of=/dev/null bs=128M count=1; exit 3"]
    resources:
      limits: {memory: 64Mi}
---
apiVersion: v1
kind: Pod
metadata:
  name: oom-init
spec:
  restartPolicy: Never
  initContainers:
  - name: hog
    image: localhost/busybox:test
    command: ["dd", "if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"]
    resources:
      limits: {memory: 64Mi}
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "100000"]
---
apiVersion: v1
kind: Pod
metadata:
  name: oom-restart
spec:
  containers:
  - name: hog
    image: localhost/busybox:test
    command: ["dd", "if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"]
    resources:
      limits: {memory: 64Mi}
`

// TestOOMKilled: containers killed by the kernel for going over their
// memory limit end with reason OOMKilled, as the kubelet reports them, in
// the pod's status, get pods, describe and a Warning event; a container
// that exits normally after an OOM kill inside it too. A restarted
// staticlet still says so, and tells no new event.
func TestOOMKilled(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("oom.yaml", oomPods)

	terminatedOOM := func(st v1.ContainerState, code int32) bool {
		return st.Terminated != nil && st.Terminated.Reason == "OOMKilled" && st.Terminated.ExitCode == code
	}
	check := func(d *harness.Daemon) {
		t.Helper()
		d.WaitPod("oom-app-"+harness.TestNode, 60*time.Second, "oom-app OOMKilled", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed && terminatedOOM(p.Status.ContainerStatuses[0].State, 137)
		})
		d.WaitPod("oom-child-"+harness.TestNode, 60*time.Second, "oom-child OOMKilled with exit 3", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed && terminatedOOM(p.Status.ContainerStatuses[0].State, 3)
		})
		d.WaitPod("oom-init-"+harness.TestNode, 60*time.Second, "oom-init's init container OOMKilled", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed && len(p.Status.InitContainerStatuses) == 1 &&
				terminatedOOM(p.Status.InitContainerStatuses[0].State, 137)
		})
		d.WaitPod("oom-restart-"+harness.TestNode, 60*time.Second, "oom-restart restarted after an OOM kill", func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses[0]
			return cs.RestartCount >= 1 && terminatedOOM(cs.LastTerminationState, 137)
		})

		out, err := d.CLI("get", "pods")
		if err != nil {
			t.Fatalf("get pods: %v\n%s", err, out)
		}
		for name, want := range map[string]string{"oom-app": "OOMKilled", "oom-child": "OOMKilled", "oom-init": "Init:OOMKilled"} {
			if !rowHas(out, name+"-"+harness.TestNode, want) {
				t.Errorf("get pods: the row of %s does not say %s:\n%s", name, want, out)
			}
		}
		out, err = d.CLI("describe", "pod", "oom-app-"+harness.TestNode)
		if err != nil || !strings.Contains(out, "OOMKilled") || !strings.Contains(out, "137") {
			t.Errorf("describe pod oom-app: want reason OOMKilled and exit code 137 (err %v):\n%s", err, out)
		}
	}
	check(d)
	for _, name := range []string{"oom-app", "oom-child", "oom-init"} {
		if evs := eventsOf(d, name+"-"+harness.TestNode, "OOMKilled"); len(evs) != 1 {
			t.Errorf("%s: %d OOMKilled events, want 1: %+v", name, len(evs), evs)
		}
	}
	if n := len(eventsOf(d, "oom-restart-"+harness.TestNode, "OOMKilled")); n < 1 {
		t.Errorf("oom-restart: no OOMKilled event")
	}

	// The reason lives in containerd's labels: a new staticlet knows it,
	// and tells of no kill it did not see happen.
	e.Write("oom.yaml", strings.Split(oomPods, "---\n")[0])
	d.WaitPod("oom-app-"+harness.TestNode, 60*time.Second, "oom-app kept alone", func(p *v1.Pod) bool {
		for _, name := range []string{"oom-child", "oom-init", "oom-restart"} {
			if _, err := d.Pod(name + "-" + harness.TestNode); err == nil {
				return false
			}
		}
		return true
	})
	d.Kill()
	d = e.Start()
	p := d.WaitPod("oom-app-"+harness.TestNode, 30*time.Second, "oom-app adopted", func(p *v1.Pod) bool {
		return terminatedOOM(p.Status.ContainerStatuses[0].State, 137)
	})
	if p.Status.Phase != v1.PodFailed {
		t.Errorf("adopted oom-app phase = %s, want Failed", p.Status.Phase)
	}
	if n := len(eventsOf(d, "oom-app-"+harness.TestNode, "OOMKilled")); n != 0 {
		t.Errorf("restarted staticlet told %d OOMKilled events of an old kill, want 0", n)
	}
}

// rowHas tells whether the table row of name in a get pods output has the
// column value want.
func rowHas(out, name, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == name {
			for _, v := range f[1:] {
				if v == want {
					return true
				}
			}
		}
	}
	return false
}
