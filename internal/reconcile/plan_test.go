package reconcile

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

const sec = time.Second

// TestPlanStart covers a pod's first pass, and passes that find it
// running or half started.
func TestPlanStart(t *testing.T) {
	p := withUID(mkPod(t, podSpec{apps: []string{"a", "b"}}), "1")
	sb := freshSb(p, "sb1", 0)
	a, b := startedAt(ctr(p, "sb1", "a", "a-1", 0), 0), startedAt(ctr(p, "sb1", "b", "b-1", 0), 0)
	shared := withUID(mkPod(t, podSpec{sharePID: true}), "1")
	ssb := freshSb(shared, "sb1", 0)
	sa := startedAt(ctr(shared, "sb1", "app", "app-1", 0), 0)
	run := sbRec(p, "sb1")
	runA, runB := ctr(p, "sb1", "a", "a-1", 0), ctr(p, "sb1", "b", "b-1", 0)
	half := halfStarted(runA)
	runScenarios(t, []scenario{{
		name: "fresh pod: containers in spec order, then the pause",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(sb), lines("check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.36" already present on machine`, "start app/a#0 in sb1")},
			{startOK(a), lines("event Normal Started a: Started container a (a-1)", "check-image b")},
			{checked(false), lines(`event Normal Pulled b: Container image "busybox:1.36" already present on machine`, "start app/b#0 in sb1")},
			{startOK(b), lines("event Normal Started b: Started container b (b-1)", "start-sandbox sb1")},
			{sbStarted(upSb(sb, 0)), lines("list")},
			{ls(upSb(sb, 0), a, b), lines("probe", "report Running a=running b=running", "finish")},
		},
	}, {
		name: "fresh pod sharing its PID namespace: the pause first",
		pod:  shared,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(ssb), lines("start-sandbox sb1")},
			{sbStarted(upSb(ssb, 0)), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(sa), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(upSb(ssb, 0), sa), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "a running pod is adopted as it is",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(run, runA, runB), lines("list")},
			{ls(run, runA, runB), lines("probe", "report Running a=running b=running", "finish")},
			{beginAt(10 * sec), lines("list")},
			{ls(run, runA, runB), lines("list")},
			{ls(run, runA, runB), lines("probe", "report Running a=running b=running", "finish")},
		},
	}, {
		name: "a half-started container is resumed",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(run, half, runB), lines("resume a-1")},
			{resumeOK(startedAt(runA, 0)), lines("event Normal Started a: Started container a (a-1)", "list")},
			{ls(run, startedAt(runA, 0), runB), lines("probe", "report Running a=running b=running", "finish")},
		},
	}, {
		name: "a half-started container that cannot be resumed is removed and started anew",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(run, half, runB), lines("resume a-1")},
			{resumeFailed(errors.New("task gone")), lines("remove a-1")},
			{removeOK(), lines("check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.36" already present on machine`, "start app/a#0 in sb1")},
			{startOK(startedAt(ctr(p, "sb1", "a", "a-2", 0), 0)), lines("event Normal Started a: Started container a (a-2)", "list")},
			{ls(run, startedAt(ctr(p, "sb1", "a", "a-2", 0), 0), runB), lines("probe", "report Running a=running b=running", "finish")},
		},
	}})
}

// TestPlanRestart covers what follows a container's exit under each
// restart policy.
func TestPlanRestart(t *testing.T) {
	p := withUID(mkPod(t, podSpec{}), "1")
	sb := sbRec(p, "sb1")
	app := func(id string, attempt int) pod.Record { return ctr(p, "sb1", "app", id, attempt) }
	a1 := exitAt(app("app-1", 0), 1, 0)
	a2 := startedAt(app("app-2", 1), 0)
	a2x := exitAt(a2, 1, 5*sec)
	a3 := startedAt(app("app-3", 2), 6*sec)
	a3x := exitAt(a3, 1, 7*sec)
	a4 := startedAt(app("app-4", 3), 9*sec)

	onf := withUID(mkPod(t, podSpec{policy: v1.RestartPolicyOnFailure}), "1")
	osb := sbRec(onf, "sb1")
	o1 := exitAt(ctr(onf, "sb1", "app", "app-1", 0), 0, 0)
	osbDown := exitAt(osb, 0, sec)

	never := withUID(mkPod(t, podSpec{policy: v1.RestartPolicyNever, apps: []string{"a", "b"}}), "1")
	nsb := sbRec(never, "sb1")
	na := exitAt(ctr(never, "sb1", "a", "a-1", 0), 1, 0)
	nb := ctr(never, "sb1", "b", "b-1", 0)
	runScenarios(t, []scenario{{
		name: "Always: restarted at once, then in CrashLoopBackOff, the backoff doubling",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb, a1), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#1 in sb1")},
			{startOK(a2), lines("event Normal Started app: Started container app (app-2)", "list")},
			{ls(sb, a2, a1), lines("probe", "report Running app=running#1", "finish")},
			// It exits 5s later: 1s to wait.
			{beginAt(5 * sec), lines("list")},
			{ls(sb, a2x, a1), lines("event Warning BackOff app: Back-off restarting failed container app in pod web-n", "list")},
			{ls(sb, a2x, a1), lines("probe", "report Running app=CrashLoopBackOff#1", "finish again=1s")},
			{beginAt(6 * sec), lines("list")},
			{ls(sb, a2x, a1), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#2 in sb1")},
			{startOK(a3), lines("event Normal Started app: Started container app (app-3)", "list")},
			{ls(sb, a3, a2x, a1), lines("probe", "report Running app=running#2", "finish")},
			// Then 2s; the oldest record goes.
			{beginAt(7 * sec), lines("list")},
			{ls(sb, a3x, a2x, a1), lines("event Warning BackOff app: Back-off restarting failed container app in pod web-n", "stop+remove app-1 30s")},
			{stopOK(), lines("list")},
			{ls(sb, a3x, a2x), lines("probe", "report Running app=CrashLoopBackOff#2", "finish again=2s")},
			{beginAt(9 * sec), lines("list")},
			{ls(sb, a3x, a2x), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#3 in sb1")},
			{startOK(a4), lines("event Normal Started app: Started container app (app-4)", "list")},
			{ls(sb, a4, a3x, a2x), lines("probe", "report Running app=running#3", "finish")},
		},
	}, {
		name: "OnFailure: exit 0 ends the pod, its sandbox stopped once",
		pod:  onf,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(osb, o1), lines("stop sb1 2s")},
			{stopOK(), lines("list")},
			{ls(osbDown, o1), lines("probe", "report Succeeded app=Completed(0)", "finish")},
			{beginAt(10 * sec), lines("list")},
			{ls(osbDown, o1), lines("list")},
			{ls(osbDown, o1), lines("probe", "report Succeeded app=Completed(0)", "finish")},
		},
	}, {
		name: "Never: an exited container is not started again, nor after its sandbox died",
		pod:  never,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(nsb, na, nb), lines("list")},
			{ls(nsb, na, nb), lines("probe", "report Running a=Error(1) b=running", "finish")},
			{beginAt(10 * sec), lines("list")},
			{ls(nsb, na, nb), lines("list")},
			{ls(nsb, na, nb), lines("probe", "report Running a=Error(1) b=running", "finish")},
			// The pause exits: the pod is done; what runs is stopped.
			{beginAt(20 * sec), lines("list")},
			{ls(exitAt(nsb, 2, 15*sec), na, nb), lines("event Normal Killing b: Stopping container b", "stop b-1 30s")},
			{stopOK(), lines("stop sb1 2s")},
			{stopOK(), lines("list")},
			{ls(exitAt(nsb, 2, 15*sec), na, exitAt(nb, 143, 20*sec)), lines("probe", "report Failed a=Error(1) b=Error(143)", "finish")},
			{beginAt(30 * sec), lines("list")},
			{ls(exitAt(nsb, 2, 15*sec), na, exitAt(nb, 143, 20*sec)), lines("list")},
			{ls(exitAt(nsb, 2, 15*sec), na, exitAt(nb, 143, 20*sec)), lines("probe", "report Failed a=Error(1) b=Error(143)", "finish")},
		},
	}})
}
