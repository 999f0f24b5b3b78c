package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// apiFormsPod is written in forms the apiserver takes and staticlet once
// refused or ignored (test/apidiff found them): a relative mountPath, a
// whole float for a port, a quantity with a space, the deprecated
// serviceAccount, hostnameOverride. (An emptyDir of huge pages needs a
// hugetlb cgroup, which test machines lack; internal/sandbox's
// TestHugePagesEmptyDir mounts one.)
const apiFormsPod = `apiVersion: v1
kind: Pod
metadata:
  name: forms
spec:
  terminationGracePeriodSeconds: 2
  hostnameOverride: forms.example
  serviceAccount: web
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "echo hi > /var/scratch/hi; exec sleep 100000"]
    ports:
    - containerPort: 8080.0
    resources:
      limits: {cpu: " 100m", memory: 64Mi}
    volumeMounts:
    - {name: scratch, mountPath: var/scratch}
  volumes:
  - {name: scratch, emptyDir: {}}
`

// TestAPIServerForms runs apiFormsPod and checks that each form means
// what it means to the kubelet: the relative mountPath is mounted from /,
// the host name is hostnameOverride, serviceAccount fills
// serviceAccountName, the port is 8080.
func TestAPIServerForms(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("forms.yaml", apiFormsPod)
	p := d.WaitPod("forms-"+harness.TestNode, 30*time.Second, "forms running", harness.Running)
	pid := containerPid(t, e, p, "main")
	inRoot := func(path string) string { return fmt.Sprintf("/proc/%d/root%s", pid, path) }
	harness.WaitFor(t, 5*time.Second, "the file in the relative mount", func() (bool, string) {
		b, err := os.ReadFile(inRoot("/var/scratch/hi"))
		return err == nil && string(b) == "hi\n", fmt.Sprintf("%q, %v", b, err)
	})
	scratch := fmt.Sprintf("%s/pods/%s/volumes/empty-dir/scratch/hi", e.Root, p.UID)
	if b, err := os.ReadFile(scratch); err != nil || string(b) != "hi\n" {
		t.Errorf("%s on the host: %q, %v; want the container's file in its emptyDir", scratch, b, err)
	}
	if b, err := os.ReadFile(inRoot("/etc/hostname")); err != nil || string(b) != "forms.example\n" {
		t.Errorf("/etc/hostname = %q (%v), want hostnameOverride's forms.example", b, err)
	}
	if got := p.Spec.ServiceAccountName; got != "web" {
		t.Errorf("serviceAccountName = %q, want web (from serviceAccount)", got)
	}
	if got := p.Spec.Containers[0].Ports[0].ContainerPort; got != 8080 {
		t.Errorf("containerPort = %d, want 8080", got)
	}
}
