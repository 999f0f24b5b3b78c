package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticlet/staticlet/internal/pod"
)

// A scenario plays one pod's worker: it feeds the pod's core a sequence of
// inputs (a pass begun at a time, the outcome of the I/O action the core
// asked for, a new spec, a probe verdict, a halt) and checks the actions
// each input returns, rendered as short strings. Nothing runs: time is t0
// plus offsets, and the test plays the runtime by writing each outcome.

// scenario is one pod's story, told in turns.
type scenario struct {
	name string
	pod  *pod.Pod // desired from the start; nil: none
	// skip, when not empty, says why the scenario does not run: the core
	// does what the kubelet does not, and the turns say what it should do.
	skip string
	// ordering, when set, shows the readiness the core tells the loop
	// ("ready", "unready"), which orders other pods' starts and stops;
	// other scenarios leave those lines out.
	ordering bool
	turns    []turn
}

// turn is one input and the actions it must return, rendered. A wanted
// line ending in "..." matches any line that begins with the rest.
type turn struct {
	in   input
	want []string
}

// input is something that happens to the pod; feed gives it to the core
// and returns what came of it, rendered.
type input interface {
	feed(pl *player) []string
}

// printTurns, set by PLAN_PRINT=1, logs what each turn returned.
var printTurns = os.Getenv("PLAN_PRINT") != ""

// runSkipped, set by PLAN_RUN_SKIPPED=1, plays the skipped scenarios too:
// they fail until the core does as the kubelet does.
var runSkipped = os.Getenv("PLAN_RUN_SKIPPED") != ""

// player feeds a scenario to a core, as a worker does, and checks the
// contract of what the core returns.
type player struct {
	t   *testing.T
	c   *podCore
	now time.Time
	// ordering shows readiness lines (scenario.ordering).
	ordering bool
	// pending is the I/O action whose outcome the core waits for; nil
	// between passes.
	pending action
}

// runScenarios plays each scenario in a subtest of its own.
func runScenarios(t *testing.T, scenarios []scenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if sc.skip != "" && !runSkipped {
				t.Skip(sc.skip)
			}
			key := pod.Key{Namespace: "kube-system", Name: "web-n"}
			if sc.pod != nil {
				key = sc.pod.Key()
			}
			c := newCore(key, testBackoff, []string{"10.0.0.5"})
			c.setDesired(sc.pod)
			pl := &player{t: t, c: c, now: t0, ordering: sc.ordering}
			for i, tu := range sc.turns {
				got := pl.feedSafely(tu.in)
				if printTurns {
					// For writing a new scenario's wants: each turn's
					// actions, to be read and judged, not pasted blindly.
					j, _ := json.Marshal(got)
					t.Logf("turn %d: %s (then at %s)", i+1, j, c.pass.at)
				}
				if !linesMatch(got, tu.want) {
					t.Errorf("turn %d, %s (then at %s):\ngot\n\t%s\nwant\n\t%s", i+1, describe(tu.in), c.pass.at,
						strings.Join(got, "\n\t"), strings.Join(tu.want, "\n\t"))
				}
			}
		})
	}
}

// feedSafely feeds in, turning a panic of the core into a test failure.
func (pl *player) feedSafely(in input) (got []string) {
	pl.t.Helper()
	defer func() {
		if r := recover(); r != nil {
			pl.t.Fatalf("%s: the core panicked: %v", describe(in), r)
		}
	}()
	return in.feed(pl)
}

// describe names an input for a failure message.
func describe(in input) string {
	switch in := in.(type) {
	case beginAt:
		return fmt.Sprintf("begin at t0+%v", time.Duration(in))
	case haltAt:
		return fmt.Sprintf("halt at t0+%v within %v", in.at, in.limit)
	case give:
		return fmt.Sprintf("outcome %T", in.o)
	}
	return fmt.Sprintf("%T", in)
}

// linesMatch tells whether got is want, line by line.
func linesMatch(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		w, prefix := strings.CutSuffix(want[i], "...")
		if got[i] != want[i] && !(prefix && strings.HasPrefix(got[i], w)) {
			return false
		}
	}
	return true
}

// acts checks that acts keep the core's contract (at most one I/O action,
// last; a finish, last, ends the pass; a pass in progress always ends in
// one or the other), notes the I/O action as pending and renders acts.
func (pl *player) acts(acts []action) []string {
	pl.t.Helper()
	out := make([]string, 0, len(acts))
	pl.pending = nil
	for i, a := range acts {
		if _, ok := a.(readiness); ok && !pl.ordering {
			continue
		}
		if line := render(a); line != "" {
			out = append(out, line)
		}
		last := i == len(acts)-1
		_, isFinish := a.(finish)
		switch {
		case isIO(a) && !last:
			pl.t.Errorf("I/O action %q is not last in %q", render(a), out)
		case isFinish && !last:
			pl.t.Errorf("finish is not last in %q", out)
		case last && isIO(a):
			pl.pending = a
		case last && !isFinish:
			pl.t.Errorf("actions %q end in neither an I/O action nor a finish", out)
		}
	}
	if (pl.pending == nil) != (pl.c.pass.at == idle) {
		pl.t.Errorf("after %q the core waits: %v (at %s)", out, pl.c.pass.at != idle, pl.c.pass.at)
	}
	if a := fmt.Sprintf("%T", pl.pending); pl.pending != nil && stageAction[pl.c.pass.at] != a {
		pl.t.Errorf("after %q the pass waits at %s, which waits on a %s, but the action pending is a %s", out, pl.c.pass.at, stageAction[pl.c.pass.at], a)
	}
	return out
}

// stageAction names the action each stage waits on, as %T prints it.
var stageAction = map[stage]string{
	atSyncList:         "reconcile.listPod",
	atSyncStopStale:    "reconcile.stopGroup",
	atSyncRemoveStale:  "reconcile.removeFiles",
	atSyncCreate:       "reconcile.createSandbox",
	atSyncStartPause:   "reconcile.startSandbox",
	atSyncStartLater:   "reconcile.startSandbox",
	atSyncVolumes:      "reconcile.syncVolumes",
	atSyncReport:       "reconcile.listPod",
	atConvStopOne:      "reconcile.stopGroup",
	atConvRemoveOne:    "reconcile.removeContainer",
	atConvResume:       "reconcile.resumeContainer",
	atConvCheckImage:   "reconcile.checkImage",
	atConvPullReport:   "reconcile.listPod",
	atConvPull:         "reconcile.pullImage",
	atConvStart:        "reconcile.startContainer",
	atConvPostStart:    "reconcile.postStart",
	atConvStopUnwanted: "reconcile.stopGroup",
	atConvStopSidecars: "reconcile.stopGroup",
	atConvStopSandbox:  "reconcile.stopGroup",
	atRemoveList:       "reconcile.listPod",
	atRemoveStop:       "reconcile.stopGroup",
	atRemoveFiles:      "reconcile.removeFiles",
	atHaltList:         "reconcile.listPod",
	atHaltStop:         "reconcile.stopGroup",
	atHaltReport:       "reconcile.listPod",
}

// outcomeOf names the outcome of each action that does I/O, both as %T
// prints them.
var outcomeOf = map[string]string{
	"reconcile.listPod":         "reconcile.listed",
	"reconcile.createSandbox":   "reconcile.sandboxMade",
	"reconcile.startSandbox":    "reconcile.sandboxStarted",
	"reconcile.stopGroup":       "reconcile.stopped",
	"reconcile.removeContainer": "reconcile.removed",
	"reconcile.resumeContainer": "reconcile.resumed",
	"reconcile.checkImage":      "reconcile.imageChecked",
	"reconcile.pullImage":       "reconcile.pulled",
	"reconcile.startContainer":  "reconcile.started",
	"reconcile.postStart":       "reconcile.hookRan",
	"reconcile.removeFiles":     "reconcile.filesRemoved",
	"reconcile.syncVolumes":     "reconcile.volumesSynced",
}

// isIO tells whether a does I/O, and so has an outcome.
func isIO(a action) bool {
	_, ok := outcomeOf[fmt.Sprintf("%T", a)]
	return ok
}

// answers tells whether o is the outcome of action a.
func answers(a action, o outcome) bool {
	return outcomeOf[fmt.Sprintf("%T", a)] == fmt.Sprintf("%T", o)
}

// render is an action as a short, stable line.
func render(a action) string {
	switch a := a.(type) {
	case listPod:
		return "list"
	case createSandbox:
		return "create-sandbox " + string(a.pod.UID)
	case startSandbox:
		return "start-sandbox " + a.sb.ID
	case stopGroup:
		return renderStops(a)
	case removeContainer:
		return "remove " + a.id
	case resumeContainer:
		return "resume " + a.id
	case checkImage:
		return "check-image " + a.c.Name
	case pullImage:
		return "pull " + a.c.Name
	case startContainer:
		r := a.req
		return fmt.Sprintf("start %s/%s#%d in %s", r.Kind, r.Container.Name, r.Attempt, r.Sandbox.ID)
	case postStart:
		return "post-start " + a.rec.ID
	case syncVolumes:
		return "sync-volumes " + a.sb.ID
	case removeFiles:
		s := "remove-files " + strings.Join(a.uids, ",")
		if a.all {
			s += " (all)"
		}
		return s
	case emit:
		e := a.e
		s := fmt.Sprintf("event %s %s", e.Type, e.Reason)
		if e.Container != "" {
			s += " " + e.Container
		}
		return s + ": " + e.Message
	case report:
		return renderReport(a.pod)
	case forget:
		return "forget"
	case probe:
		names := make([]string, 0, len(a.targets))
		for _, tg := range a.targets {
			names = append(names, tg.Container.Name)
		}
		return strings.TrimSpace("probe " + strings.Join(names, ","))
	case watchFiles:
		if len(a.targets) == 0 {
			return "" // said on every report: only a list is worth a line
		}
		names := make([]string, 0, len(a.targets))
		for _, tg := range a.targets {
			names = append(names, tg.Container+":"+tg.Path)
		}
		return "watch " + strings.Join(names, ",")
	case readiness:
		if a.ready {
			return "ready"
		}
		return "unready"
	case note:
		if a.warn {
			return "warn " + a.msg
		}
		return "note " + a.msg
	case finish:
		return renderFinish(a)
	}
	return fmt.Sprintf("unknown %T", a)
}

// renderStops is "stop" (or "stop+remove"; "stop seq" when in order)
// and each container with its grace and, if it runs one, "preStop";
// "nothing" when there is none.
func renderStops(g stopGroup) string {
	s := "stop"
	if g.remove {
		s += "+remove"
	}
	if g.sequential && len(g.stops) > 1 {
		s += " seq"
	}
	if len(g.stops) == 0 {
		return s + " nothing"
	}
	parts := make([]string, 0, len(g.stops))
	for _, o := range g.stops {
		p := fmt.Sprintf("%s %v", o.rec.ID, o.grace)
		if o.hook != nil {
			p += " preStop"
		}
		parts = append(parts, p)
	}
	return s + " " + strings.Join(parts, ", ")
}

// renderFinish is "finish" with how soon to look again, the error, and
// whether the pod is gone.
func renderFinish(f finish) string {
	s := "finish"
	if f.again != 0 {
		s += fmt.Sprintf(" again=%v", f.again)
	}
	if f.gone {
		s += " gone"
	}
	if f.err != nil {
		s += " err=" + f.err.Error()
	}
	return s
}

// renderReport is "report", the phase (and reason), then each container,
// init containers first, as name=state: running, the waiting reason, or
// the terminated reason and exit code; "#n" counts restarts. A sandbox
// that is down adds sandbox=reason.
func renderReport(p *v1.Pod) string {
	st := p.Status
	s := "report " + string(st.Phase)
	if st.Reason != "" {
		s += "(" + st.Reason + ")"
	}
	if p.DeletionTimestamp != nil {
		s += fmt.Sprintf(" deleting(%ds)", *p.DeletionGracePeriodSeconds)
	}
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			s += " " + cs.Name + "=" + containerState(cs.State)
			if cs.RestartCount > 0 {
				s += fmt.Sprintf("#%d", cs.RestartCount)
			}
		}
	}
	for _, c := range st.Conditions {
		if c.Type == v1.PodReadyToStartContainers && c.Status != v1.ConditionTrue && c.Reason != "" {
			s += " sandbox=" + c.Reason
		}
	}
	return s
}

func containerState(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("%s(%d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "?"
}

// Inputs.

// beginAt begins a pass at t0 plus its offset.
type beginAt time.Duration

func (b beginAt) feed(pl *player) []string {
	if pl.pending != nil {
		pl.t.Fatalf("begin while %q waits for its outcome", render(pl.pending))
	}
	pl.now = t0.Add(time.Duration(b))
	return pl.acts(pl.c.begin(pl.now))
}

// haltAt begins a node shutdown's pass at t0 plus at, each container
// stopped within limit.
type haltAt struct{ at, limit time.Duration }

func (h haltAt) feed(pl *player) []string {
	pl.now = t0.Add(h.at)
	// As the worker does: a pass under way is dropped.
	pl.c.abandon()
	return pl.acts(pl.c.beginHalt(h.limit))
}

// give is the outcome of the pending action, arriving after the time of
// the previous input.
type give struct {
	o     outcome
	after time.Duration
}

func (g give) feed(pl *player) []string {
	pl.t.Helper()
	if pl.pending == nil {
		pl.t.Fatalf("outcome %T with no action waiting for one", g.o)
	}
	if !answers(pl.pending, g.o) {
		pl.t.Fatalf("outcome %T does not answer %q", g.o, render(pl.pending))
	}
	pl.now = pl.now.Add(g.after)
	return pl.acts(pl.c.step(g.o, pl.now))
}

// desire sets the desired pod (nil: the pod is to go).
type desire struct{ p *pod.Pod }

func (d desire) feed(pl *player) []string { pl.c.setDesired(d.p); return nil }

// haltFlag halts the pod's starts, or lifts that.
type haltFlag bool

func (h haltFlag) feed(pl *player) []string { pl.c.setHalted(bool(h)); return nil }

// arrive tells the core images arrived.
type arrive []string

func (a arrive) feed(pl *player) []string { pl.c.imagesArrived(a); return nil }

// verdict is a probe's verdict on a container; the core says "changed"
// when it changed a result.
type verdict struct {
	id  string
	typ pod.ProbeType
	res pod.ProbeResult
}

func (v verdict) feed(pl *player) []string {
	if pl.c.noteProbe(pod.ProbeVerdict{ContainerID: v.id, Type: v.typ, Result: v.res, Time: pl.now}) {
		return []string{"changed"}
	}
	return nil
}

// askObsolete asks the core whether the postStart hook under way is
// pointless: "obsolete" when it is.
type askObsolete struct{}

func (askObsolete) feed(pl *player) []string {
	if pl.c.hookObsolete() {
		return []string{"obsolete"}
	}
	return nil
}

// Outcomes, as inputs.

func ls(recs ...pod.Record) give   { return give{o: listed{recs: recs}} }
func made(sb pod.Record) give      { return give{o: sandboxMade{rec: sb}} }
func makeFailed(err error) give    { return give{o: sandboxMade{err: err}} }
func sbStarted(sb pod.Record) give { return give{o: sandboxStarted{rec: sb}} }
func stopOK() give                 { return give{o: stopped{}} }
func removeOK() give               { return give{o: removed{}} }
func resumeOK(r pod.Record) give   { return give{o: resumed{rec: r}} }
func resumeFailed(err error) give  { return give{o: resumed{err: err}} }
func checked(need bool) give       { return give{o: imageChecked{need: need}} }
func volumesOK() give              { return give{o: volumesSynced{}} }
func startOK(r pod.Record) give    { return give{o: started{rec: r}} }
func startFailed(err error) give   { return give{o: started{err: err}} }
func hookOK() give                 { return give{o: hookRan{}} }
func hookAbandoned() give {
	return give{o: hookRan{abandoned: true, err: errors.New("context canceled")}}
}
func hookFailed(msg string) give              { return give{o: hookRan{msg: msg, err: errors.New(msg)}} }
func pullOK(took time.Duration) give          { return give{o: pulled{took: took}, after: took} }
func pullFailed(present bool, err error) give { return give{o: pulled{present: present, err: err}} }
func filesOK(uids ...string) give             { return give{o: filesRemoved{done: uids}} }

// filesFailed is the removal of the files of uid failing with err, those
// of done removed.
func filesFailed(uid string, err error, done ...string) give {
	return give{o: filesRemoved{done: done, failed: map[string]error{uid: err}}}
}

// Records, as the runtime reports them. Those that ran began an hour
// before t0, unless moved with startedAt.

// withUID gives p a short UID, for records and rendered actions.
func withUID(p *pod.Pod, uid string) *pod.Pod {
	p.UID = types.UID("uid" + uid)
	return p
}

// sbRec is sandbox id of p, running and pinned.
func sbRec(p *pod.Pod, id string) pod.Record {
	at := t0.Add(-time.Hour)
	return pod.Record{ID: id, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindSandbox, Hash: p.SandboxHash,
		State: pod.TaskRunning, Pid: 1, CreatedAt: at, StartedAt: at, Pinned: true}
}

// freshSb is sandbox id of p as just created, at t0 plus at.
func freshSb(p *pod.Pod, id string, at time.Duration) pod.Record {
	r := sbRec(p, id)
	r.State, r.Pid, r.CreatedAt, r.StartedAt = pod.TaskCreated, 0, t0.Add(at), time.Time{}
	return r
}

// upSb is sandbox sb started at t0 plus at.
func upSb(sb pod.Record, at time.Duration) pod.Record {
	sb.State, sb.Pid, sb.StartedAt, sb.FinishedAt, sb.ExitCode = pod.TaskRunning, 7, t0.Add(at), time.Time{}, 0
	return sb
}

// ctr is container name of p, attempt attempt, running in sandbox sb as id.
func ctr(p *pod.Pod, sb, name, id string, attempt int) pod.Record {
	kind, c := pod.KindApp, findContainer(p, name)
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == name {
			kind = pod.KindInit
		}
	}
	at := t0.Add(-time.Hour)
	return pod.Record{ID: id, Pod: p.Key(), PodUID: string(p.UID), Kind: kind, Name: name, Hash: pod.ContainerHash(c),
		Attempt: attempt, SandboxID: sb, Image: c.Image, State: pod.TaskRunning, Pid: 100, CreatedAt: at, StartedAt: at}
}

// findContainer is the container of p named name; it panics if there is
// none, a mistake in the scenario.
func findContainer(p *pod.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	panic(fmt.Sprintf("pod %s has no container %s", p.Name, name))
}

// startedAt is r running since t0 plus at; a container's creation goes
// with its start.
func startedAt(r pod.Record, at time.Duration) pod.Record {
	r.State, r.StartedAt = pod.TaskRunning, t0.Add(at)
	if r.Kind != pod.KindSandbox {
		r.CreatedAt = r.StartedAt
	}
	return r
}

// exitAt is r exited with code at t0 plus at.
func exitAt(r pod.Record, code int32, at time.Duration) pod.Record {
	r.State, r.ExitCode, r.FinishedAt, r.Pid = pod.TaskExited, code, t0.Add(at), 0
	return r
}

// halfStarted is r created but never started: a start cut short.
func halfStarted(r pod.Record) pod.Record {
	r.State, r.Pid, r.StartedAt = pod.TaskCreated, 0, time.Time{}
	return r
}

// adopt is the turns of a first pass, at t0, that finds recs as they
// should be and only reports, as report.
func adopt(report string, recs ...pod.Record) []turn {
	return []turn{
		{beginAt(0), lines("list")},
		{ls(recs...), lines("list")},
		{ls(recs...), lines("probe", report, "finish")},
	}
}

// lines is a list of wanted lines, for readability in tables.
func lines(s ...string) []string { return s }
