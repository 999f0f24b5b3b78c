package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// worker is the executor of one pod's core: its goroutine owns the core,
// feeds it what arrives in its mailbox, performs the actions the core
// returns and turns their outcomes back into the core's input. It decides
// nothing.
type worker struct {
	key    pod.Key
	core   *podCore
	rt     Runtime
	rep    Reporter
	prober Prober
	files  FileWatcher
	now    func() time.Time
	log    *slog.Logger
	box    *mailbox
	// notify tells the loop the pod's readiness changed.
	notify func(ready bool)
	// ended tells the loop that the processes of the pod being removed
	// ended: the pods that stop after it may begin, its clean-up going on.
	ended func()

	// order is the node shutdown order to obey, nil when none is.
	order *haltOrder
	// pending is set when something arrived that the next pass is to
	// look at.
	pending bool
	// cancelHook cuts short the postStart hook under way, if any.
	cancelHook context.CancelFunc
}

func newWorker(key pod.Key, cfg *Config) *worker {
	w := &worker{
		key:    key,
		core:   newCore(key, cfg.Backoff, cfg.HostIPs),
		rt:     cfg.Runtime,
		rep:    cfg.Reporter,
		prober: cfg.Prober,
		files:  cfg.Watcher,
		now:    cfg.Now,
		notify: func(bool) {},
		ended:  func() {},
		log:    cfg.Logger.With("pod", key.String()),
		box:    newMailbox(),
	}
	w.core.order.limit = cfg.AfterWait
	return w
}

// run is the worker's goroutine. It returns when ctx ends, leaving the pod
// running, or once a removed pod is completely gone.
func (w *worker) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if !w.pending {
			select {
			case <-ctx.Done():
				w.take()
				if w.order != nil {
					// A node shutdown under way is seen through before exiting.
					w.obey()
				}
				return
			case <-w.box.ready:
			case <-timer.C:
				w.pending = true
			}
		}
		w.take()
		if w.order != nil {
			w.obey()
		}
		if !w.pending {
			continue
		}
		w.pending = false
		start := time.Now()
		f := w.drive(ctx, w.core.begin(w.now()))
		w.log.Debug("synced pod", "took", time.Since(start), "again", f.again)
		if f.gone {
			if w.box.close() {
				return
			}
			// Something arrived meanwhile: take it, and look again.
			w.pending = true
		}
		if f.err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("syncing pod", "err", f.err)
			// Level-triggered: try again soon, whatever failed.
			if f.again == 0 || f.again > time.Second {
				f.again = time.Second
			}
		}
		if f.again > 0 {
			timer.Reset(f.again)
		}
	}
}

// take feeds the core what arrived in the mailbox, and cuts short a
// postStart hook the core no longer wants.
func (w *worker) take() {
	for _, m := range w.box.take() {
		switch m := m.(type) {
		case desiredMsg:
			w.core.setDesired(m.pod)
			w.pending = true
		case verdictMsg:
			if w.core.noteProbe(m.v) {
				w.pending = true
			}
		case imagesMsg:
			w.core.imagesArrived(m.names)
			w.pending = true
		case devicesMsg:
			if w.core.devicesFreed(m.kinds) {
				w.pending = true
			}
		case haltMsg:
			w.order = m.order
			w.core.setHalted(true)
			w.pending = true
		case resumeMsg:
			w.order = nil
			w.core.setHalted(false)
			w.pending = true
		case leavingMsg:
			w.core.setLeaving()
		case pokeMsg:
			w.pending = true
		case depsMsg:
			if w.core.setDeps(m.ready) {
				w.pending = true
			}
		case fileMsg:
			w.core.fileChanged(m.change.Container, m.change.Path)
			w.pending = true
		case restartMsg:
			w.core.askRestart(m.names)
			w.pending = true
		}
	}
	if w.cancelHook != nil && w.core.hookObsolete() {
		w.cancelHook()
	}
}

// drive performs acts, and what the core returns for their outcomes, until
// the pass finishes.
func (w *worker) drive(ctx context.Context, acts []action) finish {
	for {
		var io action
		for _, a := range acts {
			if io != nil {
				panic(fmt.Sprintf("reconcile: %T after the I/O action %T", a, io))
			}
			switch a := a.(type) {
			case emit:
				w.rep.Event(a.e)
			case report:
				w.rep.SetPod(a.pod)
			case forget:
				w.rep.DeletePod(w.key)
			case probe:
				w.prober.Set(w.key, a.targets)
			case watchFiles:
				w.files.Set(w.key, a.targets)
			case readiness:
				w.notify(a.ready)
			case note:
				if a.warn {
					w.log.Warn(a.msg, a.args...)
				} else {
					w.log.Info(a.msg, a.args...)
				}
			case finish:
				return a
			default:
				io = a
			}
		}
		if io == nil {
			return finish{} // no pass: the pod is halted
		}
		o := w.perform(ctx, io)
		if err := ctx.Err(); err != nil {
			w.core.abandon()
			return finish{err: err}
		}
		w.take()
		acts = w.core.step(o, w.now())
	}
}

// perform carries out an action that does I/O and returns its outcome.
func (w *worker) perform(ctx context.Context, a action) outcome {
	start := time.Now()
	if w.log.Enabled(ctx, slog.LevelDebug) {
		defer func() { w.log.Debug("performed", "action", fmt.Sprintf("%T", a), "took", time.Since(start)) }()
	}
	switch a := a.(type) {
	case listPod:
		recs, err := w.rt.PodContainers(ctx, w.key)
		return listed{recs: recs, err: err}
	case createSandbox:
		rec, err := w.rt.CreateSandbox(ctx, a.pod)
		return sandboxMade{rec: rec, err: err}
	case startSandbox:
		rec, err := w.rt.StartSandbox(ctx, a.sb)
		return sandboxStarted{rec: rec, err: err}
	case syncVolumes:
		return volumesSynced{err: w.rt.SyncVolumes(ctx, a.pod, a.sb)}
	case stopGroup:
		return w.stopGroup(ctx, a)
	case removeContainer:
		return removed{err: w.rt.RemoveContainer(ctx, a.id)}
	case resumeContainer:
		rec, err := w.rt.ResumeContainer(ctx, a.id)
		if err != nil {
			w.log.Debug("resuming a half-started container; starting a new one", "id", a.id, "err", err)
		}
		return resumed{rec: rec, err: err}
	case checkImage:
		need, from, err := w.rt.ImageNeedsPull(ctx, a.c)
		return imageChecked{need: need, from: from, err: err}
	case pullImage:
		present, err := w.rt.PullImage(ctx, a.c)
		return pulled{present: present, took: time.Since(start), err: err}
	case startContainer:
		rec, err := w.rt.StartContainer(ctx, a.req)
		return started{rec: rec, err: err}
	case postStart:
		return w.postStart(ctx, a)
	case removeFiles:
		fr := filesRemoved{failed: map[string]error{}}
		for _, uid := range a.uids {
			if err := w.rt.RemovePodFiles(ctx, w.key.Namespace, w.key.Name, uid); err != nil {
				fr.failed[uid] = err
				if !a.all {
					break
				}
				continue
			}
			fr.done = append(fr.done, uid)
		}
		return fr
	}
	panic(fmt.Sprintf("reconcile: no way to perform %T", a))
}

// postStart runs a postStart hook, and cuts it short when what arrives
// meanwhile makes it pointless.
func (w *worker) postStart(ctx context.Context, a postStart) hookRan {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.cancelHook = cancel
	defer func() { w.cancelHook = nil }()
	if w.core.hookObsolete() {
		cancel()
	}
	res := make(chan hookRan, 1)
	go func() {
		msg, err := w.runHook(hctx, a.rec.ID, a.req, a.req.Container.Lifecycle.PostStart)
		res <- hookRan{msg: msg, err: err}
	}()
	for {
		select {
		case h := <-res:
			h.abandoned = h.err != nil && ctx.Err() == nil && hctx.Err() != nil
			return h
		case <-w.box.ready:
			w.take()
		}
	}
}

// stopGroup stops the containers of g, each after its preStop hook: one
// after the other when g is sequential, else tier by tier.
func (w *worker) stopGroup(ctx context.Context, g stopGroup) stopped {
	var (
		mu  sync.Mutex
		out stopped
	)
	halt := func(s stopOrder) error {
		grace := s.grace
		if s.hook != nil {
			begun := time.Now()
			if msg, failed := w.preStop(ctx, s, grace); failed {
				mu.Lock()
				out.hookFailed = append(out.hookFailed, hookFailure{container: s.req.Container.Name, msg: msg})
				mu.Unlock()
			}
			grace = max(grace-time.Since(begun), minGraceAfterPreStop)
		}
		return w.rt.StopContainer(ctx, s.rec.ID, grace)
	}
	remove := func(s stopOrder) error {
		if !g.remove {
			return nil
		}
		return w.rt.RemoveContainer(ctx, s.rec.ID)
	}
	both := func(s stopOrder) error {
		err := halt(s)
		if err == nil {
			err = remove(s)
		}
		return err
	}
	if g.sequential {
		for _, s := range g.stops {
			if err := both(s); err != nil {
				out.err = err
				break
			}
		}
		return out
	}
	// App containers first, then init containers (sidecars, which serve
	// the app until it is gone), each tier in parallel. A pod being
	// removed then tells that its processes ended: the pods that stop
	// after it need not wait for its clean-up, which follows: those
	// containers' removal, then the sandbox's stop and removal.
	t := &stopTiers{stops: g.stops}
	halted := t.run(t.ofKind(pod.KindApp), halt)
	halted = append(halted, t.run(t.ofKind(pod.KindInit), halt)...)
	if g.remove && len(t.errs) == 0 {
		w.ended()
	}
	t.run(halted, remove)
	t.run(t.ofKind(pod.KindSandbox), both)
	out.err = errors.Join(t.errs...)
	return out
}

// stopTiers runs the stops of a group in tiers, each in parallel, and
// collects their errors.
type stopTiers struct {
	stops []stopOrder
	mu    sync.Mutex
	errs  []error
}

// ofKind returns the stops of containers of kind.
func (t *stopTiers) ofKind(kind pod.ContainerKind) []stopOrder {
	var out []stopOrder
	for _, s := range t.stops {
		if s.rec.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// run does do for each of stops at once, and returns those it did
// without an error.
func (t *stopTiers) run(stops []stopOrder, do func(stopOrder) error) (done []stopOrder) {
	var wg sync.WaitGroup
	for _, s := range stops {
		wg.Go(func() {
			err := do(s)
			t.mu.Lock()
			defer t.mu.Unlock()
			if err != nil {
				t.errs = append(t.errs, err)
				return
			}
			done = append(done, s)
		})
	}
	wg.Wait()
	return done
}

// preStop runs the preStop hook of stop order s for at most grace; it
// reports the hook's failure message, when it failed for a reason other
// than the grace period running out.
func (w *worker) preStop(ctx context.Context, s stopOrder, grace time.Duration) (string, bool) {
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	msg, err := w.runHook(hctx, s.rec.ID, s.req, s.hook)
	switch {
	case err == nil, ctx.Err() != nil:
		return "", false
	case hctx.Err() != nil:
		// The grace period is over: the stop signal follows at once.
		w.log.Info("preStop hook did not finish within the grace period", "container", s.req.Container.Name, "grace", grace)
		return "", false
	}
	return msg, true
}

// obey carries out the worker's halt order, once: when the pod's turn
// comes, it stops every container of the pod, keeping their records for
// the status, and reports the pod as terminated by the node shutdown.
func (w *worker) obey() {
	o := w.order
	if o.finished() {
		return
	}
	defer close(o.done)
	select {
	case <-o.begin:
	case <-o.ctx.Done():
		o.err = fmt.Errorf("stopping pod %s for the node shutdown: %w", w.key, o.ctx.Err())
		return
	}
	w.core.abandon()
	o.err = w.drive(o.ctx, w.core.beginHalt(o.grace)).err
}
