package reconcile

import (
	"errors"
	"slices"
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
		turns: slices.Concat(adopt("report Running a=running b=running", run, runA, runB), []turn{
			{beginAt(10 * sec), lines("list")},
			{ls(run, runA, runB), lines("list")},
			{ls(run, runA, runB), lines("probe", "report Running a=running b=running", "finish")},
		}),
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

	kp := withUID(mkPod(t, podSpec{}), "1")
	ksb, ka1 := sbRec(kp, "sb1"), ctr(kp, "sb1", "app", "app-1", 0)
	kx := exitAt(ka1, 137, 0)
	kx.OOMKilled = true
	ka2 := startedAt(ctr(kp, "sb1", "app", "app-2", 1), 0)
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
		turns: slices.Concat(adopt("report Running a=Error(1) b=running", nsb, na, nb), []turn{
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
		}),
	}, {
		name: "OOM-killed: told in an event once",
		pod:  kp,
		turns: slices.Concat(adopt("report Running app=running", ksb, ka1), []turn{
			{beginAt(sec), lines("list")},
			{ls(ksb, kx), lines("event Warning OOMKilled app: Container app was killed by the kernel's OOM killer: it ran out of memory (exit code 137)", "check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#1 in sb1")},
			{startOK(ka2), lines("event Normal Started app: Started container app (app-2)", "list")},
			{ls(ksb, ka2, kx), lines("probe", "report Running app=running#1", "finish")},
			{beginAt(2 * sec), lines("list")},
			{ls(ksb, ka2, kx), lines("list")},
			{ls(ksb, ka2, kx), lines("probe", "report Running app=running#1", "finish")},
		}),
	}, {
		name: "OOM-killed: a kill the report's listing finds is told before the status, once",
		pod:  kp,
		turns: slices.Concat(adopt("report Running app=running", ksb, ka1), []turn{
			{beginAt(sec), lines("list")},
			{ls(ksb, ka1), lines("list")},
			{ls(ksb, kx), lines("event Warning OOMKilled app: Container app was killed by the kernel's OOM killer: it ran out of memory (exit code 137)", "probe", "report Running app=OOMKilled(137)", "finish")},
			{beginAt(2 * sec), lines("list")},
			{ls(ksb, kx), lines("check-image app")},
		}),
	}})
}

// TestPlanChange covers new specs: of one container, of the pod.
func TestPlanChange(t *testing.T) {
	p := withUID(hookPod(t, 30, "busybox:1.36", nil, [][2]string{{"a", preStopExec}, {"b", ""}}), "1")
	p2 := withUID(hookPod(t, 30, "busybox:1.36", nil, [][2]string{{"a", preStopExec}, {"b", ""}}), "2")
	p2.Spec.Containers[0].Image = "busybox:1.37"
	sb := sbRec(p, "sb1")
	a1, b1 := ctr(p, "sb1", "a", "a-1", 0), ctr(p, "sb1", "b", "b-1", 0)
	a2 := startedAt(ctr(p2, "sb1", "a", "a-2", 1), 10*sec)
	b1x := exitAt(b1, 1, 10*sec)
	b2 := startedAt(ctr(p2, "sb1", "b", "b-2", 1), 11*sec)

	q := withUID(mkPod(t, podSpec{}), "1")
	q2 := withUID(mkPod(t, podSpec{label: "2"}), "2")
	qsb, qa := sbRec(q, "sb1"), ctr(q, "sb1", "app", "app-1", 0)
	qsb2 := freshSb(q2, "sb2", 10*sec)
	qa2 := startedAt(ctr(q2, "sb2", "app", "app-2", 0), 10*sec)

	r := withUID(mkPod(t, podSpec{apps: []string{"a", "b"}}), "1")
	r2 := withUID(mkPod(t, podSpec{apps: []string{"a", "c"}}), "2")
	rsb, ra1, rb1 := sbRec(r, "sb1"), ctr(r, "sb1", "a", "a-1", 0), ctr(r, "sb1", "b", "b-1", 0)
	rc1 := startedAt(ctr(r2, "sb1", "c", "c-1", 0), 0)
	runScenarios(t, []scenario{{
		name: "container spec change: stopped after its preStop hook, removed, started; an exit meanwhile is seen at the next pass",
		pod:  p,
		turns: slices.Concat(adopt("report Running a=running b=running", sb, a1, b1), []turn{
			{desire{p2}, lines()},
			{beginAt(10 * sec), lines("list")},
			{ls(sb, a1, b1), lines("event Normal Killing a: Container a definition changed, will be restarted", "stop a-1 30s preStop")},
			{stopOK(), lines("remove a-1")},
			{removeOK(), lines("check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.37" already present on machine`, "start app/a#1 in sb1")},
			{startOK(a2), lines("event Normal Started a: Started container a (a-2)", "list")},
			// b exited while a was replaced: the pass does not look again.
			{ls(sb, a2, b1x), lines("probe", "report Running a=running#1 b=Error(1)", "finish")},
			{beginAt(11 * sec), lines("list")},
			{ls(sb, a2, b1x), lines("check-image b")},
			{checked(false), lines(`event Normal Pulled b: Container image "busybox:1.36" already present on machine`, "start app/b#1 in sb1")},
			{startOK(b2), lines("event Normal Started b: Started container b (b-2)", "list")},
			{ls(sb, a2, b2, b1x), lines("probe", "report Running a=running#1 b=running#1", "finish")},
		}),
	}, {
		name: "pod-level change: the old pod stopped and removed with its files, a new sandbox",
		pod:  q,
		turns: slices.Concat(adopt("report Running app=running", qsb, qa), []turn{
			{desire{q2}, lines()},
			{beginAt(10 * sec), lines("list")},
			{ls(qsb, qa), lines("event Normal Killing app: Stopping container app", "stop+remove sb1 2s, app-1 30s")},
			{stopOK(), lines("remove-files uid1")},
			{filesOK("uid1"), lines("create-sandbox uid2")},
			{made(qsb2), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb2")},
			{startOK(qa2), lines("event Normal Started app: Started container app (app-2)", "start-sandbox sb2")},
			{sbStarted(upSb(qsb2, 10*sec)), lines("list")},
			{ls(upSb(qsb2, 10*sec), qa2), lines("probe", "report Running app=running", "finish")},
		}),
	}, {
		name: "pod-level change: the old pod's files not removed: the pass fails; the next makes the new sandbox, leaving the files to the sweep",
		pod:  q,
		turns: slices.Concat(adopt("report Running app=running", qsb, qa), []turn{
			{desire{q2}, lines()},
			{beginAt(10 * sec), lines("list")},
			{ls(qsb, qa), lines("event Normal Killing app: Stopping container app", "stop+remove sb1 2s, app-1 30s")},
			{stopOK(), lines("remove-files uid1")},
			{filesFailed("uid1", errors.New("device busy")), lines("finish err=removing the files of replaced pod kube-system/web-n: device busy")},
			{beginAt(11 * sec), lines("list")},
			{ls(), lines("create-sandbox uid2")},
			{made(qsb2), lines("check-image app")},
		}),
	}, {
		name: "a container added, one removed: the new one started, the old one stopped and removed",
		pod:  r,
		turns: slices.Concat(adopt("report Running a=running b=running", rsb, ra1, rb1), []turn{
			{desire{r2}, lines()},
			{beginAt(sec), lines("list")},
			{ls(rsb, ra1, rb1), lines("check-image c")},
			{checked(false), lines(`event Normal Pulled c: Container image "busybox:1.36" already present on machine`, "start app/c#0 in sb1")},
			{startOK(rc1), lines("event Normal Started c: Started container c (c-1)", "event Normal Killing b: Stopping container b", "stop+remove b-1 30s")},
			{stopOK(), lines("list")},
			{ls(rsb, ra1, rc1), lines("probe", "report Running a=running c=running", "finish")},
		}),
	}})
}

// TestPlanInit covers init containers and sidecars.
func TestPlanInit(t *testing.T) {
	p := withUID(mkPod(t, podSpec{inits: []string{"i1", "i2"}}), "1")
	sb := freshSb(p, "sb1", 0)
	up := upSb(sb, 0)
	i1 := startedAt(ctr(p, "sb1", "i1", "i1-1", 0), 0)
	i1x := exitAt(i1, 0, 5*sec)
	i2 := startedAt(ctr(p, "sb1", "i2", "i2-1", 0), 5*sec)
	i2x := exitAt(i2, 0, 10*sec)
	a := startedAt(ctr(p, "sb1", "app", "app-1", 0), 10*sec)

	np := withUID(mkPod(t, podSpec{policy: v1.RestartPolicyNever, inits: []string{"i1"}}), "1")
	nsb := sbRec(np, "sb1")
	ni1x := exitAt(ctr(np, "sb1", "i1", "i1-1", 0), 1, 0)

	ap := withUID(mkPod(t, podSpec{inits: []string{"i1"}}), "1")
	asb := sbRec(ap, "sb1")
	ai1x := exitAt(ctr(ap, "sb1", "i1", "i1-1", 0), 1, 0)
	ai2 := startedAt(ctr(ap, "sb1", "i1", "i1-2", 1), 0)

	sp := withUID(mkPod(t, podSpec{inits: []string{"s"}, sidecars: map[string]bool{"s": true}, apps: []string{"a", "b"}}), "1")
	ssb := freshSb(sp, "sb1", 0)
	ss := startedAt(ctr(sp, "sb1", "s", "s-1", 0), 0)
	sa := startedAt(ctr(sp, "sb1", "a", "a-1", 0), 0)
	sbb := startedAt(ctr(sp, "sb1", "b", "b-1", 0), 0)

	pp := withUID(decodePod(t, `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kube-system}
spec:
  initContainers:
  - name: s
    image: busybox:1.36
    restartPolicy: Always
    startupProbe:
      exec: {command: [cat, /ok]}
  containers:
  - name: app
    image: busybox:1.36
`), "1")
	psb, ps1 := freshSb(pp, "sb1", 0), startedAt(ctr(pp, "sb1", "s", "s-1", 0), 0)

	dp := withUID(mkPod(t, podSpec{policy: v1.RestartPolicyOnFailure, inits: []string{"s"}, sidecars: map[string]bool{"s": true}}), "1")
	dsb, ds1 := sbRec(dp, "sb1"), ctr(dp, "sb1", "s", "s-1", 0)
	da1x := exitAt(ctr(dp, "sb1", "app", "app-1", 0), 0, 0)
	// The waiting reason of a container not yet started in a pod with
	// init containers is left out of the reports: the kubelet's is
	// PodInitializing, buildPod's ContainerCreating.
	runScenarios(t, []scenario{{
		name: "init containers one at a time, then the app",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(sb), lines("check-image i1")},
			{checked(false), lines(`event Normal Pulled i1: Container image "busybox:1.36" already present on machine`, "start init/i1#0 in sb1")},
			{startOK(i1), lines("event Normal Started i1: Started container i1 (i1-1)", "start-sandbox sb1")},
			{sbStarted(up), lines("list")},
			{ls(up, i1), lines("probe", "report Pending i1=running...", "finish")},
			{beginAt(5 * sec), lines("list")},
			{ls(up, i1x), lines("check-image i2")},
			{checked(false), lines(`event Normal Pulled i2: Container image "busybox:1.36" already present on machine`, "start init/i2#0 in sb1")},
			{startOK(i2), lines("event Normal Started i2: Started container i2 (i2-1)", "list")},
			{ls(up, i1x, i2), lines("probe", "report Pending i1=Completed(0) i2=running...", "finish")},
			{beginAt(10 * sec), lines("list")},
			{ls(up, i1x, i2x), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(a), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(up, i1x, i2x, a), lines("probe", "report Running i1=Completed(0) i2=Completed(0) app=running", "finish")},
		},
	}, {
		name: "an init container failed under Never: the pod is done, its sandbox stopped",
		pod:  np,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(nsb, ni1x), lines("stop sb1 2s")},
			{stopOK(), lines("list")},
			{ls(exitAt(nsb, 0, sec), ni1x), lines("probe", "report Failed i1=Error(1)...", "finish")},
			{beginAt(10 * sec), lines("list")},
			{ls(exitAt(nsb, 0, sec), ni1x), lines("list")},
			{ls(exitAt(nsb, 0, sec), ni1x), lines("probe", "report Failed i1=Error(1)...", "finish")},
		},
	}, {
		name: "an init container failed under Always: run again",
		pod:  ap,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(asb, ai1x), lines("check-image i1")},
			{checked(false), lines(`event Normal Pulled i1: Container image "busybox:1.36" already present on machine`, "start init/i1#1 in sb1")},
			{startOK(ai2), lines("event Normal Started i1: Started container i1 (i1-2)", "list")},
			{ls(asb, ai2, ai1x), lines("probe", "report Pending i1=running#1...", "finish")},
		},
	}, {
		name: "a sidecar started, then the app containers in the same pass",
		pod:  sp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(ssb), lines("check-image s")},
			{checked(false), lines(`event Normal Pulled s: Container image "busybox:1.36" already present on machine`, "start init/s#0 in sb1")},
			{startOK(ss), lines("event Normal Started s: Started container s (s-1)", "check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.36" already present on machine`, "start app/a#0 in sb1")},
			{startOK(sa), lines("event Normal Started a: Started container a (a-1)", "check-image b")},
			{checked(false), lines(`event Normal Pulled b: Container image "busybox:1.36" already present on machine`, "start app/b#0 in sb1")},
			{startOK(sbb), lines("event Normal Started b: Started container b (b-1)", "start-sandbox sb1")},
			{sbStarted(upSb(ssb, 0)), lines("list")},
			{ls(upSb(ssb, 0), ss, sa, sbb), lines("probe", "report Running s=running a=running b=running", "finish")},
		},
	}, {
		name: "a sidecar with a startup probe holds back the app until it has started",
		pod:  pp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(psb), lines("check-image s")},
			{checked(false), lines(`event Normal Pulled s: Container image "busybox:1.36" already present on machine`, "start init/s#0 in sb1")},
			{startOK(ps1), lines("event Normal Started s: Started container s (s-1)", "start-sandbox sb1")},
			{sbStarted(upSb(psb, 0)), lines("list")},
			{ls(upSb(psb, 0), ps1), lines("probe s", "report Pending s=running...", "finish")},
			// The startup probe succeeds: the next look starts the app.
			{verdict{"s-1", pod.Startup, pod.ProbeSuccess}, lines("changed")},
			{beginAt(sec), lines("list")},
			{ls(upSb(psb, 0), ps1), lines("check-image app")},
		},
	}, {
		name: "the pod done: its sidecar stopped, then its sandbox",
		pod:  dp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(dsb, ds1, da1x), lines("event Normal Killing s: Stopping container s", "stop s-1 30s")},
			{stopOK(), lines("stop sb1 2s")},
			{stopOK(), lines("list")},
			{ls(exitAt(dsb, 0, 0), exitAt(ds1, 143, 0), da1x), lines("probe", "report Succeeded s=Error(143) app=Completed(0)", "finish")},
		},
	}})
}

// TestPlanStartFailure covers starts that fail, and images to pull.
func TestPlanStartFailure(t *testing.T) {
	p := withUID(mkPod(t, podSpec{}), "1")
	sb := sbRec(p, "sb1")
	a := func(at time.Duration) pod.Record { return startedAt(ctr(p, "sb1", "app", "app-1", 0), at) }
	pullErr := &pod.WaitingError{Reason: "ErrImagePull", Err: errors.New(`pulling image "busybox:1.36": not found`)}
	neverPull := &pod.WaitingError{Reason: "ErrImageNeverPull", Err: errors.New(`container image "busybox:1.36" is not present with pull policy of Never`)}
	runScenarios(t, []scenario{{
		name: "a start fails: Failed event, then retried after a backoff",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startFailed(errors.New("exec: no such file")), lines("event Warning Failed app: exec: no such file", "list")},
			{ls(sb), lines("probe", "report Pending app=CreateContainerError", "finish again=1s")},
			// A look before the backoff is over starts nothing.
			{beginAt(500 * time.Millisecond), lines("list")},
			{ls(sb), lines("list")},
			{ls(sb), lines("probe", "report Pending app=CreateContainerError", "finish again=500ms")},
			{beginAt(sec), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startFailed(errors.New("exec: no such file")), lines("list")},
			{ls(sb), lines("probe", "report Pending app=CreateContainerError", "finish again=2s")},
			{beginAt(3 * sec), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(a(3 * sec)), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(sb, a(3*sec)), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "a pull fails twice: ImagePullBackOff; the image arrives: started at once",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(true), lines("list")},
			{ls(sb), lines("probe", "report Pending app=ContainerCreating", `event Normal Pulling app: Pulling image "busybox:1.36"`, "pull app")},
			{pullFailed(false, pullErr), lines(`event Warning Failed app: pulling image "busybox:1.36": not found`, "list")},
			{ls(sb), lines("probe", "report Pending app=ErrImagePull", "finish again=1s")},
			{beginAt(sec), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(true), lines("list")},
			{ls(sb), lines("probe", "report Pending app=ContainerCreating", `event Normal Pulling app: Pulling image "busybox:1.36"`, "pull app")},
			{pullFailed(false, pullErr), lines(`event Warning Failed app: pulling image "busybox:1.36": not found`, `event Normal BackOff app: Back-off pulling image "busybox:1.36"`, "list")},
			{ls(sb), lines("probe", "report Pending app=ImagePullBackOff", "finish again=2s")},
			{arrive{pod.ImageName("busybox:1.36")}, lines()},
			{beginAt(1500 * time.Millisecond), lines("note image arrived; starting the container without waiting out its backoff", "list")},
			{ls(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(a(1500 * time.Millisecond)), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(sb, a(1500*time.Millisecond)), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "an image to pull: ContainerCreating, Pulling, Pulled, started",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(true), lines("list")},
			{ls(sb), lines("probe", "report Pending app=ContainerCreating", `event Normal Pulling app: Pulling image "busybox:1.36"`, "pull app")},
			{pullOK(3 * sec), lines(`event Normal Pulled app: Successfully pulled image "busybox:1.36" in 3s`, "start app/app#0 in sb1")},
			{startOK(a(3 * sec)), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(sb, a(3*sec)), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "an image taken from another containerd namespace: no pull, and the event says where from",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{give{o: imageChecked{from: "k8s.io"}}, lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine (taken from containerd namespace "k8s.io", no pull)`, "start app/app#0 in sb1")},
			{startOK(a(0)), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(sb, a(0)), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "a pull fails with the image present: a warning, and the image is used",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(true), lines("list")},
			{ls(sb), lines("probe", "report Pending app=ContainerCreating", `event Normal Pulling app: Pulling image "busybox:1.36"`, "pull app")},
			{pullFailed(true, errors.New("registry unreachable")), lines("event Warning Failed app: registry unreachable; using the image already present", "warn pull failed; using the image already present", "start app/app#0 in sb1")},
			{startOK(a(0)), lines("event Normal Started app: Started container app (app-1)", "list")},
			{ls(sb, a(0)), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "a new spec for a container waiting out a failed pull is tried at once",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{checked(true), lines("list")},
			{ls(sb), lines("probe", "report Pending app=ContainerCreating", `event Normal Pulling app: Pulling image "busybox:1.36"`, "pull app")},
			{pullFailed(false, pullErr), lines(`event Warning Failed app: pulling image "busybox:1.36": not found`, "list")},
			{ls(sb), lines("probe", "report Pending app=ErrImagePull", "finish again=1s")},
			{desire{withUID(mkPod(t, podSpec{image: "busybox:1.37"}), "2")}, lines()},
			{beginAt(500 * time.Millisecond), lines("list")},
			{ls(sb), lines("check-image app")},
		},
	}, {
		name: "an image not present under pull policy Never: ErrImageNeverPull",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb), lines("check-image app")},
			{give{o: imageChecked{err: neverPull}}, lines(`event Warning Failed app: container image "busybox:1.36" is not present with pull policy of Never`, "list")},
			{ls(sb), lines("probe", "report Pending app=ErrImageNeverPull", "finish again=1s")},
		},
	}})
}

// TestPlanHooks covers postStart hooks that fail or become pointless.
func TestPlanHooks(t *testing.T) {
	p := withUID(hookPod(t, 30, "busybox:1.36", nil, [][2]string{{"a", postStartExec}}), "1")
	p2 := withUID(hookPod(t, 30, "busybox:1.37", nil, [][2]string{{"a", postStartExec}}), "2")
	sb := sbRec(p, "sb1")
	a1 := startedAt(ctr(p, "sb1", "a", "a-1", 0), 0)
	a1x := exitAt(a1, 137, 0)
	a2 := startedAt(ctr(p, "sb1", "a", "a-2", 1), time.Millisecond)
	n2 := startedAt(ctr(p2, "sb1", "a", "a-2", 1), time.Millisecond)
	two := withUID(hookPod(t, 30, "busybox:1.36", nil, [][2]string{{"a", postStartExec}, {"b", ""}}), "1")
	tsb, ta1 := sbRec(two, "sb1"), startedAt(ctr(two, "sb1", "a", "a-1", 0), 0)
	// started is a's first start up to its postStart hook.
	started := []turn{
		{beginAt(0), lines("list")},
		{ls(sb), lines("check-image a")},
		{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.36" already present on machine`, "start app/a#0 in sb1")},
		{startOK(a1), lines("event Normal Started a: Started container a (a-1)", "post-start a-1")},
	}
	runScenarios(t, []scenario{{
		name: "postStart fails: events, the container stopped, then restarted",
		pod:  p,
		turns: slices.Concat(started, []turn{
			{hookFailed("command 'sh -c echo hi' exited with 1: "), lines("event Warning FailedPostStartHook a: command 'sh -c echo hi' exited with 1: ", "event Normal Killing a: Container a failed post-start hook, will be killed", "stop a-1 30s")},
			{stopOK(), lines("list")},
			{ls(sb, a1x), lines("probe", "report Running a=Error(137)", "finish again=1ms")},
			{beginAt(time.Millisecond), lines("list")},
			{ls(sb, a1x), lines("check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.36" already present on machine`, "start app/a#1 in sb1")},
			{startOK(a2), lines("event Normal Started a: Started container a (a-2)", "post-start a-2")},
			{hookOK(), lines("list")},
			{ls(sb, a2, a1x), lines("probe", "report Running a=running#1", "finish")},
		}),
	}, {
		name: "postStart made pointless by a new spec: abandoned, the container replaced at the next pass",
		pod:  p,
		turns: slices.Concat(started, []turn{
			{askObsolete{}, lines()},
			{desire{p2}, lines()},
			{askObsolete{}, lines("obsolete")},
			{hookAbandoned(), lines("note postStart hook abandoned: the pod changed", "list")},
			{ls(sb, a1), lines("probe", "report Running a=running", "finish again=1ms")},
			{beginAt(time.Millisecond), lines("list")},
			{ls(sb, a1), lines("event Normal Killing a: Container a definition changed, will be restarted", "stop a-1 30s")},
			{stopOK(), lines("remove a-1")},
			{removeOK(), lines("check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.37" already present on machine`, "start app/a#1 in sb1")},
			{startOK(n2), lines("event Normal Started a: Started container a (a-2)", "post-start a-2")},
			{hookOK(), lines("list")},
			{ls(sb, n2), lines("probe", "report Running a=running#1", "finish")},
		}),
	}, {
		name: "a node shutdown makes a postStart hook pointless",
		pod:  p,
		turns: slices.Concat(started, []turn{
			{haltFlag(true), lines()},
			{askObsolete{}, lines("obsolete")},
			{hookAbandoned(), lines("note postStart hook abandoned: the node is shutting down", "list")},
			{ls(sb, a1), lines("probe", "report Running a=running", "finish again=1ms")},
			{beginAt(time.Millisecond), lines()},
		}),
	}, {
		name: "a node shutdown during a postStart hook starts no more containers",
		pod:  two,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(tsb), lines("check-image a")},
			{checked(false), lines(`event Normal Pulled a: Container image "busybox:1.36" already present on machine`, "start app/a#0 in sb1")},
			{startOK(ta1), lines("event Normal Started a: Started container a (a-1)", "post-start a-1")},
			{haltFlag(true), lines()},
			{askObsolete{}, lines("obsolete")},
			{hookAbandoned(), lines("note postStart hook abandoned...", "list")},
		},
	}})
}

// TestPlanProbes covers liveness verdicts.
func TestPlanProbes(t *testing.T) {
	// failing is the turns of pod p, adopted, up to a pass after its
	// container's liveness probe failed.
	failing := func(p *pod.Pod) []turn {
		sb, a1 := sbRec(p, "sb1"), ctr(p, "sb1", "app", "app-1", 0)
		return []turn{
			{beginAt(0), lines("list")},
			{ls(sb, a1), lines("list")},
			{ls(sb, a1), lines("probe app", "report Running app=running", "finish")},
			{verdict{"app-1", pod.Liveness, pod.ProbeFailure}, lines("changed")},
			{verdict{"app-1", pod.Liveness, pod.ProbeFailure}, lines()},
			{beginAt(10 * sec), lines("list")},
		}
	}
	p := withUID(probePod(t, "Always", livenessYAML), "1")
	sb, a1 := sbRec(p, "sb1"), ctr(p, "sb1", "app", "app-1", 0)
	a1x := exitAt(a1, 137, 10*sec)
	a2 := startedAt(ctr(p, "sb1", "app", "app-2", 1), 10*sec)
	np := withUID(probePod(t, "Never", livenessYAML), "1")
	nsb, na1 := sbRec(np, "sb1"), ctr(np, "sb1", "app", "app-1", 0)
	na1x := exitAt(na1, 137, 10*sec)
	runScenarios(t, []scenario{{
		name: "liveness fails under Always: killed with the probe's grace, then restarted",
		pod:  p,
		turns: slices.Concat(failing(p), []turn{
			{ls(sb, a1), lines("event Normal Killing app: Container app failed liveness probe, will be restarted", "stop app-1 3s")},
			{stopOK(), lines("list")},
			{ls(sb, a1x), lines("probe", "report Running app=Error(137)", "finish again=1ms")},
			{beginAt(10*sec + time.Millisecond), lines("list")},
			{ls(sb, a1x), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#1 in sb1")},
			{startOK(a2), lines("event Normal Started app: Started container app (app-2)", "list")},
			{ls(sb, a2, a1x), lines("probe app", "report Running app=running#1", "finish")},
		}),
	}, {
		// The kubelet's event says "will be restarted" only when it will.
		name: "liveness fails under Never: killed, not restarted; the pod is done",
		pod:  np,
		turns: slices.Concat(failing(np), []turn{
			{ls(nsb, na1), lines("event Normal Killing app: Container app failed liveness probe...", "stop app-1 3s")},
			{stopOK(), lines("list")},
			{ls(nsb, na1x), lines("probe", "report Failed app=Error(137)", "finish again=1ms")},
			{beginAt(10*sec + time.Millisecond), lines("list")},
			{ls(nsb, na1x), lines("stop sb1 2s")},
			{stopOK(), lines("list")},
			{ls(exitAt(nsb, 0, 10*sec), na1x), lines("probe", "report Failed app=Error(137)", "finish")},
		}),
	}})
}

// TestPlanSandbox covers a sandbox that dies or cannot be made.
func TestPlanSandbox(t *testing.T) {
	p := withUID(mkPod(t, podSpec{apps: []string{"a", "b"}}), "1")
	sb := sbRec(p, "sb1")
	sbx := exitAt(sb, 2, 0)
	a1 := ctr(p, "sb1", "a", "a-1", 0)
	b1x := exitAt(ctr(p, "sb1", "b", "b-1", 0), 137, 0)
	b2 := startedAt(ctr(p, "sb1", "b", "b-2", 1), 0)

	sp := withUID(mkPod(t, podSpec{sharePID: true}), "1")
	ssbx := exitAt(sbRec(sp, "sb1"), 137, 0)
	sa1x := exitAt(ctr(sp, "sb1", "app", "app-1", 0), 137, 0)
	ssb2 := freshSb(sp, "sb2", 0)
	sa2 := startedAt(ctr(sp, "sb2", "app", "app-2", 1), 0)

	op := withUID(mkPod(t, podSpec{policy: v1.RestartPolicyOnFailure, sharePID: true, apps: []string{"a", "b"}}), "1")
	osbx, osb2 := exitAt(sbRec(op, "sb1"), 137, 0), freshSb(op, "sb2", 0)
	oa1x := exitAt(ctr(op, "sb1", "a", "a-1", 0), 0, -30*sec)
	ob1x := exitAt(ctr(op, "sb1", "b", "b-1", 0), 137, 0)

	fp := withUID(mkPod(t, podSpec{}), "1")
	boom := errors.New("creating the network: no IP addresses left")
	hsb := freshSb(fp, "sb1", -sec)
	ha1 := startedAt(ctr(fp, "sb1", "app", "app-1", 0), 0)
	fsb := freshSb(fp, "sb1", 0)
	fsbx := exitAt(fsb, 1, 0)
	runScenarios(t, []scenario{{
		name: "the pause exited, namespaces pinned: SandboxExited, started again in place after the containers",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sbx, a1, b1x), lines("event Warning SandboxExited: Pod sandbox's pause process exited with code 2: no output; it will be started again; the pod's containers keep running", "check-image b")},
			{checked(false), lines(`event Normal Pulled b: Container image "busybox:1.36" already present on machine`, "start app/b#1 in sb1")},
			{startOK(b2), lines("event Normal Started b: Started container b (b-2)", "start-sandbox sb1")},
			{sbStarted(upSb(sb, 0)), lines("event Normal SandboxStarted: Started pod sandbox sb1 again (pause process 7); the pod's containers kept running", "list")},
			{ls(upSb(sb, 0), a1, b2, b1x), lines("probe", "report Running a=running b=running#1", "finish")},
		},
	}, {
		name: "the pause exited, PID namespace shared: SandboxChanged, the pod re-created",
		pod:  sp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(ssbx, sa1x), lines("event Warning SandboxExited: Pod sandbox's pause process exited with code 137: no output; the pod will be re-created", "event Normal SandboxChanged: Pod sandbox changed, it will be killed and re-created.", "stop+remove sb1 2s, app-1 30s")},
			{stopOK(), lines("create-sandbox uid1")},
			{made(ssb2), lines("start-sandbox sb2")},
			{sbStarted(upSb(ssb2, 0)), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#1 in sb2")},
			{startOK(sa2), lines("event Normal Started app: Started container app (app-2)", "list")},
			{ls(upSb(ssb2, 0), sa2), lines("probe", "report Running app=running#1", "finish")},
		},
	}, {
		name: "the sandbox cannot be created: FailedCreatePodSandBox, tried again after the backoff",
		pod:  fp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{makeFailed(boom), lines("event Warning FailedCreatePodSandBox: creating the network: no IP addresses left", "warn creating the pod's sandbox", "list")},
			{ls(), lines("probe", "report Pending app=ContainerCreating sandbox=FailedCreatePodSandBox", "finish again=1ms")},
			{beginAt(time.Millisecond), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{makeFailed(boom), lines("event Warning FailedCreatePodSandBox: creating the network: no IP addresses left", "warn creating the pod's sandbox", "list")},
			{ls(), lines("probe", "report Pending app=ContainerCreating sandbox=FailedCreatePodSandBox", "finish again=1s")},
			{beginAt(500 * time.Millisecond), lines("list")},
			{ls(), lines("event Warning BackOff: Back-off restarting failed pod sandbox: next try in 1s (creating the network: no IP addresses left)", "list")},
			{ls(), lines("probe", "report Pending app=ContainerCreating sandbox=BackOff", "finish again=501ms")},
			{beginAt(time.Second + time.Millisecond), lines("list")},
			{ls(), lines("create-sandbox uid1")},
		},
	}, {
		name: "OnFailure, the pod re-created: a container that succeeded does not run again",
		skip: "kubelet divergence: a sandbox re-created under OnFailure runs again the containers that succeeded " +
			"(their records go with the old sandbox, plan_sync.go syncListed); the kubelet's computePodActions skips them (containerSucceeded)",
		pod: op,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(osbx, oa1x, ob1x), lines("event Warning SandboxExited: ...", "event Normal SandboxChanged: ...", "stop+remove sb1 2s, a-1 30s, b-1 30s")},
			{stopOK(), lines("create-sandbox uid1")},
			{made(osb2), lines("start-sandbox sb2")},
			{sbStarted(upSb(osb2, 0)), lines("check-image b")},
		},
	}, {
		name: "hsb-made sandbox",
		pod:  fp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(hsb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(ha1), lines("event Normal Started app: Started container app (app-1)", "start-sandbox sb1")},
			{sbStarted(upSb(hsb, 0)), lines("event Normal SandboxStarted: Started pod sandbox sb1 again (pause process 7); the pod's containers kept running", "list")},
			{ls(upSb(hsb, 0), ha1), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "the pause fails to start: FailedCreatePodSandBox, started again in place",
		pod:  fp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(fsb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(ha1), lines("event Normal Started app: Started container app (app-1)", "start-sandbox sb1")},
			{give{o: sandboxStarted{rec: fsbx, err: errors.New("pause exited at once: exit status 1")}}, lines("event Warning FailedCreatePodSandBox: pause exited at once: exit status 1", "warn starting the pod's sandbox", "list")},
			{ls(fsbx, ha1), lines("probe", "report Running app=running sandbox=FailedCreatePodSandBox", "finish again=1ms")},
			{beginAt(time.Millisecond), lines("list")},
			{ls(fsbx, ha1), lines("start-sandbox sb1")},
			{sbStarted(upSb(fsb, time.Millisecond)), lines("event Normal SandboxStarted: Started pod sandbox sb1 again (pause process 7); the pod's containers kept running", "list")},
			{ls(upSb(fsb, time.Millisecond), ha1), lines("probe", "report Running app=running", "finish")},
		},
	}})
}

// TestPlanRemove covers the passes of a pod whose manifest is gone.
func TestPlanRemove(t *testing.T) {
	p := withUID(mkPod(t, podSpec{grace: 10}), "1")
	sb, a1 := sbRec(p, "sb1"), ctr(p, "sb1", "app", "app-1", 0)
	// removal is the turns of the pod, adopted, then removed, up to the
	// removal of its files.
	removal := slices.Concat(adopt("report Running app=running", sb, a1), []turn{
		{desire{nil}, lines()},
		{beginAt(10 * sec), lines("list")},
		{ls(sb, a1), lines("event Normal Killing: Stopping pod: its manifest was removed", "report Running deleting(10s) app=running", "probe", "event Normal Killing app: Stopping container app", "stop+remove sb1 2s, app-1 10s")},
		{stopOK(), lines("remove-files uid1 (all)")},
	})
	runScenarios(t, []scenario{{
		name: "removed: all stopped with the pod's grace, its files removed, forgotten, gone",
		pod:  p,
		turns: slices.Concat(removal, []turn{
			{filesOK("uid1"), lines("forget", "finish gone")},
		}),
	}, {
		name: "removed: files that cannot be removed keep the pod from going",
		pod:  p,
		turns: slices.Concat(removal, []turn{
			{filesFailed("uid1", errors.New("device busy")), lines("forget", "finish err=removing the files of pod kube-system/web-n: device busy")},
			{beginAt(11 * sec), lines("list")},
			{ls(), lines("probe", "remove-files uid1 (all)")},
			{filesOK("uid1"), lines("forget", "finish gone")},
		}),
	}, {
		name: "a pod found with no manifest: removed with the default grace",
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(sb, a1), lines("event Normal Killing: Stopping pod: its manifest was removed", "probe", "event Normal Killing app: Stopping container app", "stop+remove sb1 2s, app-1 30s")},
			{stopOK(), lines("remove-files uid1 (all)")},
			{filesOK("uid1"), lines("forget", "finish gone")},
		},
	}})
}

// TestPlanHalt covers a node shutdown.
func TestPlanHalt(t *testing.T) {
	p := withUID(mkPod(t, podSpec{grace: 60}), "1")
	sb, a1 := sbRec(p, "sb1"), ctr(p, "sb1", "app", "app-1", 0)
	sbx, a1x := exitAt(sb, 0, 10*sec), exitAt(a1, 143, 10*sec)
	runScenarios(t, []scenario{{
		name: "halted: NodeShutdown, stopped within the limit and kept, reported Failed; no pass begins",
		pod:  p,
		turns: slices.Concat(adopt("report Running app=running", sb, a1), []turn{
			{haltAt{10 * sec, 20 * sec}, lines("list")},
			{ls(sb, a1), lines("probe", "event Normal NodeShutdown: Pod was terminated in response to imminent node shutdown.", "event Normal Killing app: Stopping container app", "stop sb1 2s, app-1 20s")},
			{stopOK(), lines("list")},
			{ls(sbx, a1x), lines("report Failed(Terminated) app=Error(143)", "finish")},
			{beginAt(20 * sec), lines()},
		}),
	}, {
		name: "halted while being removed: stopped, no status",
		pod:  p,
		turns: slices.Concat(adopt("report Running app=running", sb, a1), []turn{
			{desire{nil}, lines()},
			{haltAt{10 * sec, 20 * sec}, lines("list")},
			{ls(sb, a1), lines("probe", "event Normal Killing app: Stopping container app", "stop sb1 2s, app-1 20s")},
			{stopOK(), lines("finish")},
		}),
	}})
}
