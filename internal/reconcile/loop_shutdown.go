package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// haltOrder tells a worker to stop its pod for a node shutdown and to start
// nothing until the node resumes. Its worker closes done once the pod is
// stopped (or ctx ended first), after setting err; ShutdownNode reads err
// only after done is closed.
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
	return p != nil && pod.Critical(&p.Spec)
}

// ShutdownNode stops every pod for a node shutdown, as the kubelet's node
// shutdown manager does: first all regular pods, each with its
// termination grace period cut to regular, preStop hooks included; once
// they are all gone, the critical pods the same way within critical.
// Within each group the pods stop at once, except that a pod that needs
// another stops before it (stopGraph); one whose turn does not come
// within its group's grace period stops anyway.
// From then on no pod is restarted and no new pod started until
// ResumeNode. Each stopped pod reports phase Failed, reason Terminated. It
// returns when every pod is stopped, or when ctx ends. It may be called
// while Run runs, from any goroutine: Run's loop hands the orders out;
// stops under way finish even if Run's context ends meanwhile.
func (r *Reconciler) ShutdownNode(ctx context.Context, regular, critical time.Duration) error {
	req := nodeRequest{shutdown: true, ctx: ctx, regular: regular, critical: critical, orders: make(chan shutdownOrders, 1)}
	var orders shutdownOrders
	select {
	case r.requests <- req:
		orders = <-req.orders
	case <-r.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping pods for the node shutdown: %w", ctx.Err())
	}
	r.cfg.Logger.Info("node shutting down: stopping pods, regular ones first", "regular", len(orders.regular), "critical", len(orders.critical),
		"regular grace", regular, "critical grace", critical)
	for _, h := range orders.regular {
		go sequence(ctx, orders.regularTurn, regular, orders.before[h], h, orders.starts[h])
	}
	for _, h := range orders.critical {
		go sequence(ctx, orders.criticalTurn, critical, orders.before[h], h, orders.starts[h])
	}
	close(orders.regularTurn)
	err := waitOrders(ctx, orders.regular)
	// Critical pods go last, and go even if some regular pod failed to stop.
	close(orders.criticalTurn)
	return errors.Join(err, waitOrders(ctx, orders.critical))
}

// ResumeNode lets pods run again after ShutdownNode, when the node's
// shutdown was cancelled: each worker converges its pod afresh.
func (r *Reconciler) ResumeNode() {
	select {
	case r.requests <- nodeRequest{}:
	case <-r.stopped:
	}
}

// nodeRequest asks Run's loop to shut the node down (shutdown set) or to
// resume it.
type nodeRequest struct {
	shutdown          bool
	ctx               context.Context
	regular, critical time.Duration
	orders            chan shutdownOrders // the loop's answer
}

// shutdownOrders are the halt orders the loop handed out, in two groups
// that start when their turn channel is closed. Within a group, an order
// begins once the orders in before are carried out (the pods that stop
// before its pod, see stopGraph), or its group's grace period is over:
// starts holds the channel that begins it.
type shutdownOrders struct {
	regularTurn, criticalTurn chan struct{}
	regular, critical         []*haltOrder
	before                    map[*haltOrder][]*haltOrder
	starts                    map[*haltOrder]chan struct{}
}

// serve carries out a node request.
func (l *loop) serve(req nodeRequest) {
	if !req.shutdown {
		if l.halted {
			l.halted = false
			for _, w := range l.workers {
				w.box.send(resumeMsg{})
			}
			l.r.cfg.Logger.Info("node shutdown cancelled: pods run again")
		}
		return
	}
	l.halted = true
	o := shutdownOrders{regularTurn: make(chan struct{}), criticalTurn: make(chan struct{}),
		before: map[*haltOrder][]*haltOrder{}, starts: map[*haltOrder]chan struct{}{}}
	orders := map[pod.Key]*haltOrder{}
	groups := map[bool][]pod.Key{} // by critical
	for key, w := range l.workers {
		start := make(chan struct{})
		h := &haltOrder{ctx: req.ctx, grace: req.regular, begin: start, done: make(chan struct{})}
		crit := critical(l.pods[key])
		if crit {
			h.grace = req.critical
		}
		if !w.box.send(haltMsg{h}) {
			continue
		}
		orders[key], o.starts[h] = h, start
		groups[crit] = append(groups[crit], key)
		if crit {
			o.critical = append(o.critical, h)
		} else {
			o.regular = append(o.regular, h)
		}
	}
	for _, group := range groups {
		graph := stopGraph(group, l.needsOf)
		for _, key := range group {
			for _, b := range graph[key] {
				o.before[orders[key]] = append(o.before[orders[key]], orders[b])
			}
		}
	}
	req.orders <- o
}

// sequence begins order h (closes start) once its group's turn came and
// the orders before it are carried out, or limit has passed since the
// turn, or ctx ended. A pod that waited gets what is left of its group's
// grace period (a second at least), so that a group with an order still
// ends within its grace period.
func sequence(ctx context.Context, turn <-chan struct{}, limit time.Duration, before []*haltOrder, h *haltOrder, start chan<- struct{}) {
	defer close(start)
	select {
	case <-turn:
	case <-ctx.Done():
		return
	}
	if len(before) == 0 {
		return
	}
	began := time.Now()
	defer func() { h.grace = min(h.grace, max(limit-time.Since(began), min(limit, time.Second))) }()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for _, b := range before {
		select {
		case <-b.done:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
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
