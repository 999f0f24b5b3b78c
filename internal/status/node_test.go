package status

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeConditions: GET /node serves the node with its conditions in
// the kubelet's order, DiskPressure keeps its transition time while it
// stays true, and ends the summary while it is true.
func TestNodeConditions(t *testing.T) {
	store := NewStore()
	start := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: start}})
	c := startServer(t, ServerConfig{Store: store})
	ctx := context.Background()

	t1, t2 := metav1.NewTime(start.Add(time.Minute)), metav1.NewTime(start.Add(2*time.Minute))
	store.SetNodeCondition(v1.NodeCondition{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "/r: full", LastTransitionTime: t1})
	store.SetNodeCondition(v1.NodeCondition{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "/r: fuller", LastTransitionTime: t2})
	store.SetReady()
	if got := store.Summary(); got != "0 pods; DiskPressure" {
		t.Errorf("Summary() under disk pressure = %q, want it to end with DiskPressure", got)
	}
	n, err := c.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Kind != "Node" || n.Name != "n1" || len(n.Status.Conditions) != 2 {
		t.Fatalf("Node() = %s %s with conditions %+v, want Node n1 with DiskPressure and Ready", n.Kind, n.Name, n.Status.Conditions)
	}
	dp, ready := n.Status.Conditions[0], n.Status.Conditions[1]
	if dp.Type != v1.NodeDiskPressure || dp.Status != v1.ConditionTrue || dp.Message != "/r: fuller" || !dp.LastTransitionTime.Equal(&t1) {
		t.Errorf("DiskPressure = %+v, want true since %v with the latest message", dp, t1)
	}
	if ready.Type != v1.NodeReady || ready.Status != v1.ConditionTrue || ready.LastHeartbeatTime.IsZero() || !ready.LastHeartbeatTime.Equal(&ready.LastTransitionTime) {
		t.Errorf("Ready = %+v, want true, last said when it turned true", ready)
	}

	store.SetNodeCondition(v1.NodeCondition{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastTransitionTime: t2})
	if got := store.Summary(); strings.Contains(got, "DiskPressure") {
		t.Errorf("Summary() once cleared = %q, want no DiskPressure", got)
	}
	n, err = c.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dp := n.Status.Conditions[0]; dp.Status != v1.ConditionFalse || !dp.LastTransitionTime.Equal(&t2) {
		t.Errorf("DiskPressure once cleared = %+v, want false since %v", dp, t2)
	}
}
