package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// ephemeralPods: eph-writer writes 8 MiB into its writable layer under a
// 4Mi ephemeral-storage limit, again after each restart; eph-quiet, in the
// same pod file, writes 1 MiB under the same limit; eph-emptydir fills a
// disk emptyDir past its 2Mi sizeLimit, under restartPolicy Never;
// eph-critical is system-node-critical and over its limit.
const ephemeralPods = `apiVersion: v1
kind: Pod
metadata:
  name: eph-writer
spec:
  containers:
  - name: writer
    image: localhost/busybox:test
    command: ["sh", "-c", "dd if=/dev/zero of=/big bs=1M count=8 && sleep 100000"]
    resources:
      limits: {ephemeral-storage: 4Mi}
---
apiVersion: v1
kind: Pod
metadata:
  name: eph-quiet
spec:
  containers:
  - name: quiet
    image: localhost/busybox:test
    command: ["sh", "-c", "dd if=/dev/zero of=/small bs=1M count=1 && sleep 100000"]
    resources:
      limits: {ephemeral-storage: 4Mi}
---
apiVersion: v1
kind: Pod
metadata:
  name: eph-emptydir
spec:
  restartPolicy: Never
  containers:
  - name: filler
    image: localhost/busybox:test
    command: ["sh", "-c", "dd if=/dev/zero of=/scratch/big bs=1M count=4 && sleep 100000"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
  - name: idle
    image: localhost/busybox:test
    command: ["sleep", "100000"]
  volumes:
  - name: scratch
    emptyDir: {sizeLimit: 2Mi}
---
apiVersion: v1
kind: Pod
metadata:
  name: eph-critical
spec:
  priorityClassName: system-node-critical
  containers:
  - name: writer
    image: localhost/busybox:test
    command: ["sh", "-c", "dd if=/dev/zero of=/big bs=1M count=8 && sleep 100000"]
    resources:
      limits: {ephemeral-storage: 4Mi}
`

// TestEphemeralStorageLimits: a container writing past its
// ephemeral-storage limit is killed and restarted with the kubelet's
// reason (Evicted) and message, and a Warning event; a pod beside it is
// untouched. A disk emptyDir over its sizeLimit gets the containers that
// mount it killed with the kubelet's message, under restartPolicy Never
// for good, while the pod's other container runs on. A critical pod is
// never killed: it gets an event.
func TestEphemeralStorageLimits(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("eph.yaml", ephemeralPods)

	quietName := "eph-quiet-" + harness.TestNode
	quiet := d.WaitPod(quietName, 60*time.Second, "eph-quiet running", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	quietID := quiet.Status.ContainerStatuses[0].ContainerID

	evicted := func(st v1.ContainerState, msg string) bool {
		return st.Terminated != nil && st.Terminated.Reason == "Evicted" && st.Terminated.Message == msg &&
			st.Terminated.ExitCode == 137
	}
	// The kubelet checks the pod's total first: with one container, its limit.
	writerMsg := "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
	harness.WaitFor(t, 90*time.Second, "eph-writer restarted after its eviction", func() (bool, string) {
		p, err := d.Pod("eph-writer-" + harness.TestNode)
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprint(err)
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= 1 && evicted(cs.LastTerminationState, writerMsg), fmt.Sprintf("%+v", cs)
	})
	if evs := eventsOf(d, "eph-writer-"+harness.TestNode, "Evicted"); len(evs) == 0 || evs[0].Type != "Warning" ||
		!strings.HasPrefix(evs[0].Message, writerMsg) || evs[0].Container != "writer" {
		t.Errorf("eph-writer: want a Warning event Evicted for container writer with %q, got %+v", writerMsg, evs)
	}

	edMsg := `Usage of EmptyDir volume "scratch" exceeds the limit "2Mi". `
	d.WaitPod("eph-emptydir-"+harness.TestNode, 90*time.Second, "eph-emptydir's filler evicted", func(p *v1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "filler" && evicted(cs.State, edMsg) {
				return true
			}
		}
		return false
	})
	p, err := d.Pod("eph-emptydir-" + harness.TestNode)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "idle" && (cs.State.Running == nil || cs.RestartCount != 0) {
			t.Errorf("eph-emptydir: container idle, which does not mount the volume, was touched: %+v", cs)
		}
		if cs.Name == "filler" && cs.RestartCount != 0 {
			t.Errorf("eph-emptydir: filler restarted under restartPolicy Never: %+v", cs)
		}
	}

	critName := "eph-critical-" + harness.TestNode
	harness.WaitFor(t, 60*time.Second, "an EvictionSkipped event for eph-critical", func() (bool, string) {
		evs := eventsOf(d, critName, "EvictionSkipped")
		return len(evs) > 0, ""
	})
	crit, err := d.Pod(critName)
	if err != nil {
		t.Fatal(err)
	}
	if cs := crit.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		t.Errorf("eph-critical: the critical pod's container was touched: %+v", cs)
	}

	quiet, err = d.Pod(quietName)
	if err != nil {
		t.Fatal(err)
	}
	if cs := quiet.Status.ContainerStatuses[0]; cs.ContainerID != quietID || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("eph-quiet was touched: %+v, want %s running, no restart", cs, quietID)
	}
	if evs := eventsOf(d, quietName, "Evicted"); len(evs) != 0 {
		t.Errorf("eph-quiet: Evicted events %+v, want none", evs)
	}
}
