package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/staticlet/staticlet/internal/reconcile"
	"github.com/staticlet/staticlet/internal/status"
)

// checkShutdownGrace validates the two shutdown grace periods as the
// kubelet does: neither negative, the critical pods' part no longer than
// the whole, each zero or at least a second.
func checkShutdownGrace(total, critical time.Duration) error {
	switch {
	case total < 0 || critical < 0:
		return errors.New("must not be negative")
	case critical > total:
		return errors.New("the critical pods' part must not be longer than the whole")
	case (total > 0 && total < time.Second) || (critical > 0 && critical < time.Second):
		return errors.New("each must be zero or at least 1s")
	}
	return nil
}

// nodeShutdown is the reconciler as the node shutdown manager drives it;
// what it does leads the status summary systemd shows.
type nodeShutdown struct {
	rec   *reconcile.Reconciler
	store *status.Store
}

func (n nodeShutdown) ShutdownNode(ctx context.Context, regular, critical time.Duration) error {
	pods := len(n.store.Pods())
	noun := "pods"
	if pods == 1 {
		noun = "pod"
	}
	n.store.SetActivity(fmt.Sprintf("shutting down: stopping %d %s", pods, noun))
	err := n.rec.ShutdownNode(ctx, regular, critical)
	if err != nil {
		n.store.SetActivity("shut down: not every pod stopped in time")
		return err
	}
	n.store.SetActivity("shut down: pods stopped")
	return nil
}

func (n nodeShutdown) ResumeNode() {
	n.rec.ResumeNode()
	n.store.SetActivity("")
}
