package sandbox

import (
	"net/netip"
	"strings"

	"github.com/staticlet/staticlet/internal/pod"
)

// podNetwork is what sandbox asks of the pod network (package podnet,
// whose Network has the details; a nil one is no network): a sandbox's
// addresses, link and hostPorts set up and torn down by its ID, and the
// IDs that hold any, to sweep those of sandboxes that are gone.
type podNetwork interface {
	// SetUp connects sandbox id of p, whose namespaces are pinned in
	// nsDir, and returns its addresses; on failure nothing of it is left.
	SetUp(id, nsDir string, p *pod.Pod) ([]netip.Prefix, error)
	// TearDown removes what SetUp made for sandbox id.
	TearDown(id string) error
	// Owners are the sandboxes that hold addresses or hostPort rules.
	Owners() ([]string, error)
	// Release gives back only the addresses id holds.
	Release(id string) error
}

// ipStrings are addrs' addresses without their lengths.
func ipStrings(addrs []netip.Prefix) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.Addr().String()
	}
	return out
}

// joinIPs is the value of LabelPodIPs.
func joinIPs(ips []string) string { return strings.Join(ips, ",") }
