package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// The status of a pod stopped for a node shutdown, in the kubelet's words
// (pkg/kubelet/nodeshutdown).
const (
	nodeShutdownReason  = "Terminated"
	nodeShutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// haltOrder tells a worker to stop its pod for a node shutdown and to start
// nothing until the node resumes. Its worker closes done once the pod is
// stopped (or ctx ended first), after setting err.
type haltOrder struct {
	// ctx bounds the stops. It is not the worker's: a staticlet told to exit
	// in the middle of a node shutdown finishes the stops first.
	ctx context.Context
	// grace is the most any of the pod's containers gets, preStop hook
	// included; less when the pod's own grace period is shorter.
	grace time.Duration
	// begin is closed when the pod's group (regular or critical) may stop.
	begin <-chan struct{}
	done  chan struct{}
	err   error
}

// finished tells whether the order has been carried out.
func (o *haltOrder) finished() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// carriedOut is an order with nothing left to do, given to workers started
// while the node is shut down: they start nothing.
func carriedOut() *haltOrder {
	o := &haltOrder{done: make(chan struct{})}
	close(o.done)
	return o
}

// critical tells whether p is stopped last when the node shuts down: its
// priority is that of the system-cluster-critical class or above (the pod
// package resolves the two built-in class names), as the kubelet decides.
func critical(p *pod.Pod) bool {
	return p != nil && p.Spec.Priority != nil && *p.Spec.Priority >= pod.SystemClusterCriticalPriority
}

// ShutdownNode stops every pod for a node shutdown, as the kubelet's node
// shutdown manager does: first all regular pods, in parallel, each with
// its termination grace period cut to regular, preStop hooks included;
// once they are all gone, the critical pods the same way within critical.
// From then on no pod is restarted and no new pod started until
// ResumeNode. Each stopped pod reports phase Failed, reason Terminated. It
// returns when every pod is stopped, or when ctx ends. It may be called
// while Run runs, from any goroutine; stops under way finish even if Run's
// context ends meanwhile.
func (r *Reconciler) ShutdownNode(ctx context.Context, regular, critical time.Duration) error {
	regularTurn, criticalTurn := make(chan struct{}), make(chan struct{})
	var regulars, criticals []*haltOrder
	r.mu.Lock()
	r.halted = true
	for w := range r.live {
		o := &haltOrder{ctx: ctx, grace: regular, begin: regularTurn, done: make(chan struct{})}
		crit := w.critical()
		if crit {
			o.grace, o.begin = critical, criticalTurn
		}
		if !w.haltWith(o) {
			continue
		}
		if crit {
			criticals = append(criticals, o)
		} else {
			regulars = append(regulars, o)
		}
	}
	r.mu.Unlock()
	r.cfg.Logger.Info("node shutting down: stopping pods, regular ones first", "regular", len(regulars), "critical", len(criticals),
		"regular grace", regular, "critical grace", critical)

	close(regularTurn)
	err := waitOrders(ctx, regulars)
	// Critical pods go last, and go even if some regular pod failed to stop.
	close(criticalTurn)
	return errors.Join(err, waitOrders(ctx, criticals))
}

// waitOrders waits for every order to be carried out and joins their
// errors.
func waitOrders(ctx context.Context, orders []*haltOrder) error {
	var errs []error
	for _, o := range orders {
		select {
		case <-o.done:
			errs = append(errs, o.err)
		case <-ctx.Done():
			return fmt.Errorf("stopping pods for the node shutdown: %w", ctx.Err())
		}
	}
	return errors.Join(errs...)
}

// ResumeNode lets pods run again after ShutdownNode, when the node's
// shutdown was cancelled: each worker converges its pod afresh.
func (r *Reconciler) ResumeNode() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.halted {
		return
	}
	r.halted = false
	for w := range r.live {
		w.resume()
	}
	r.cfg.Logger.Info("node shutdown cancelled: pods run again")
}

// enlist records a new worker for ShutdownNode; one started while the node
// is shut down starts nothing.
func (r *Reconciler) enlist(w *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[*worker]bool{}
	}
	r.live[w] = true
	if r.halted {
		w.halt = carriedOut()
	}
}

// dismiss forgets a worker whose goroutine has returned.
func (r *Reconciler) dismiss(w *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, w)
}

// critical tells whether the worker's pod is a critical one.
func (w *worker) critical() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return critical(w.desired)
}

// haltWith hands the worker order o; false when its goroutine is gone.
func (w *worker) haltWith(o *haltOrder) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exited {
		return false
	}
	w.halt = o
	if w.hook != nil {
		// The container will be stopped: do not wait on its postStart hook.
		w.hook.cancel()
	}
	w.poke()
	return true
}

// resume lifts the worker's halt order and wakes it.
func (w *worker) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.halt = nil
	w.poke()
}

// halted returns the worker's halt order, nil when it runs its pod, and
// the desired pod.
func (w *worker) halted() (*haltOrder, *pod.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.halt, w.desired
}

// obey carries out halt order o, once: when the pod's turn comes, it stops
// every container of the pod through the worker's termination path,
// keeping their records for the status, and reports the pod as terminated
// by the node shutdown. Only the worker's goroutine calls it.
func (w *worker) obey(o *haltOrder, p *pod.Pod) {
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
	recs, err := w.rt.PodContainers(o.ctx, w.key)
	if err != nil {
		o.err = fmt.Errorf("listing the containers of pod %s for the node shutdown: %w", w.key, err)
		return
	}
	w.prober.Set(w.key, nil)
	grace := w.grace()
	if p != nil {
		grace = podGrace(p)
	}
	grace = min(grace, o.grace)
	if p != nil {
		w.event("", pod.EventNormal, "NodeShutdown", nodeShutdownMessage)
	}
	if err := w.stopAll(o.ctx, recs, grace, p, false); err != nil {
		o.err = fmt.Errorf("stopping pod %s for the node shutdown: %w", w.key, err)
	}
	if p == nil {
		return // a pod being removed: it goes, and has no status to report
	}
	if recs, err = w.rt.PodContainers(o.ctx, w.key); err != nil {
		o.err = errors.Join(o.err, fmt.Errorf("listing the containers of pod %s for the node shutdown: %w", w.key, err))
		return
	}
	v := newView(recs)
	sb, _ := v.current(p)
	st := buildPod(statusInput{pod: p, view: v, sandbox: sb, waiting: w.waiting, hostIP: w.hostIP, now: w.now()})
	shutDownStatus(&st.Status, w.now())
	w.rep.SetPod(st)
}

// shutDownStatus marks st as the status of a pod the node shutdown
// terminated, as the kubelet does: phase Failed, its reason and message,
// and a DisruptionTarget condition.
func shutDownStatus(st *v1.PodStatus, now time.Time) {
	st.Phase = v1.PodFailed
	st.Reason = nodeShutdownReason
	st.Message = nodeShutdownMessage
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1.PodReady || st.Conditions[i].Type == v1.ContainersReady {
			st.Conditions[i].Status = v1.ConditionFalse
			st.Conditions[i].Reason = "PodCompleted"
		}
	}
	st.Conditions = append(st.Conditions, v1.PodCondition{
		Type:               v1.DisruptionTarget,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             v1.PodReasonTerminationByKubelet,
		Message:            nodeShutdownMessage,
	})
}
