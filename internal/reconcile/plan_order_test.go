package reconcile

import (
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// deps tells the core which pods its pod starts after are Ready; the core
// says "changed" when that changed.
type deps map[string]bool

func (d deps) feed(pl *player) []string {
	if pl.c.setDeps(d) {
		return []string{"changed"}
	}
	return nil
}

// restartAsk asks the core to restart these containers (staticlet
// restart).
type restartAsk []string

func (r restartAsk) feed(pl *player) []string { pl.c.askRestart(r); return nil }

// changedFile tells the core a file a container mounts changed.
type changedFile struct{ container, path string }

func (f changedFile) feed(pl *player) []string { pl.c.fileChanged(f.container, f.path); return nil }

// annotate sets annotation k to v on p.
func annotate(p *pod.Pod, k, v string) *pod.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
	return p
}

// TestPlanOrder covers what orders pods: a start after other pods are
// Ready (staticlet.io/after), the readiness the core tells the loop, and
// restarts when a mounted file changes.
func TestPlanOrder(t *testing.T) {
	api := annotate(withUID(mkPod(t, podSpec{name: "api"}), "1"), pod.AnnotationAfter, "etcd")
	sb := sbRec(api, "sb1")
	a1 := startedAt(ctr(api, "sb1", "app", "app-1", 0), 0)
	started := func(at time.Duration) []turn {
		return []turn{
			{beginAt(at), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{made(sb), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "start app/app#0 in sb1")},
			{startOK(a1), lines("event Normal Started app: Started container app (app-1)", "start-sandbox sb1")},
			{sbStarted(upSb(sb, 0)), lines("list")},
		}
	}
	waiting := []turn{
		{beginAt(0), lines("list")},
		{ls(), lines("event Normal WaitingForPods: Waiting for pod etcd to be Ready before starting (at most 2m0s)", "list")},
		{ls(), lines("probe", "report Pending app=ContainerCreating sandbox=WaitingForPods", "finish again=2m0s")},
		// Looked at again before etcd is Ready: it goes on waiting, the
		// event not said again.
		{beginAt(30 * sec), lines("list")},
		{ls(), lines("list")},
		{ls(), lines("probe", "report Pending app=ContainerCreating sandbox=WaitingForPods", "finish again=1m30s")},
	}

	hp := withUID(mkPod(t, podSpec{name: "lb"}), "1")
	annotate(hp, pod.AnnotationRestartOnChange, "true")
	hp.Spec.Volumes = append(hp.Spec.Volumes, v1.Volume{Name: "conf",
		VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/lb"}}})
	hp.Spec.Containers[0].VolumeMounts = append(hp.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "conf", MountPath: "/conf"})
	hsb, h1 := sbRec(hp, "sb1"), startedAt(ctr(hp, "sb1", "app", "app-1", 0), 0)
	h1x := exitAt(h1, 143, 5*sec)
	h2 := startedAt(ctr(hp, "sb1", "app", "app-2", 1), 5*sec)

	// rp, adopted running: Ready at its first report.
	rp := withUID(mkPod(t, podSpec{}), "1")
	rsb, r1 := sbRec(rp, "sb1"), ctr(rp, "sb1", "app", "app-1", 0)
	readyAt0 := []turn{
		{beginAt(0), lines("list")},
		{ls(rsb, r1), lines("list")},
		{ls(rsb, r1), lines("probe", "report Running app=running", "ready", "finish")},
	}

	runScenarios(t, []scenario{{
		name: "after etcd: waits until etcd is Ready, then starts",
		pod:  api,
		turns: slices.Concat(waiting, []turn{
			{deps{"etcd": true}, lines("changed")},
			{deps{"etcd": true}, lines()},
		}, started(40*sec), []turn{
			{ls(upSb(sb, 0), a1), lines("probe", "report Running app=running", "finish")},
		}),
	}, {
		name: "after etcd, which never comes: starts once the wait is over, and says so",
		pod:  api,
		turns: slices.Concat(waiting, []turn{
			{beginAt(2 * time.Minute), lines("list")},
			{ls(), lines("event Warning DependencyTimeout: Starting without waiting any longer for pod etcd to be Ready (staticlet.io/after): waited 2m0s",
				"create-sandbox uid1")},
		}),
	}, {
		name: "after etcd, which is not Ready: a restart asked starts it at once, and says so",
		pod:  api,
		turns: slices.Concat(waiting, []turn{
			{restartAsk{"app"}, lines()},
			{beginAt(40 * sec), lines("list")},
			{ls(), lines("event Normal DependencySkipped: Starting without waiting any longer for pod etcd to be Ready (staticlet.io/after): restart requested through staticlet restart",
				"create-sandbox uid1")},
		}),
	}, {
		name: "after etcd, already running (adopted): no wait",
		pod:  api,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(upSb(sb, 0), a1), lines("list")},
			{ls(upSb(sb, 0), a1), lines("probe", "report Running app=running", "finish")},
		},
	}, {
		name: "after etcd, Ready: starts at once; a sandbox made again does not wait again",
		pod:  api,
		turns: []turn{
			{deps{"etcd": true}, lines("changed")},
			{beginAt(0), lines("list")},
			{ls(), lines("create-sandbox uid1")},
			{makeFailed(errors.New("no IP address left")), lines("event Warning FailedCreatePodSandBox: no IP address left", "warn creating the pod's sandbox", "list")},
			{ls(), lines("probe", "report Pending app=ContainerCreating sandbox=FailedCreatePodSandBox", "finish again=1ms")},
			// etcd is not Ready any more: the pod, past its wait, does not wait again.
			{deps{"etcd": false}, lines("changed")},
			{beginAt(time.Millisecond), lines("list")},
			{ls(), lines("create-sandbox uid1")},
		},
	}, {
		name:     "readiness told to the loop: Ready once running, not once exited",
		pod:      rp,
		ordering: true,
		turns: slices.Concat(readyAt0, []turn{
			{beginAt(sec), lines("list")},
			{ls(rsb, r1), lines("list")},
			{ls(rsb, r1), lines("probe", "report Running app=running", "finish")},
			{beginAt(2 * sec), lines("list")},
			{ls(rsb, exitAt(r1, 1, 2*sec)), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#1 in sb1")},
			{startFailed(errors.New("test")), lines("event Warning Failed app: test", "list")},
			{ls(rsb, exitAt(r1, 1, 2*sec)), lines("probe", "report Running app=CreateContainerError", "unready", "finish again=1s")},
		}),
	}, {
		name:     "halted: reported Failed, and no longer Ready",
		pod:      rp,
		ordering: true,
		turns: slices.Concat(readyAt0, []turn{
			{haltAt{at: sec, limit: 20 * sec}, lines("list")},
			{ls(rsb, r1), lines("probe", "event Normal NodeShutdown...", "event Normal Killing app: Stopping container app", "stop sb1 2s, app-1 20s")},
			{stopOK(), lines("list")},
			{ls(exitAt(rsb, 0, sec), exitAt(r1, 143, sec)), lines("report Failed(Terminated) app=Error(143)", "unready", "finish")},
		}),
	}, {
		name: "restart on change: a mounted file changed, the container restarts",
		pod:  hp,
		turns: []turn{
			{beginAt(0), lines("list")},
			{ls(hsb, h1), lines("list")},
			{ls(hsb, h1), lines("probe", "watch app:/etc/lb", "report Running app=running", "finish")},
			{changedFile{"app", "/etc/lb/lb.cfg"}, lines()},
			{beginAt(5 * sec), lines("list")},
			{ls(hsb, h1), lines("event Normal Killing app: Container app: the content of /etc/lb/lb.cfg, which it mounts, changed (staticlet.io/restart-on-change); it will be restarted",
				"stop app-1 30s")},
			{stopOK(), lines("list")},
			{ls(hsb, h1x), lines("probe", "watch app:/etc/lb", "report Running app=Error(143)", "finish again=1ms")},
			{beginAt(5*sec + time.Millisecond), lines("list")},
			{ls(hsb, h1x), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#1 in sb1")},
			{startOK(h2), lines("event Normal Started app: Started container app (app-2)", "list")},
		},
	}, {
		name: "restart on change: a change while the container is not running restarts nothing",
		pod:  hp,
		turns: []turn{
			{changedFile{"app", "/etc/lb/lb.cfg"}, lines()},
			{beginAt(0), lines("list")},
			{ls(hsb, exitAt(h1, 0, 0)), lines("check-image app")},
			{checked(false), lines(`event Normal Pulled app...`, "start app/app#1 in sb1")},
			{startOK(h2), lines("event Normal Started app: Started container app (app-2)", "list")},
			{ls(hsb, h2, exitAt(h1, 0, 0)), lines("probe", "watch app:/etc/lb", "report Running app=running#1", "finish")},
			{beginAt(sec), lines("list")},
			{ls(hsb, h2, exitAt(h1, 0, 0)), lines("list")},
		},
	}})
}

// leave tells the core the pod's manifest is gone and its removal waits
// for pods that stop first.
type leave struct{}

func (leave) feed(pl *player) []string { pl.c.setLeaving(); return nil }

// TestPlanLeaving: a pod whose manifest is gone, while its removal waits
// for the pods that stop before it, starts nothing: not a container that
// exited, not a sandbox, not in a pass under way; a manifest back lifts
// that.
func TestPlanLeaving(t *testing.T) {
	p := withUID(mkPod(t, podSpec{}), "1")
	sb := sbRec(p, "sb1")
	a1 := ctr(p, "sb1", "app", "app-1", 0)
	a1x := exitAt(a1, 0, sec)
	runScenarios(t, []scenario{{
		name: "its container exits while it waits: no pass, no restart",
		pod:  p,
		turns: slices.Concat(adopt("report Running app=running", sb, a1), []turn{
			{leave{}, lines()},
			{beginAt(2 * sec), lines()},
			{desire{nil}, lines()},
			{beginAt(3 * sec), lines("list")},
		}),
	}, {
		name: "the manifest goes during a pass, before a restart",
		pod:  p,
		turns: slices.Concat(adopt("report Running app=running", sb, a1), []turn{
			{beginAt(2 * sec), lines("list")},
			{ls(sb, a1x), lines("check-image app")},
			{leave{}, lines()},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "list")},
			{ls(sb, a1x), lines("probe", "report Running app=Completed(0)", "finish again=1ms")},
		}),
	}, {
		name: "a node shutdown during the image check starts nothing either",
		pod:  p,
		turns: slices.Concat(adopt("report Running app=running", sb, a1), []turn{
			{beginAt(2 * sec), lines("list")},
			{ls(sb, a1x), lines("check-image app")},
			{haltFlag(true), lines()},
			{checked(false), lines(`event Normal Pulled app: Container image "busybox:1.36" already present on machine`, "list")},
			{ls(sb, a1x), lines("probe", "report Running app=Completed(0)", "finish again=1ms")},
		}),
	}, {
		name: "the manifest goes during a pass, before the sandbox is made",
		pod:  p,
		turns: []turn{
			{beginAt(0), lines("list")},
			{leave{}, lines()},
			{ls(), lines("list")},
			{ls(), lines("probe", "report Pending app=ContainerCreating", "finish")},
		},
	}, {
		name: "the manifest comes back",
		pod:  p,
		turns: slices.Concat(adopt("report Running app=running", sb, a1), []turn{
			{leave{}, lines()},
			{desire{p}, lines()},
			{beginAt(2 * sec), lines("list")},
			{ls(sb, a1x), lines("check-image app")},
		}),
	}})
}
