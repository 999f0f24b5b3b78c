package status

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Ready condition's reasons and messages, the kubelet's.
const (
	readyReason    = "KubeletReady"
	notReadyReason = "KubeletNotReady"
)

// nodeState is what the store knows of the node.
type nodeState struct {
	node       v1.Node
	conditions []v1.NodeCondition
}

// SetNode sets what the node object of GET /node says besides its
// conditions: its name, its creation (when staticlet started) and its
// info (kubeletVersion is staticlet's).
func (s *Store) SetNode(n v1.Node) {
	s.mu.Lock()
	n.Status.Conditions = nil
	s.node.node = n
	s.nodeChangedLocked()
	s.mu.Unlock()
	s.notify()
}

// SetNodeCondition sets the node condition of c's type, such as
// DiskPressure. The transition time is kept while the status stays as
// it was.
func (s *Store) SetNodeCondition(c v1.NodeCondition) {
	s.mu.Lock()
	i := slices.IndexFunc(s.node.conditions, func(have v1.NodeCondition) bool { return have.Type == c.Type })
	if i < 0 {
		s.node.conditions = append(s.node.conditions, c)
		s.nodeChangedLocked()
	} else {
		old := s.node.conditions[i]
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		if old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
			s.nodeChangedLocked()
		}
		s.node.conditions[i] = c
	}
	s.mu.Unlock()
	s.notify()
}

// Node returns the node as a core/v1 Node: what SetNode set, with a Ready
// condition (true once the store is ready) and the conditions
// SetNodeCondition set, in the kubelet's order.
func (s *Store) Node() *v1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.node.node.DeepCopy()
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
	n.ResourceVersion = strconv.FormatUint(s.revs.node, 10)
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: notReadyReason,
		Message: "staticlet is starting: the manifests or the first pass are not done", LastTransitionTime: n.CreationTimestamp}
	if s.ready {
		ready.Status, ready.Reason, ready.Message = v1.ConditionTrue, readyReason, "staticlet is running its pods"
		ready.LastTransitionTime = metav1.NewTime(s.readyAt)
	}
	// The condition was last said when it last changed: a heartbeat of
	// the moment would change the node at every read.
	ready.LastHeartbeatTime = ready.LastTransitionTime
	order := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
	conds := slices.Clone(s.node.conditions)
	slices.SortStableFunc(conds, func(a, b v1.NodeCondition) int {
		return conditionRank(order, a.Type) - conditionRank(order, b.Type)
	})
	n.Status.Conditions = append(conds, ready)
	return n
}

// conditionRank is t's place in order, after them all when not there.
func conditionRank(order []v1.NodeConditionType, t v1.NodeConditionType) int {
	if i := slices.Index(order, t); i >= 0 {
		return i
	}
	return len(order)
}

// pressureLocked names the node's conditions other than Ready that are
// true, such as DiskPressure, for the summary.
func (s *Store) pressureLocked() []string {
	var out []string
	for _, c := range s.node.conditions {
		if c.Type != v1.NodeReady && c.Status == v1.ConditionTrue {
			out = append(out, string(c.Type))
		}
	}
	return out
}

// node serves GET /node: the store's node, with its CDI devices added to
// its capacity and allocatable (see AddDeviceCapacity).
func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	n := s.cfg.Store.Node()
	if s.cfg.Devices != nil {
		AddDeviceCapacity(n, s.cfg.Devices().Devices)
	}
	s.writeJSON(w, r, http.StatusOK, n)
}

// AddDeviceCapacity adds the node's CDI devices to n's capacity and
// allocatable, a count per kind (see deviceCapacity), beside what the
// machine has.
func AddDeviceCapacity(n *v1.Node, devs []Device) {
	for name, q := range deviceCapacity(devs) {
		if n.Status.Capacity == nil {
			n.Status.Capacity = v1.ResourceList{}
		}
		if n.Status.Allocatable == nil {
			n.Status.Allocatable = v1.ResourceList{}
		}
		n.Status.Capacity[name], n.Status.Allocatable[name] = q, q.DeepCopy()
	}
}

// Node returns the node with its conditions (GET /node).
func (c *Client) Node(ctx context.Context) (*v1.Node, error) {
	var n v1.Node
	if err := c.getJSON(ctx, "/node", &n); err != nil {
		return nil, fmt.Errorf("getting the node: %w", err)
	}
	return &n, nil
}
