package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const twoContainers = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  shareProcessNamespace: SHARE
  containers:
  - name: a
    image: localhost/busybox:test
    command: ["sh", "-c", "hostname; exec sleep 100000"]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: GREETING
      value: "hello $(POD_NAME)"
  - name: b
    image: localhost/busybox:test
    command: ["sleep", "100001"]
`

// TestPodNamespaces checks which namespaces a pod's containers share: the
// network, IPC and UTS namespaces always, with the pod's host name; the PID
// namespace only with shareProcessNamespace.
func TestPodNamespaces(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	for _, share := range []bool{false, true} {
		name := fmt.Sprintf("share-%v", share)
		e.Write(name+".yaml", strings.NewReplacer("NAME", name, "SHARE", fmt.Sprint(share)).Replace(twoContainers))
		p := d.WaitPod(name+"-"+harness.TestNode, 30*time.Second, name+" running", harness.Running)
		pidA, errA := e.PidOf(p.Status.ContainerStatuses[0])
		pidB, errB := e.PidOf(p.Status.ContainerStatuses[1])
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		ns := func(pid int, kind string) string {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
			return l
		}
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pidA))
		if want := "GREETING=hello " + name + "-" + harness.TestNode + "\x00"; !strings.Contains(string(environ), want) {
			t.Errorf("%s: environment %q lacks %q", name, environ, want)
		}
		for _, kind := range []string{"net", "ipc", "uts"} {
			if ns(pidA, kind) != ns(pidB, kind) || ns(pidA, kind) == ns(1, kind) {
				t.Errorf("%s: %s namespaces %s and %s, want one of the pod's own", name, kind, ns(pidA, kind), ns(pidB, kind))
			}
		}
		if samePID := ns(pidA, "pid") == ns(pidB, "pid"); samePID != share {
			t.Errorf("%s: containers share a PID namespace: %v, want %v", name, samePID, share)
		}
		logs, _ := filepath.Glob(filepath.Join(e.Logs, "default_"+name+"-"+harness.TestNode+"_*", "a", "0.log"))
		harness.WaitFor(t, 5*time.Second, "host name in the log", func() (bool, string) {
			if len(logs) == 0 {
				logs, _ = filepath.Glob(filepath.Join(e.Logs, "default_"+name+"-"+harness.TestNode+"_*", "a", "0.log"))
				return false, "no log file"
			}
			b, _ := os.ReadFile(logs[0])
			return strings.Contains(string(b), name+"-"+harness.TestNode), string(b)
		})
	}
}
