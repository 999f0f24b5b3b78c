// Package podnet owns the pod network: a host bridge with addresses for
// the pods off the host network (ipam), their veths, the nftables rules
// for masquerade and hostPorts (netns), and forwarding. What it made for a
// sandbox is found again from the sandbox's ID alone, so a restarted
// staticlet sweeps what a sandbox that is gone left. It knows nothing of
// containerd: package sandbox gives it sandbox IDs and pinned namespaces.
//
// A nil *Network is no network: its methods do nothing and succeed. A
// Network is safe for concurrent use for different sandboxes; it starts
// no goroutine.
package podnet

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/ipam"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// Config configures the pod network.
type Config struct {
	// Bridge is the host bridge's name.
	Bridge string
	// CIDRs are the pod ranges: one IPv4, one IPv6, or one of each.
	CIDRs []netip.Prefix
	// Masquerade makes pods' traffic to outside their range leave with the
	// host's address.
	Masquerade bool
	// NftTable names the nftables table (family inet) of staticlet's
	// rules.
	NftTable string
	// HostNS is the network namespace of the bridge, veths and rules;
	// empty means staticlet's own. For tests.
	HostNS string
	// StepPause, a testing hook, pauses between the steps of a pod's
	// network setup, so a test can kill staticlet in the middle.
	StepPause time.Duration
}

// Network connects pods to the host bridge. What it made for a sandbox
// is found again from the sandbox's ID alone: the address files name it,
// the veth's name derives from it, the hostPort rules carry it.
type Network struct {
	bridge netns.Bridge
	nat    netns.NAT
	ipam   *ipam.Pool
	pause  time.Duration
}

// New sets up the host side: the bridge with its gateways, the nftables
// table, and forwarding when pods' traffic is masqueraded; addresses are
// recorded under rootDir (network/ipam/). A nil cfg is no network: New
// returns a nil *Network.
func New(rootDir string, cfg *Config, logger *slog.Logger) (*Network, error) {
	if cfg == nil {
		return nil, nil
	}
	if len(cfg.CIDRs) == 0 {
		return nil, errors.New("pod network: no pod CIDR")
	}
	pool, err := ipam.New(filepath.Join(rootDir, "network", "ipam"), cfg.CIDRs)
	if err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	n := &Network{
		bridge: netns.Bridge{HostNS: cfg.HostNS, Name: cfg.Bridge, Gateways: pool.Gateways()},
		nat:    netns.NAT{HostNS: cfg.HostNS, Table: cfg.NftTable, Bridge: cfg.Bridge},
		ipam:   pool,
		pause:  cfg.StepPause,
	}
	if err := n.bridge.Ensure(); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	if slices.ContainsFunc(cfg.CIDRs, func(p netip.Prefix) bool { return p.Addr().Is4() }) {
		// hostPorts on 127.0.0.1, as the kubelet's portmap plugin has them.
		// A node that will not let the setting change (a read-only
		// /proc/sys, in a container) still runs pods: only that goes.
		changed, err := netns.EnableRouteLocalnet(cfg.HostNS, cfg.Bridge)
		if err != nil {
			logger.Warn("hostPorts will not answer on 127.0.0.1", "err", err)
		}
		for _, f := range changed {
			logger.Info("let hostPorts answer on 127.0.0.1", "sysctl", f)
		}
	}
	var masq []netip.Prefix
	v6 := false
	if cfg.Masquerade {
		masq = pool.Prefixes()
		for _, p := range masq {
			v6 = v6 || p.Addr().Is6()
		}
		changed, err := netns.EnableForwarding(cfg.HostNS, v6)
		if err != nil {
			return nil, fmt.Errorf("pod network: %w", err)
		}
		for _, f := range changed {
			logger.Info("enabled forwarding for the pod network", "sysctl", f)
		}
	}
	if err := n.nat.Ensure(masq); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	return n, nil
}

// SetUp gives sandbox id of pod p, whose namespaces are pinned in nsDir,
// its addresses, its link to the bridge and its hostPorts, and returns
// the addresses. A pod on the host network gets nothing. On failure
// nothing of it is left.
func (n *Network) SetUp(id, nsDir string, p *pod.Pod) (_ []netip.Prefix, err error) {
	if n == nil || p.Spec.HostNetwork {
		return nil, nil
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.TearDown(id))
		}
	}()
	// Each step is recorded (address file, veth name, rule comment) before
	// or as it is done, so a staticlet killed between them finds it.
	addrs, err := n.ipam.Allocate(id)
	if err != nil {
		return nil, err
	}
	n.step()
	if err := n.bridge.Attach(netns.PodLink{HostVeth: netns.VethName(id), PodNS: netns.Path(nsDir, netns.Net), Addrs: addrs}); err != nil {
		return nil, err
	}
	n.step()
	ports, err := hostPorts(p, addrs)
	if err != nil {
		return nil, err
	}
	if err := n.nat.AddHostPorts(id, ports); err != nil {
		return nil, err
	}
	n.step()
	return addrs, nil
}

func (n *Network) step() {
	if n.pause > 0 {
		time.Sleep(n.pause)
	}
}

// TearDown removes what SetUp made for sandbox id, in reverse. Removing
// what is not there succeeds.
func (n *Network) TearDown(id string) error {
	if n == nil {
		return nil
	}
	return errors.Join(
		n.nat.RemoveHostPorts(id),
		n.bridge.Detach(netns.VethName(id)),
		n.ipam.Release(id),
	)
}

// Owners are the sandboxes that hold addresses or hostPort rules; ""
// stands for an address file created but not yet written.
func (n *Network) Owners() ([]string, error) {
	if n == nil {
		return nil, nil
	}
	held, err := n.ipam.Owners()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(held))
	for id := range held {
		out = append(out, id)
	}
	rules, err := n.nat.HostPortOwners()
	return append(out, rules...), err
}

// Release gives back the addresses sandbox id holds, and nothing else:
// for an allocation that names no sandbox (id "").
func (n *Network) Release(id string) error {
	if n == nil {
		return nil
	}
	return n.ipam.Release(id)
}

// hostPorts are the DNAT rules that publish p's hostPorts to its
// addresses: each to the address of the hostIP's family, or of every
// family when no hostIP is given, as the kubelet's portmap does.
func hostPorts(p *pod.Pod, addrs []netip.Prefix) ([]netns.HostPort, error) {
	var out []netns.HostPort
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.HostPort == 0 {
				continue
			}
			var hostIP netip.Addr
			if cp.HostIP != "" {
				a, err := netip.ParseAddr(cp.HostIP)
				if err != nil {
					return nil, fmt.Errorf("container %q: hostIP %q: %w", c.Name, cp.HostIP, err)
				}
				if !a.IsUnspecified() {
					hostIP = a
				}
			}
			proto := string(cp.Protocol)
			if proto == "" {
				proto = string(v1.ProtocolTCP)
			}
			for _, a := range addrs {
				if hostIP.IsValid() && hostIP.Is4() != a.Addr().Is4() {
					continue
				}
				out = append(out, netns.HostPort{Protocol: proto, HostIP: hostIP, HostPort: uint16(cp.HostPort),
					PodIP: a.Addr(), PodPort: uint16(cp.ContainerPort)})
			}
		}
	}
	return out, nil
}
