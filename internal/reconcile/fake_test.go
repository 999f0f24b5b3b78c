package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// call is one thing the reconciler asked of the fake runtime or reporter.
type call struct {
	op      string // create, start, stop, hook, remove, files, delete, ready, event, setpod
	pod     pod.Key
	id      string // the container or sandbox acted on; empty for a failed start
	name    string // container name
	kind    pod.ContainerKind
	attempt int
	grace   time.Duration
	hook    string // postStart or preStop
	err     error
	at      time.Time // fake time of the call
	event   pod.Event
	status  *v1.Pod
}

// String gives the call in the short form the tests compare.
func (c call) String() string {
	switch c.op {
	case "create":
		return "create " + c.id
	case "start":
		s := fmt.Sprintf("start %s %s#%d", c.kind, c.name, c.attempt)
		if c.err != nil {
			s += " failed"
		}
		return s
	case "stop":
		return fmt.Sprintf("stop %s %v", c.id, c.grace)
	case "hook":
		s := fmt.Sprintf("hook %s %s", c.hook, c.id)
		if c.err != nil {
			s += " failed"
		}
		return s
	case "remove":
		return "remove " + c.id
	case "resume":
		s := "resume " + c.id
		if c.err != nil {
			s += " failed"
		}
		return s
	case "files", "delete":
		return c.op + " " + c.pod.String()
	case "volumes":
		return "volumes " + c.id
	case "pull":
		s := "pull " + c.name
		if c.err != nil {
			s += " failed"
		}
		return s
	case "event":
		return "event " + c.event.Reason + " " + c.event.Container
	}
	return c.op
}

// callLog is the ordered record of calls, shared by the fake runtime and
// the fake reporter so that tests can check their relative order.
type callLog struct {
	mu    sync.Mutex
	calls []call
}

func (l *callLog) add(c call) {
	c.at = time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

func (l *callLog) all() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// mutations are the ops that change the runtime or remove a pod.
var mutations = []string{"create", "start", "resume", "stop", "hook", "remove", "files", "delete"}

// fakeRuntime is an in-memory Runtime. It behaves as the sandbox package
// does where the reconciler can tell: stopping or removing what is gone
// succeeds, stopping a running task makes it exit (143 for a container, 0
// for the pause process) and reports the exit as containerd's event stream
// would. It notes anything a real runtime would object to in problems.
type fakeRuntime struct {
	log   *callLog
	exits chan<- pod.TaskExit // where exits are reported; nil for nowhere

	// mu guards the fields below.
	mu        sync.Mutex
	recs      map[string]*pod.Record
	order     map[string]int // creation order of each ID
	seq       int
	startErr  map[string]error // StartContainer of this container name fails
	createErr error            // CreateSandbox fails
	// sbStartErr makes StartSandbox fail as a pause process that exits
	// at once does; unpinned makes sandboxes as staticlet did before it
	// pinned namespaces.
	sbStartErr error
	unpinned   bool
	// noPause makes the sandboxes of pods not sharing a PID namespace as
	// the runtime does: without a pause process, up once made.
	noPause   bool
	filesErrs int                 // RemovePodFiles fails this many more times
	hooks     map[string]fakeHook // how RunHook behaves, by "<hook> <container name>"
	problems  []string
	// Images: all are present but those in missing; a pull of an image in
	// pullErr fails, and every pull waits for pullGate when it is not nil.
	missing  map[string]bool
	pullErr  map[string]error
	pullGate chan struct{}
	// sandboxStopGate, when not nil, holds every stop of a running
	// sandbox until it is closed.
	sandboxStopGate chan struct{}
	// removeGate, when not nil, holds every removal until it is closed.
	removeGate chan struct{}
	// stopGates holds every stop of a running container of a pod until
	// the pod's channel is closed.
	stopGates map[pod.Key]chan struct{}
	sweeps    int // SweepOrphans calls
	// resumeErr, when set, makes ResumeContainer fail.
	resumeErr error
}

// fakeHook is how one lifecycle hook behaves in the fake runtime.
type fakeHook struct {
	takes time.Duration // of fake time, unless ctx ends first
	err   error
}

func newFakeRuntime(log *callLog, exits chan<- pod.TaskExit) *fakeRuntime {
	return &fakeRuntime{log: log, exits: exits, recs: map[string]*pod.Record{}, order: map[string]int{}, startErr: map[string]error{},
		hooks: map[string]fakeHook{}, missing: map[string]bool{}, pullErr: map[string]error{}}
}

func (f *fakeRuntime) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s-%d", prefix, f.seq)
}

// created is a creation time for the record just numbered: the fake clock
// stands still while the reconciler works, so the sequence number is added
// to keep creation times in order, as containerd's are.
func (f *fakeRuntime) created() time.Time {
	return time.Now().Add(time.Duration(f.seq))
}

// add stores rec as it is; the caller holds mu.
func (f *fakeRuntime) add(rec pod.Record) {
	f.seq++
	r := rec
	f.recs[r.ID] = &r
	f.order[r.ID] = f.seq
}

// seed puts records in the runtime, as a previous staticlet left them.
func (f *fakeRuntime) seed(recs ...pod.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs {
		f.add(r)
	}
}

func (f *fakeRuntime) sorted(keep func(*pod.Record) bool) []pod.Record {
	var out []pod.Record
	for _, r := range f.recs {
		if keep(r) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b pod.Record) int { return f.order[a.ID] - f.order[b.ID] })
	return out
}

func (f *fakeRuntime) PodContainers(ctx context.Context, key pod.Key) ([]pod.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sorted(func(r *pod.Record) bool { return r.Pod == key }), nil
}

func (f *fakeRuntime) AllContainers(ctx context.Context) ([]pod.Record, error) {
	f.log.add(call{op: "list"})
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sorted(func(*pod.Record) bool { return true }), nil
}

func (f *fakeRuntime) CreateSandbox(ctx context.Context, p *pod.Pod) (pod.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.createErr != nil {
		f.log.add(call{op: "create", pod: p.Key(), err: f.createErr})
		return pod.Record{}, f.createErr
	}
	for _, r := range f.recs {
		if r.Pod == p.Key() && r.State == pod.TaskRunning {
			f.problems = append(f.problems, fmt.Sprintf("sandbox of %s created while %s (%s) still runs", p.Key(), r.ID, r.Kind))
		}
	}
	id := f.newID("sb")
	rec := pod.Record{
		ID: id, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindSandbox, Hash: p.SandboxHash,
		State: pod.TaskCreated, CreatedAt: f.created(), StartedAt: time.Now(), Pinned: !f.unpinned,
	}
	if f.noPause && !sharesPID(p) {
		rec.State, rec.NoPause = pod.TaskRunning, true
	}
	f.recs[rec.ID] = &rec
	f.order[rec.ID] = f.seq
	f.log.add(call{op: "create", pod: p.Key(), id: rec.ID})
	return rec, nil
}

// StartSandbox is logged as "sbstart", which is no mutation: the
// reconciler runs it beside the containers' starts, so its place among
// them is not fixed. A pinned sandbox whose pause exited starts again in
// place, as with the real runtime.
func (f *fakeRuntime) StartSandbox(ctx context.Context, sb pod.Record) (pod.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[sb.ID]
	if ok && r.NoPause {
		f.problems = append(f.problems, fmt.Sprintf("sandbox %s, without a pause process, started", sb.ID))
		return *r, nil
	}
	if !ok || (r.State != pod.TaskCreated && !(r.State == pod.TaskExited && r.Pinned)) {
		f.problems = append(f.problems, fmt.Sprintf("sandbox %s started when not freshly created nor pinned and exited", sb.ID))
		return sb, fmt.Errorf("sandbox %s cannot start", sb.ID)
	}
	if err := f.sbStartErr; err != nil {
		f.log.add(call{op: "sbstart", pod: r.Pod, id: r.ID, err: err})
		r.State, r.ExitCode, r.FinishedAt, r.Message, r.Pid = pod.TaskExited, 3, time.Now(), "boom", 0
		return *r, err
	}
	f.seq++
	r.State, r.Pid, r.StartedAt, r.FinishedAt, r.ExitCode, r.Message = pod.TaskRunning, uint32(f.seq), time.Now(), time.Time{}, 0, ""
	f.log.add(call{op: "sbstart", pod: r.Pod, id: r.ID})
	return *r, nil
}

// SyncVolumes records the call: the fake writes no files.
func (f *fakeRuntime) SyncVolumes(ctx context.Context, p *pod.Pod, sb pod.Record) error {
	f.log.add(call{op: "volumes", pod: p.Key(), id: sb.ID})
	return nil
}

// missingObject returns the configuration error the runtime gives a
// container of p whose ConfigMap or Secret is missing, or nil.
func missingObject(p *pod.Pod) error {
	for _, r := range p.ObjectRefs() {
		if !r.Optional && p.Object(r.Kind, r.Name) == nil {
			return &pod.WaitingError{Reason: "CreateContainerConfigError", Err: fmt.Errorf("%s %q not found", strings.ToLower(r.Kind), r.Name)}
		}
	}
	return nil
}

func (f *fakeRuntime) setSandboxStartErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sbStartErr = err
}

func (f *fakeRuntime) StartContainer(ctx context.Context, req pod.ContainerRequest) (pod.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{op: "start", pod: req.Pod.Key(), name: req.Container.Name, kind: req.Kind, attempt: req.Attempt}
	sb, ok := f.recs[req.Sandbox.ID]
	switch {
	case !ok || (sb.State == pod.TaskExited && (!sb.Pinned || sharesPID(req.Pod))):
		c.err = fmt.Errorf("sandbox %s is not there to join", req.Sandbox.ID)
	case f.startErr[req.Container.Name] != nil:
		c.err = f.startErr[req.Container.Name]
	case missingObject(req.Pod) != nil:
		c.err = missingObject(req.Pod)
	}
	if c.err == nil && sharesPID(req.Pod) && sb.State != pod.TaskRunning {
		f.problems = append(f.problems, fmt.Sprintf("container %s of a pod sharing its PID namespace started before its sandbox", req.Container.Name))
	}
	if c.err != nil {
		f.log.add(c)
		return pod.Record{}, c.err
	}
	for _, r := range f.recs {
		if r.SandboxID == sb.ID && r.Name == req.Container.Name && r.State == pod.TaskRunning {
			f.problems = append(f.problems, fmt.Sprintf("container %s started while %s still runs", req.Container.Name, r.ID))
		}
	}
	rec := pod.Record{
		ID: f.newID(req.Container.Name), Pod: req.Pod.Key(), PodUID: string(req.Pod.UID), Kind: req.Kind,
		Name: req.Container.Name, Hash: pod.ContainerHash(req.Container), Attempt: req.Attempt, SandboxID: sb.ID,
		Image: req.Container.Image, ImageID: "sha256:" + req.Container.Image,
		State: pod.TaskRunning, Pid: uint32(100 + f.seq), CreatedAt: f.created(), StartedAt: time.Now(),
	}
	f.recs[rec.ID] = &rec
	f.order[rec.ID] = f.seq
	c.id = rec.ID
	f.log.add(c)
	return rec, nil
}

// ResumeContainer starts a created container, or fails as set by
// resumeErr. It is logged as "resume <id>".
func (f *fakeRuntime) ResumeContainer(ctx context.Context, id string) (pod.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{op: "resume", id: id, err: f.resumeErr}
	r, ok := f.recs[id]
	if c.err == nil && (!ok || r.State != pod.TaskCreated) {
		f.problems = append(f.problems, fmt.Sprintf("container %s resumed when not half started", id))
		c.err = fmt.Errorf("container %s cannot be resumed", id)
	}
	f.log.add(c)
	if c.err != nil {
		return pod.Record{}, c.err
	}
	r.State, r.Pid, r.StartedAt = pod.TaskRunning, uint32(100+f.seq), time.Now()
	return *r, nil
}

func (f *fakeRuntime) ImageNeedsPull(ctx context.Context, c *v1.Container) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch c.ImagePullPolicy {
	case v1.PullAlways:
		return true, "", nil
	case v1.PullNever:
		return false, "", nil
	}
	return f.missing[c.Image], "", nil
}

// PullImage is logged as "pull <image>", with " failed" when it fails.
func (f *fakeRuntime) PullImage(ctx context.Context, c *v1.Container) (bool, error) {
	f.mu.Lock()
	gate := f.pullGate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.pullErr[c.Image]
	f.log.add(call{op: "pull", name: c.Image, err: err})
	if err != nil {
		return c.ImagePullPolicy == v1.PullAlways && !f.missing[c.Image], err
	}
	delete(f.missing, c.Image)
	return false, nil
}

// setImage makes image present or missing, and its pulls fail with
// pullErr when that is not nil.
func (f *fakeRuntime) setImage(image string, present bool, pullErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.missing[image] = !present
	f.pullErr[image] = pullErr
}

// passGate waits, f.mu released meanwhile, until gate (nil: none) is
// closed or ctx is done. f.mu is held on return.
func (f *fakeRuntime) passGate(ctx context.Context, gate chan struct{}) error {
	if gate == nil {
		return nil
	}
	f.mu.Unlock()
	defer f.mu.Lock()
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeRuntime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	f.mu.Lock()
	if r, ok := f.recs[id]; ok && r.State == pod.TaskRunning {
		gate := f.stopGates[r.Pod]
		if r.Kind == pod.KindSandbox {
			gate = f.sandboxStopGate
		}
		if err := f.passGate(ctx, gate); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	c := call{op: "stop", id: id, grace: grace}
	if ok {
		c.pod, c.name, c.kind = r.Pod, r.Name, r.Kind
	}
	f.log.add(c)
	if !ok || r.State != pod.TaskRunning {
		return nil
	}
	code := int32(143)
	if r.Kind == pod.KindSandbox {
		code = 0
	}
	f.exitLocked(r, code)
	return nil
}

// RunHook logs the hook once it has ended, after the time its fakeHook
// takes (or when ctx ends first), with its error.
func (f *fakeRuntime) RunHook(ctx context.Context, id string, req pod.ContainerRequest, h *v1.LifecycleHandler) error {
	which := "handler"
	if l := req.Container.Lifecycle; l != nil && h == l.PostStart {
		which = "postStart"
	} else if l != nil && h == l.PreStop {
		which = "preStop"
	}
	f.mu.Lock()
	behave := f.hooks[which+" "+req.Container.Name]
	r, ok := f.recs[id]
	if !ok || r.State != pod.TaskRunning {
		f.problems = append(f.problems, fmt.Sprintf("%s hook run in %s, which is not running", which, id))
	}
	f.mu.Unlock()
	c := call{op: "hook", pod: req.Pod.Key(), id: id, name: req.Container.Name, kind: req.Kind, hook: which, err: behave.err}
	if behave.takes > 0 {
		t := time.NewTimer(behave.takes)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			c.err = ctx.Err()
		}
	}
	f.log.add(c)
	return c.err
}

func (f *fakeRuntime) setHook(hook, name string, h fakeHook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks[hook+" "+name] = h
}

func (f *fakeRuntime) RemoveContainer(ctx context.Context, id string) error {
	f.mu.Lock()
	if err := f.passGate(ctx, f.removeGate); err != nil {
		f.mu.Unlock()
		return err
	}
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	c := call{op: "remove", id: id}
	if ok {
		c.pod, c.name, c.kind = r.Pod, r.Name, r.Kind
		if r.State == pod.TaskRunning {
			f.problems = append(f.problems, fmt.Sprintf("%s removed while running", id))
		}
	}
	f.log.add(c)
	delete(f.recs, id)
	return nil
}

func (f *fakeRuntime) RemovePodFiles(ctx context.Context, namespace, name, uid string) error {
	f.log.add(call{op: "files", pod: pod.Key{Namespace: namespace, Name: name}, id: uid})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.filesErrs > 0 {
		f.filesErrs--
		return errors.New("slice still busy")
	}
	return nil
}

// exitLocked makes r's process exit with code and reports it.
// SweepOrphans finds nothing: the fake runtime has no processes or files
// that records do not lead to. It counts its calls.
func (f *fakeRuntime) SweepOrphans(ctx context.Context, keep func(uid string) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	return nil
}

func (f *fakeRuntime) exitLocked(r *pod.Record, code int32) {
	r.State = pod.TaskExited
	r.ExitCode = code
	r.FinishedAt = time.Now()
	r.Pid = 0
	if f.exits == nil {
		return
	}
	select {
	case f.exits <- pod.TaskExit{ContainerID: r.ID, Pod: r.Pod, ExitCode: uint32(code), ExitedAt: r.FinishedAt}:
	default:
		f.problems = append(f.problems, "exit of "+r.ID+" dropped: the exits channel is full")
	}
}

// exit makes the process of container id exit with code, as if it crashed
// or finished.
func (f *fakeRuntime) exit(t *testing.T, id string, code int32) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok || r.State != pod.TaskRunning {
		t.Fatalf("exit(%s): no such running container", id)
	}
	f.exitLocked(r, code)
}

// reboot is the node restarting under sandbox id, which has no pause
// process: it is gone, and so is every process of its pod, lost (137,
// told of by no exit event, as containerd finds no task after a reboot).
func (f *fakeRuntime) reboot(t *testing.T, id string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.recs[id]
	if !ok || !sb.NoPause {
		t.Fatalf("reboot(%s): no such sandbox without a pause process", id)
	}
	sb.State, sb.Pinned, sb.Message = pod.TaskExited, false, "the node restarted since the sandbox was made"
	for _, r := range f.recs {
		if r.SandboxID == id && r.State == pod.TaskRunning {
			r.State, r.ExitCode, r.Lost, r.FinishedAt, r.Pid = pod.TaskExited, 137, true, time.Now(), 0
		}
	}
}

// oomKill has the kernel's OOM killer kill the process of container id:
// its runtime first tells of the kill, then of the exit, 137.
func (f *fakeRuntime) oomKill(t *testing.T, id string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok || r.State != pod.TaskRunning {
		t.Fatalf("oomKill(%s): no such running container", id)
	}
	r.OOMKilled = true
	f.exits <- pod.TaskExit{ContainerID: r.ID, Pod: r.Pod, OOM: true}
	f.exitLocked(r, 137)
}

// newest returns the newest record of container name ("" for the sandbox)
// of pod key.
func (f *fakeRuntime) newest(t *testing.T, key pod.Key, name string) pod.Record {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	recs := f.sorted(func(r *pod.Record) bool { return r.Pod == key && r.Name == name })
	if len(recs) == 0 {
		t.Fatalf("no container %q of %s in the runtime", name, key)
	}
	return recs[len(recs)-1]
}

func (f *fakeRuntime) records(key pod.Key) []pod.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sorted(func(r *pod.Record) bool { return r.Pod == key })
}

func (f *fakeRuntime) setStartErr(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.startErr, name)
		return
	}
	f.startErr[name] = err
}

func (f *fakeRuntime) setCreateErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.createErr = err
}

// fakeReporter records what the reconciler reports; it is safe for
// concurrent use, as workers report from their own goroutines.
type fakeReporter struct {
	log *callLog

	// mu guards the fields below.
	mu      sync.Mutex
	pods    map[pod.Key]*v1.Pod
	deleted []pod.Key
	events  []pod.Event
	ready   int
}

func newFakeReporter(log *callLog) *fakeReporter {
	return &fakeReporter{log: log, pods: map[pod.Key]*v1.Pod{}}
}

func (r *fakeReporter) SetPod(p *v1.Pod) {
	r.log.add(call{op: "setpod", pod: pod.Key{Namespace: p.Namespace, Name: p.Name}, status: p})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods[pod.Key{Namespace: p.Namespace, Name: p.Name}] = p
}

func (r *fakeReporter) DeletePod(key pod.Key) {
	r.log.add(call{op: "delete", pod: key})
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, key)
	r.deleted = append(r.deleted, key)
}

func (r *fakeReporter) Event(e pod.Event) {
	r.log.add(call{op: "event", event: e})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *fakeReporter) SetReady() {
	r.log.add(call{op: "ready"})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready++
}

// pod returns the last status reported for key, or nil.
func (r *fakeReporter) pod(key pod.Key) *v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[key]
}

// eventsWith returns the events with reason, in order.
func (r *fakeReporter) eventsWith(reason string) []pod.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pod.Event
	for _, e := range r.events {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func (r *fakeReporter) readyCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready
}

// harness runs a Reconciler against the fakes inside a synctest bubble.
type harness struct {
	t       *testing.T
	log     *callLog
	rt      *fakeRuntime
	rep     *fakeReporter
	desired chan []*pod.Pod
	exits   chan pod.TaskExit
	// verdicts is where a test plays the prober.
	verdicts chan pod.ProbeVerdict
	prober   *fakeProber
	// rec is the Reconciler under test; stop cancels its Run, whose
	// result runErr holds once runDone is closed.
	rec     *Reconciler
	stop    context.CancelFunc
	runDone chan struct{}
	runErr  error
}

// fakeProber records what the reconciler asks to be probed.
type fakeProber struct {
	mu      sync.Mutex
	targets map[pod.Key][]pod.ProbeTarget
}

func (f *fakeProber) Set(key pod.Key, targets []pod.ProbeTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(targets) == 0 {
		delete(f.targets, key)
		return
	}
	f.targets[key] = slices.Clone(targets)
}

// probed returns the containers of key being probed, by name: their IDs.
func (f *fakeProber) probed(key pod.Key) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for _, t := range f.targets[key] {
		out[t.Container.Name] = t.ContainerID
	}
	return out
}

// newHarness makes the fakes, seeds the runtime with recs, and starts Run;
// Run is stopped and waited for when the test ends. It must be called
// inside synctest.Test.
func newHarness(t *testing.T, cfg Config, recs ...pod.Record) *harness {
	t.Helper()
	log := &callLog{}
	exits := make(chan pod.TaskExit, 256)
	h := &harness{
		t: t, log: log, exits: exits,
		rt:      newFakeRuntime(log, exits),
		rep:     newFakeReporter(log),
		desired: make(chan []*pod.Pod),

		verdicts: make(chan pod.ProbeVerdict),
		prober:   &fakeProber{targets: map[pod.Key][]pod.ProbeTarget{}},
	}
	h.rt.seed(recs...)
	cfg.Runtime, cfg.Reporter = h.rt, h.rep
	if cfg.Prober == nil {
		cfg.Prober = h.prober
	}
	if cfg.HostIPs == nil {
		cfg.HostIPs = []string{"10.0.0.5"}
	}
	h.rec = New(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	h.stop, h.runDone = cancel, make(chan struct{})
	go func() {
		defer close(h.runDone)
		h.runErr = h.rec.Run(ctx, h.desired, exits, h.verdicts)
	}()
	t.Cleanup(func() {
		cancel()
		<-h.runDone
		if h.runErr != nil {
			t.Errorf("Run = %v, want nil", h.runErr)
		}
		h.rt.mu.Lock()
		defer h.rt.mu.Unlock()
		for _, p := range h.rt.problems {
			t.Errorf("runtime misuse: %s", p)
		}
	})
	return h
}

// bubble runs f in a synctest bubble, so that backoff and resync timers run
// on a fake clock.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}

// set sends a desired set and waits for the reconciler to settle.
func (h *harness) set(pods ...*pod.Pod) {
	h.desired <- pods
	synctest.Wait()
}

// exit makes container id exit with code and waits for the reconciler to
// settle.
func (h *harness) exit(id string, code int32) {
	h.t.Helper()
	h.rt.exit(h.t, id, code)
	synctest.Wait()
}

// verdict hands the reconciler a probe verdict for the current container
// name of p and waits for it to settle.
func (h *harness) verdict(p *pod.Pod, name string, typ pod.ProbeType, res pod.ProbeResult, failed string) {
	h.t.Helper()
	id, ok := h.prober.probed(p.Key())[name]
	if !ok {
		h.t.Fatalf("container %s of %s is not being probed", name, p.Key())
	}
	h.verdicts <- pod.ProbeVerdict{Pod: p.Key(), Container: name, ContainerID: id, Type: typ, Result: res, Failed: failed, Time: time.Now()}
	synctest.Wait()
}

// sleep lets d of fake time pass.
func (h *harness) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// waitFor lets fake time pass in small steps until cond holds, failing the
// test if it does not within limit of fake time.
func (h *harness) waitFor(limit time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s did not happen within %v of fake time", what, limit)
		}
		h.sleep(10 * time.Millisecond)
	}
}

// mark returns a position in the call log, for since.
func (h *harness) mark() int { return len(h.log.all()) }

// since returns the calls after mark whose op is one of ops (all mutations
// when ops is empty).
func (h *harness) since(mark int, ops ...string) []call {
	if len(ops) == 0 {
		ops = mutations
	}
	var out []call
	for _, c := range h.log.all()[mark:] {
		if slices.Contains(ops, c.op) {
			out = append(out, c)
		}
	}
	return out
}

// ops is since, as strings.
func (h *harness) ops(mark int, ops ...string) []string {
	var out []string
	for _, c := range h.since(mark, ops...) {
		out = append(out, c.String())
	}
	return out
}

// wantOps checks the mutations after mark are exactly want, in order.
func (h *harness) wantOps(mark int, want ...string) {
	h.t.Helper()
	if got := h.ops(mark); !slices.Equal(got, want) {
		h.t.Errorf("calls = \n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// status returns the last status reported for p, failing if there is none.
func (h *harness) status(p *pod.Pod) *v1.Pod {
	h.t.Helper()
	st := h.rep.pod(p.Key())
	if st == nil {
		h.t.Fatalf("no status reported for %s", p.Key())
	}
	return st
}

// containerStatusOf returns the status of container name in st.
func containerStatusOf(t *testing.T, st *v1.Pod, name string) v1.ContainerStatus {
	t.Helper()
	for _, cs := range append(slices.Clone(st.Status.InitContainerStatuses), st.Status.ContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	t.Fatalf("no status of container %s in %s", name, st.Name)
	return v1.ContainerStatus{}
}

// runningRecs are the records of p running as specified in sandbox sb, as a
// previous staticlet would have left them, with attempt as restart count.
func runningRecs(p *pod.Pod, sb string, attempt int) []pod.Record {
	at := time.Now().Add(-time.Hour)
	out := []pod.Record{{ID: sb, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindSandbox, Hash: p.SandboxHash,
		State: pod.TaskRunning, CreatedAt: at, StartedAt: at}}
	for _, c := range p.Spec.Containers {
		out = append(out, pod.Record{ID: sb + "-" + c.Name, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindApp, Name: c.Name,
			Hash: pod.ContainerHash(&c), Attempt: attempt, SandboxID: sb, State: pod.TaskRunning, CreatedAt: at, StartedAt: at})
	}
	return out
}
