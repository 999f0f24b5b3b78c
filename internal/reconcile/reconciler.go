// Package reconcile is staticlet's control loop. It compares the desired
// pods (whole sets from the sources) with what the runtime reports and
// drives each pod through its life: sandbox, init containers, app
// containers, restarts with backoff, replacement when a manifest changes,
// graceful termination, node shutdown and clean-up. It declares the
// runtime, prober and reporter it needs and owns no containerd code.
//
// It is a functional core with a thin shell. Each pod's decisions are
// made by a podCore, which is pure: it takes what happened (a new spec, a
// probe verdict, images that arrived, a node shutdown, the outcome of an
// action) and returns what to do as data (actions: create or start the
// sandbox, start, stop or remove a container, run a hook, emit an event,
// report a status, look again at time T). Its tests feed inputs and check
// the actions, with no goroutine, clock or runtime. A worker per pod is
// the executor: its goroutine owns the core, performs the actions and
// feeds their outcomes back, and takes everything else through a
// mailbox. Run's loop owns the workers; node shutdown and resume are
// requests into that loop. No state is shared behind a lock.
//
// File names say which side of that line a file is on. actions.go is the
// vocabulary the two speak. The pure core is core*.go (the podCore, where
// a pass stands, the decisions and the status it computes) and plan_*.go
// (its passes as named steps: sync, stop and halt, converging the
// containers, one container, the sandbox, restarts, start order). The
// shell is reconciler.go (Run and its loop), loop_*.go (the loop's
// parts: start and stop order, restarts, node shutdown), worker*.go (the
// executor and the hooks it runs) and mailbox.go.
//
// Reconciliation is level-triggered: every trigger (a new desired set, a
// task exit, a periodic resync) makes the pod's worker list the pod's
// containers again and converge; doing a step twice does nothing more.
// Nothing is stopped before the sources have been read once, and stopping
// staticlet stops no pod.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Runtime is what the reconciler needs of the container runtime.
type Runtime interface {
	PodContainers(ctx context.Context, key pod.Key) ([]pod.Record, error)
	AllContainers(ctx context.Context) ([]pod.Record, error)
	// CreateSandbox prepares a sandbox, namespaces included, without
	// starting it; containers may be started in it before StartSandbox,
	// unless they share its PID namespace.
	CreateSandbox(ctx context.Context, p *pod.Pod) (pod.Record, error)
	StartSandbox(ctx context.Context, sb pod.Record) (pod.Record, error)
	// SyncVolumes writes the files of p's configMap, secret and projected
	// volumes in its sandbox sb anew from p's objects, atomically, and
	// does nothing to files already as wanted; a volume whose object is
	// missing keeps what it has.
	SyncVolumes(ctx context.Context, p *pod.Pod, sb pod.Record) error
	// ImageNeedsPull tells whether container c's image is to be pulled
	// before it starts, as its pull policy says; from names where the
	// node had it when that is not the runtime's own image store (another
	// containerd namespace), "" otherwise.
	ImageNeedsPull(ctx context.Context, c *v1.Container) (need bool, from string, err error)
	// PullImage pulls c's image. When the pull fails but an image of that
	// name is present and may run instead, it returns the error with
	// present set.
	PullImage(ctx context.Context, c *v1.Container) (present bool, err error)
	// StartContainer starts a container; its image is pulled first if it
	// is missing, unless its policy is Never.
	StartContainer(ctx context.Context, req pod.ContainerRequest) (pod.Record, error)
	// ResumeContainer finishes the start of container id, created and
	// not started (an earlier staticlet died half way), and reports it
	// running, or exited if a start left under way ran it. An error means
	// it did not run, and may be removed and started anew.
	ResumeContainer(ctx context.Context, id string) (pod.Record, error)
	// StopContainer sends container id its stop signal, then SIGKILL once
	// grace has passed; it runs no hook.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RunHook runs lifecycle handler h, an exec or httpGet, of container
	// id, started for req; nil means it succeeded. ctx bounds it.
	RunHook(ctx context.Context, id string, req pod.ContainerRequest, h *v1.LifecycleHandler) error
	RemoveContainer(ctx context.Context, id string) error
	RemovePodFiles(ctx context.Context, namespace, name, uid string) error
	// SweepOrphans stops and removes what staticlet made that no
	// container leads to any more: shims that serve no task, and the
	// files of pods that have no container and that keep does not want.
	// It runs beside the workers, now and then.
	SweepOrphans(ctx context.Context, keep func(uid string) bool) error
}

// Reporter receives the observed state the reconciler computes.
type Reporter interface {
	SetPod(p *v1.Pod)
	DeletePod(key pod.Key)
	Event(e pod.Event)
	// SetReady is called once every source has been read and the first
	// reconcile pass issued.
	SetReady()
}

// Prober runs the probes of running containers. Set makes the probes of
// pod key run for exactly targets; it is idempotent and cheap when nothing
// changed. Its verdicts come back to Run on a channel.
type Prober interface {
	Set(key pod.Key, targets []pod.ProbeTarget)
}

// noProber runs no probe: containers count as started and, without a
// readiness probe, ready.
type noProber struct{}

func (noProber) Set(pod.Key, []pod.ProbeTarget) {}

// FileWatcher watches the files whose changes restart containers
// (staticlet.io/restart-on-change). Set makes it watch exactly targets for
// pod key; it is idempotent and cheap when nothing changed. Changes come
// back to Run on Config.FileChanges.
type FileWatcher interface {
	Set(key pod.Key, targets []pod.WatchTarget)
}

// noWatcher watches nothing.
type noWatcher struct{}

func (noWatcher) Set(pod.Key, []pod.WatchTarget) {}

// Config configures a Reconciler.
type Config struct {
	Runtime  Runtime
	Reporter Reporter
	// Prober runs the probes of running containers; none run when nil.
	Prober Prober
	// Backoff spaces restarts; zero fields take staticlet's defaults.
	Backoff Backoff
	// Resync is how often every pod is looked at with no trigger; default 20s.
	Resync time.Duration
	// HostIPs are the node's addresses, the primary first, reported as
	// hostIP and hostIPs (and podIP and podIPs under hostNetwork).
	HostIPs []string
	Logger  *slog.Logger
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// ImagesArrived carries the full names of images that became present
	// (imported from files): containers waiting for one of them retry at
	// once instead of after their backoff. Nil when nothing sends.
	ImagesArrived <-chan []string
	// DevicesFreed carries the kinds of CDI devices that containers just
	// gave back: containers waiting for devices of those kinds retry at
	// once. Nil when nothing sends.
	DevicesFreed <-chan []string
	// Watcher watches the files whose changes restart containers; none
	// are watched when nil. Its changes come on FileChanges.
	Watcher     FileWatcher
	FileChanges <-chan pod.FileChange
	// AfterWait is the longest a pod waits for the pods it starts after
	// (staticlet.io/after) to be Ready; 2 minutes by default.
	AfterWait time.Duration
}

// Reconciler runs the control loop.
type Reconciler struct {
	cfg       Config
	heartbeat atomic.Int64 // unix nanos of the loop's last turn
	// requests carries node shutdown and resume requests into Run's loop,
	// which owns the workers; stopped is closed when Run returns.
	requests chan nodeRequest
	stopped  chan struct{}
	// restarts carries restart requests (staticlet restart) into Run's
	// loop.
	restarts chan restartRequest
}

// New returns a Reconciler; it starts nothing.
func New(cfg Config) *Reconciler {
	if cfg.Backoff.Initial == 0 {
		cfg.Backoff.Initial = time.Second
	}
	if cfg.Backoff.Max == 0 {
		cfg.Backoff.Max = 5 * time.Minute
	}
	if cfg.Backoff.Reset == 0 {
		cfg.Backoff.Reset = 10 * time.Minute
	}
	if cfg.Resync == 0 {
		cfg.Resync = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Prober == nil {
		cfg.Prober = noProber{}
	}
	if cfg.Watcher == nil {
		cfg.Watcher = noWatcher{}
	}
	if cfg.AfterWait == 0 {
		cfg.AfterWait = defaultAfterWait
	}
	return &Reconciler{cfg: cfg, requests: make(chan nodeRequest), stopped: make(chan struct{}),
		restarts: make(chan restartRequest)}
}

// heartbeatPeriod is how often the loop turns with nothing else to do, so
// that Alive can tell a live loop from a stuck one.
const heartbeatPeriod = 2 * time.Second

// Alive tells whether the loop turned recently: the watchdog's question.
func (r *Reconciler) Alive() bool {
	return time.Since(r.Heartbeat()) < 5*heartbeatPeriod
}

// Heartbeat is when the loop last turned: zero before Run starts. While
// the loop is alive it is at most about heartbeatPeriod old.
func (r *Reconciler) Heartbeat() time.Time {
	nanos := r.heartbeat.Load()
	if nanos == 0 {
		return time.Time{}
	}
	return time.Unix(0, nanos)
}

// Run reconciles until ctx ends. desired carries whole sets of pods, the
// first once every source has been read; exits carries task exits (an
// empty ContainerID means exits may have been missed); verdicts carries
// the Prober's verdicts (nil when there is no prober). Pods keep running
// when Run returns.
func (r *Reconciler) Run(ctx context.Context, desired <-chan []*pod.Pod, exits <-chan pod.TaskExit, verdicts <-chan pod.ProbeVerdict) error {
	defer close(r.stopped)
	r.heartbeat.Store(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := newLoop(ctx, r)
	defer l.wg.Wait()
	defer l.rm.holds.Stop()

	// Nothing is started or stopped before the sources have been read once.
	var first []*pod.Pod
	for first == nil {
		select {
		case <-ctx.Done():
			return nil
		case req := <-r.requests:
			l.serve(req)
		case req := <-r.restarts:
			l.restart(req) // no pod is known yet
		case first = <-desired:
			if first == nil {
				first = []*pod.Pod{}
			}
		}
	}
	orphans, err := r.adopt(ctx, first)
	if err != nil {
		return err
	}
	l.adoptOrphans(orphans)
	l.apply(first)
	r.cfg.Reporter.SetReady()
	l.sweep()

	resync := time.NewTicker(r.cfg.Resync)
	defer resync.Stop()
	beat := time.NewTicker(heartbeatPeriod)
	defer beat.Stop()
	for {
		r.heartbeat.Store(time.Now().UnixNano())
		select {
		case <-ctx.Done():
			return nil
		case set := <-desired:
			l.apply(set)
		case e := <-exits:
			l.exit(e)
		case v := <-verdicts:
			l.verdict(v)
		case ch := <-r.cfg.FileChanges:
			if w, ok := l.workers[ch.Pod]; ok {
				w.box.send(fileMsg{ch})
			}
		case n := <-l.readyCh:
			if n.ended {
				l.noteEnded(n.key)
				continue
			}
			l.noteReady(n.key, n.ready)
		case w := <-l.done:
			l.gone(w)
		case <-l.rm.holds.C:
			l.release()
		case names := <-r.cfg.ImagesArrived:
			l.tellAll(imagesMsg{names})
		case kinds := <-r.cfg.DevicesFreed:
			l.tellAll(devicesMsg{kinds})
		case req := <-r.requests:
			l.serve(req)
		case req := <-r.restarts:
			l.restart(req)
		case <-resync.C:
			l.pokeAll()
			l.sweep()
		case <-beat.C:
		}
	}
}

// loop is the state of Run's loop, which only Run's goroutine touches:
// the workers, one per pod, what orders their starts and stops, and
// whether the node is shut down.
type loop struct {
	r       *Reconciler
	ctx     context.Context
	wg      sync.WaitGroup
	workers map[pod.Key]*worker
	// pods holds the pods as last desired, those being removed included.
	pods    map[pod.Key]*pod.Pod
	done    chan *worker   // workers whose goroutines returned
	readyCh chan readyNote // pods whose readiness changed, or processes ended
	book    *readyBook     // which pods are Ready
	rm      removals       // the pods being removed, and those waiting to be
	halted  bool           // the node is shutting down: pods stay stopped
	// wantUIDs are the UIDs of the desired pods, for sweeps running beside
	// the loop; set before any worker can make files for them.
	wantUIDs atomic.Pointer[map[string]bool]
	sweeping chan struct{} // holds a token while a sweep runs
}

// removals is the loop's record of the pods being removed, or waiting
// for their turn to be.
type removals struct {
	// removing holds the pods whose workers were told to remove them.
	removing map[pod.Key]bool
	// ended holds the pods being removed whose processes ended: for the
	// pods that stop after them, as good as gone.
	ended map[pod.Key]bool
	held  map[pod.Key]hold // removals waiting for pods that stop first
	holds *time.Timer      // fires when the first hold runs out
	// orphans holds what orders the stops of the pods found at start
	// with no manifest, read from their containers' labels.
	orphans map[pod.Key]pod.StopNeeds
}

// readyNote tells the loop a pod's readiness changed, or, with ended, that
// the processes of a pod being removed ended.
type readyNote struct {
	key   pod.Key
	ready bool
	ended bool
}

func newLoop(ctx context.Context, r *Reconciler) *loop {
	l := &loop{r: r, ctx: ctx, workers: map[pod.Key]*worker{}, pods: map[pod.Key]*pod.Pod{}, done: make(chan *worker),
		readyCh: make(chan readyNote), book: newReadyBook(), sweeping: make(chan struct{}, 1),
		rm: removals{removing: map[pod.Key]bool{}, ended: map[pod.Key]bool{}, held: map[pod.Key]hold{}, holds: time.NewTimer(time.Hour),
			orphans: map[pod.Key]pod.StopNeeds{}}}
	l.rm.holds.Stop()
	l.wantUIDs.Store(&map[string]bool{})
	return l
}

// start starts a worker for pod key, desired as p (nil: to be removed).
func (l *loop) start(key pod.Key, p *pod.Pod) { l.launch(key, p, false) }

// launch starts a worker for pod key, desired as p; a leaving one (p nil)
// starts nothing and waits for its removal to be ordered (remove).
func (l *loop) launch(key pod.Key, p *pod.Pod, leaving bool) {
	w := newWorker(key, &l.r.cfg)
	w.core.setDesired(p)
	if leaving {
		w.core.setLeaving()
	}
	w.pending = true
	if p != nil {
		w.core.setDeps(depsOf(p, l.book))
	}
	w.notify = func(ready bool) {
		select {
		case l.readyCh <- readyNote{key: key, ready: ready}:
		case <-l.ctx.Done():
		}
	}
	w.ended = func() {
		select {
		case l.readyCh <- readyNote{key: key, ended: true}:
		case <-l.ctx.Done():
		}
	}
	delete(l.rm.ended, key)
	if l.halted {
		// Started while the node is shut down: it starts nothing.
		w.order = carriedOut()
		w.core.setHalted(true)
	}
	l.workers[key] = w
	l.rm.removing[key] = p == nil && !leaving
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		w.run(l.ctx)
		select {
		case l.done <- w:
		case <-l.ctx.Done():
		}
	}()
}

// adoptOrphans starts a leaving worker for each pod found at start with
// no manifest, keeping what orders its stop: apply removes them with the
// other pods that go, in order.
func (l *loop) adoptOrphans(orphans map[pod.Key]pod.StopNeeds) {
	for key, needs := range orphans {
		l.rm.orphans[key] = needs
		l.launch(key, nil, true)
	}
}

// apply hands every worker its pod from a new desired set, starting
// workers for new pods, and has the pods no longer desired removed, in
// order.
func (l *loop) apply(set []*pod.Pod) {
	want := make(map[pod.Key]*pod.Pod, len(set))
	uids := make(map[string]bool, len(set))
	for _, p := range set {
		want[p.Key()] = p
		uids[string(p.UID)] = true
	}
	l.wantUIDs.Store(&uids)
	for key, p := range want {
		l.pods[key] = p
		delete(l.rm.held, key)
		if w, ok := l.workers[key]; !ok || !w.box.send(desiredMsg{p}) {
			l.start(key, p)
		}
		l.rm.removing[key] = false
		l.sendDeps(key)
	}
	var removed []pod.Key
	for key := range l.workers {
		if _, ok := want[key]; !ok && !l.rm.removing[key] && l.rm.held[key].before == nil {
			removed = append(removed, key)
		}
	}
	l.remove(removed)
}

// verdict tells the worker of a probe verdict's pod of it, and records
// its events.
func (l *loop) verdict(v pod.ProbeVerdict) {
	w, ok := l.workers[v.Pod]
	if !ok {
		return // a pod being created or gone: its next pass decides
	}
	for _, e := range probeEvents(v) {
		l.r.cfg.Reporter.Event(e)
	}
	w.box.send(verdictMsg{v})
}

// exit has the worker of the pod of a task that exited look again.
func (l *loop) exit(e pod.TaskExit) {
	switch w, ok := l.workers[e.Pod]; {
	case e.ContainerID == "":
		l.pokeAll()
	case ok:
		w.box.send(pokeMsg{})
	default:
		// A container of a pod no worker owns: clean it up.
		l.start(e.Pod, nil)
	}
}

// remove has the pods of keys removed: each once the pods that stop before
// it are gone (stopGraph), or its hold runs out. A held pod starts
// nothing meanwhile: its manifest is gone.
func (l *loop) remove(keys []pod.Key) {
	var stopping []pod.Key // the pods being removed, or about to be
	for key := range l.workers {
		if l.rm.removing[key] || slices.Contains(keys, key) || l.rm.held[key].before != nil {
			stopping = append(stopping, key)
		}
	}
	graph := stopGraph(stopping, l.needsOf)
	now := time.Now()
	for _, key := range keys {
		before := graph[key]
		if len(before) == 0 {
			l.tellRemove(key)
			continue
		}
		l.rm.held[key] = hold{before: before, until: now.Add(maxGrace(before, l.pods) + holdSlack)}
		l.workers[key].box.send(leavingMsg{})
		l.r.cfg.Logger.Info("pod stops after others", "pod", key.String(), "after", fmt.Sprint(before))
	}
	l.release()
}

// tellRemove tells the worker of key to remove its pod.
func (l *loop) tellRemove(key pod.Key) {
	delete(l.rm.held, key)
	w, ok := l.workers[key]
	if !ok {
		return
	}
	if !w.box.send(desiredMsg{nil}) {
		delete(l.workers, key)
		return
	}
	l.rm.removing[key] = true
}

// release removes the held pods whose turn came: those they waited for are
// gone, or the hold ran out. It arms the timer for the next to run out.
func (l *loop) release() {
	now := time.Now()
	var next time.Time
	for key, h := range l.rm.held {
		left := slices.DeleteFunc(slices.Clone(h.before), func(k pod.Key) bool {
			_, ok := l.workers[k]
			return !ok || l.rm.removing[k] && l.rm.ended[k]
		})
		if len(left) == 0 || !now.Before(h.until) {
			if len(left) > 0 {
				l.r.cfg.Logger.Warn("pods that stop first are not gone in time; stopping anyway", "pod", key.String(), "waiting for", fmt.Sprint(left))
			}
			l.tellRemove(key)
			continue
		}
		l.rm.held[key] = hold{before: left, until: h.until}
		if next.IsZero() || h.until.Before(next) {
			next = h.until
		}
	}
	l.rm.holds.Stop()
	if !next.IsZero() {
		l.rm.holds.Reset(max(next.Sub(now), time.Millisecond))
	}
}

// noteEnded records that the processes of pod key, being removed, ended,
// and releases the pods that waited for that.
func (l *loop) noteEnded(key pod.Key) {
	if l.rm.removing[key] {
		l.rm.ended[key] = true
		l.release()
	}
}

// gone forgets a worker whose goroutine returned, its pod removed.
func (l *loop) gone(w *worker) {
	if l.workers[w.key] != w {
		return
	}
	delete(l.workers, w.key)
	delete(l.pods, w.key)
	delete(l.rm.removing, w.key)
	delete(l.rm.ended, w.key)
	delete(l.rm.orphans, w.key)
	if l.book.ready[w.key] {
		l.noteReady(w.key, false)
	}
	l.book.forget(w.key)
	l.release()
}

// noteReady records pod key's readiness and tells the pods that start
// after it.
func (l *loop) noteReady(key pod.Key, ready bool) {
	if !l.book.note(key, ready) {
		return
	}
	for k, p := range l.pods {
		if slices.Contains(p.AfterKeys(), key) {
			l.sendDeps(k)
		}
	}
}

// sendDeps tells the worker of key whether the pods its pod starts after
// are Ready.
func (l *loop) sendDeps(key pod.Key) {
	w, ok := l.workers[key]
	if p := l.pods[key]; ok && p != nil && len(p.After()) > 0 && !l.rm.removing[key] {
		w.box.send(depsMsg{depsOf(p, l.book)})
	}
}

// tellAll sends msg to every worker.
func (l *loop) tellAll(msg message) {
	for _, w := range l.workers {
		w.box.send(msg)
	}
}

func (l *loop) pokeAll() {
	for _, w := range l.workers {
		w.box.send(pokeMsg{})
	}
}

// sweep removes, beside the workers, what staticlet made that no
// container leads to any more; one sweep at a time.
func (l *loop) sweep() {
	select {
	case l.sweeping <- struct{}{}:
	default:
		return // the last one is still at it
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() { <-l.sweeping }()
		keep := func(uid string) bool { return (*l.wantUIDs.Load())[uid] }
		if err := l.r.cfg.Runtime.SweepOrphans(l.ctx, keep); err != nil && l.ctx.Err() == nil {
			l.r.cfg.Logger.Warn("sweeping what no container leads to", "err", err)
		}
	}()
}

// adopt looks at every container staticlet has in the runtime and returns
// the pods that are no longer desired, with what orders their stops, read
// from the labels of their newest container that has them; desired pods
// are adopted by their workers' first pass, which finds their containers
// running and leaves them be.
func (r *Reconciler) adopt(ctx context.Context, desired []*pod.Pod) (map[pod.Key]pod.StopNeeds, error) {
	var recs []pod.Record
	for {
		var err error
		recs, err = r.cfg.Runtime.AllContainers(ctx)
		if err == nil {
			break
		}
		r.cfg.Logger.Warn("listing containers for adoption; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
	want := map[pod.Key]bool{}
	for _, p := range desired {
		want[p.Key()] = true
	}
	orphans := map[pod.Key]pod.StopNeeds{}
	newest := map[pod.Key]time.Time{} // of the record orphans' needs come from
	for _, rec := range recs {
		if want[rec.Pod] {
			continue
		}
		if _, ok := orphans[rec.Pod]; !ok {
			orphans[rec.Pod] = pod.StopNeeds{}
			r.cfg.Logger.Info("removing pod with no manifest", "pod", rec.Pod.String())
		}
		if rec.StopNeeds == "" || !rec.CreatedAt.After(newest[rec.Pod]) {
			continue
		}
		needs, err := pod.ParseStopNeeds(rec.StopNeeds)
		if err != nil {
			r.cfg.Logger.Warn("reading what orders the stop of a pod with no manifest; it stops at once", "pod", rec.Pod.String(), "err", err)
			continue
		}
		orphans[rec.Pod], newest[rec.Pod] = needs, rec.CreatedAt
	}
	if n := len(recs); n > 0 {
		r.cfg.Logger.Info(fmt.Sprintf("found %d containers at start", n), "orphaned pods", len(orphans))
	}
	return orphans, nil
}
