package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// freed tells the core devices of kinds were given back; it says
// "woke" when a container of the pod waited for them.
type freed []string

func (f freed) feed(pl *player) []string {
	if pl.c.devicesFreed(f) {
		return []string{"woke"}
	}
	return nil
}

func TestPlanDevices(t *testing.T) {
	pods, err := pod.Decode("gpu.yaml", []byte(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kube-system}
spec:
  containers:
  - name: app
    image: busybox:1.36
    resources:
      limits: {example.test/dev: 1}
`), pod.Options{NodeName: "node1", Seen: t0})
	if err != nil {
		t.Fatal(err)
	}
	p := withUID(pods[0], "1")
	sb := sbRec(p, "sb1")
	a1 := startedAt(ctr(p, "sb1", "app", "app-1", 0), 500*time.Millisecond)
	none := &pod.WaitingError{Reason: "InsufficientDevices", Err: errors.New("0 of 2 example.test/dev devices are free; 1 asked")}
	runScenarios(t, []scenario{{
		name: "no device free: InsufficientDevices; one freed starts the container at once",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#0 in sb1")},
			{startFailed(none), lines("event Warning Failed app: 0 of 2 example.test/dev devices are free; 1 asked", "list")},
			{ls(sb), lines("probe", "report Pending app=InsufficientDevices", "finish again=1s")},
			// Devices of another kind freed wake nothing.
			{freed{"vendor.test/cam"}, lines()},
			{freed{"example.test/dev"}, lines("woke")},
			{beginAt(500 * time.Millisecond), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#0 in sb1")},
			{startOK(a1), lines("event Normal Started app: Started container app (app-1)", "list")},
		},
	}})
}
