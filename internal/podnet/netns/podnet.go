package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PodInterface is the name of a pod's link to the bridge, inside the pod.
const PodInterface = "eth0"

// Bridge is the host bridge that pods' veths hang on. It holds each pod
// range's gateway address, so the host reaches pods and pods reach each
// other through it.
type Bridge struct {
	// HostNS is the network namespace the bridge lives in, a path such as
	// a pin; empty means staticlet's own. Tests use a throwaway namespace.
	HostNS string
	// Name is the bridge's link name.
	Name string
	// Gateways are the bridge's addresses, one per pod range, with the
	// range's length.
	Gateways []netip.Prefix
}

// VethName is the host-side name of sandbox id's veth: short enough for
// the kernel's 15 bytes, and derived from the ID so that a restarted
// staticlet can remove it knowing only the ID.
func VethName(id string) string {
	if len(id) > 12 {
		id = id[:12]
	}
	return "stl" + id
}

// handleIn opens netlink in the network namespace at path ("" for this
// process's).
func handleIn(path string) (*netlink.Handle, error) {
	if path == "" {
		return netlink.NewHandle()
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

// Ensure creates the bridge if it is missing, gives it its gateway
// addresses and brings it up. It is idempotent.
func (b Bridge) Ensure() error {
	h, err := handleIn(b.HostNS)
	if err != nil {
		return fmt.Errorf("opening netlink for bridge %s: %w", b.Name, err)
	}
	defer h.Close()
	link, err := h.LinkByName(b.Name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return fmt.Errorf("looking up bridge %s: %w", b.Name, err)
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b.Name}}
		if err := h.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating bridge %s: %w", b.Name, err)
		}
		if link, err = h.LinkByName(b.Name); err != nil {
			return fmt.Errorf("looking up bridge %s: %w", b.Name, err)
		}
	}
	if link.Type() != "bridge" {
		return fmt.Errorf("link %s exists and is a %s, not a bridge", b.Name, link.Type())
	}
	for _, gw := range b.Gateways {
		if err := h.AddrReplace(link, addr(gw)); err != nil {
			return fmt.Errorf("adding %s to bridge %s: %w", gw, b.Name, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing up bridge %s: %w", b.Name, err)
	}
	return nil
}

// Delete removes the bridge. Removing what is not there succeeds.
func (b Bridge) Delete() error {
	h, err := handleIn(b.HostNS)
	if err != nil {
		return fmt.Errorf("opening netlink for bridge %s: %w", b.Name, err)
	}
	defer h.Close()
	return deleteLink(h, b.Name)
}

// addr is a netlink address for p; an IPv6 one skips duplicate address
// detection, which would keep it unusable for a second or two while no
// one else on the bridge can hold it anyway (staticlet hands out each
// address once).
func addr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// PodLink is one pod's connection to the bridge.
type PodLink struct {
	// HostVeth is the host side's name (VethName of the sandbox).
	HostVeth string
	// PodNS is the pod's pinned network namespace.
	PodNS string
	// Addrs are the pod's addresses with their ranges' lengths, one per
	// gateway of the bridge.
	Addrs []netip.Prefix
}

// Attach creates a veth pair whose host side is on the bridge and whose
// other side is the pod's eth0, with the pod's addresses and a default
// route through the bridge for each address family. On failure nothing of
// it is left.
func (b Bridge) Attach(l PodLink) (err error) {
	h, err := handleIn(b.HostNS)
	if err != nil {
		return fmt.Errorf("opening netlink for bridge %s: %w", b.Name, err)
	}
	defer h.Close()
	br, err := h.LinkByName(b.Name)
	if err != nil {
		return fmt.Errorf("looking up bridge %s: %w", b.Name, err)
	}
	podNS, err := os.Open(l.PodNS)
	if err != nil {
		return fmt.Errorf("opening the pod's network namespace: %w", err)
	}
	defer podNS.Close()
	// The peer is created inside the pod and the host side on the bridge
	// in one request: no moment when either is loose on the host.
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.HostVeth, MasterIndex: br.Attrs().Index, MTU: br.Attrs().MTU},
		PeerName:      PodInterface,
		PeerNamespace: netlink.NsFd(int(podNS.Fd())),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s: %w", l.HostVeth, err)
	}
	defer func() {
		if err != nil {
			_ = deleteLink(h, l.HostVeth)
		}
	}()
	host, err := h.LinkByName(l.HostVeth)
	if err != nil {
		return fmt.Errorf("looking up veth %s: %w", l.HostVeth, err)
	}
	if err := h.LinkSetUp(host); err != nil {
		return fmt.Errorf("bringing up veth %s: %w", l.HostVeth, err)
	}
	return b.configurePod(l)
}

// configurePod gives the pod's eth0 its addresses and default routes.
func (b Bridge) configurePod(l PodLink) error {
	ph, err := handleIn(l.PodNS)
	if err != nil {
		return fmt.Errorf("opening netlink in the pod's namespace: %w", err)
	}
	defer ph.Close()
	eth, err := ph.LinkByName(PodInterface)
	if err != nil {
		return fmt.Errorf("looking up the pod's %s: %w", PodInterface, err)
	}
	for _, a := range l.Addrs {
		if err := ph.AddrReplace(eth, addr(a)); err != nil {
			return fmt.Errorf("adding %s to the pod's %s: %w", a, PodInterface, err)
		}
	}
	if err := ph.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bringing up the pod's %s: %w", PodInterface, err)
	}
	for _, a := range l.Addrs {
		gw, ok := b.gatewayFor(a.Addr())
		if !ok {
			return fmt.Errorf("no gateway on bridge %s for %s", b.Name, a)
		}
		r := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw.AsSlice()}
		if a.Addr().Is4() {
			r.Dst = &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		} else {
			r.Dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		if err := ph.RouteReplace(r); err != nil {
			return fmt.Errorf("adding the pod's default route via %s: %w", gw, err)
		}
	}
	return nil
}

// gatewayFor is the bridge's address in the range of a.
func (b Bridge) gatewayFor(a netip.Addr) (netip.Addr, bool) {
	for _, gw := range b.Gateways {
		if gw.Masked().Contains(a) {
			return gw.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// Detach deletes a pod's veth pair by its host side's name. Deleting what
// is not there succeeds.
func (b Bridge) Detach(hostVeth string) error {
	h, err := handleIn(b.HostNS)
	if err != nil {
		return fmt.Errorf("opening netlink to remove veth %s: %w", hostVeth, err)
	}
	defer h.Close()
	return deleteLink(h, hostVeth)
}

// LinkExists tells whether a link of that name is in the namespace at
// hostNS ("" for this process's).
func LinkExists(hostNS, name string) (bool, error) {
	h, err := handleIn(hostNS)
	if err != nil {
		return false, err
	}
	defer h.Close()
	_, err = h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

func deleteLink(h *netlink.Handle, name string) error {
	link, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up link %s: %w", name, err)
	}
	if err := h.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("deleting link %s: %w", name, err)
	}
	return nil
}

// EnableForwarding turns on IPv4 (and, when v6, IPv6) forwarding in the
// namespace at hostNS ("" for this process's), which pods' traffic to
// other networks needs. It returns the settings it changed.
func EnableForwarding(hostNS string, v6 bool) (changed []string, err error) {
	files := []string{"/proc/sys/net/ipv4/ip_forward"}
	if v6 {
		files = append(files, "/proc/sys/net/ipv6/conf/all/forwarding")
	}
	return turnOn(hostNS, files)
}

// EnableRouteLocalnet sets net.ipv4.conf.<bridge>.route_localnet in the
// namespace at hostNS ("" for this process's), as the CNI portmap plugin
// does for a hostPort on 127.0.0.1: the kernel then routes packets from
// 127.0.0.0/8 out through the bridge (to a pod, once DNATed) and packets
// to it in from the bridge (the pod's replies), where it otherwise drops
// them as martians. Only the bridge: the host's other links keep the
// default. The setting goes with the bridge. It returns the settings it
// changed.
func EnableRouteLocalnet(hostNS, bridge string) (changed []string, err error) {
	return turnOn(hostNS, []string{"/proc/sys/net/ipv4/conf/" + bridge + "/route_localnet"})
}

// turnOn writes 1 to each file under /proc/sys that does not hold it
// already, in the namespace at hostNS, and returns those it wrote.
func turnOn(hostNS string, files []string) (changed []string, err error) {
	set := func() error {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("reading %s: %w", f, err)
			}
			if len(b) > 0 && b[0] == '1' {
				continue
			}
			if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", f, err)
			}
			changed = append(changed, f)
		}
		return nil
	}
	if hostNS == "" {
		return changed, set()
	}
	// /proc/sys/net is the namespace of the thread that opens it.
	return changed, Do(hostNS, set)
}
