package main

import (
	"context"
	"fmt"
	"time"

	"github.com/staticlet/staticlet/internal/reconcile"
	"github.com/staticlet/staticlet/internal/status"
)

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
