package nodeinfo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ParseNodeIP parses a --node-ip value as the kubelet does: one address,
// or a dual-stack pair (one IPv4, one IPv6) comma-separated, the first
// the primary; 0.0.0.0 or :: alone asks for the default route's address
// of that family. Blanks around each address are allowed; empty is none
// given. Unlike the kubelet, which skips what it cannot parse with a log
// line, an address that is not one is an error.
func ParseNodeIP(s string) ([]netip.Addr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ips []netip.Addr
	for _, part := range strings.Split(s, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(part))
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%q is not an IP address", strings.TrimSpace(part))
		}
		ips = append(ips, ip.Unmap())
	}
	switch {
	case len(ips) > 2 || (len(ips) == 2 && ips[0].Is4() == ips[1].Is4()):
		return nil, errors.New("want one IP address or a dual-stack pair (one IPv4, one IPv6)")
	case len(ips) == 2 && (ips[0].IsUnspecified() || ips[1].IsUnspecified()):
		return nil, errors.New("a dual-stack pair cannot hold an unspecified address (0.0.0.0 or ::)")
	}
	return ips, nil
}

// CheckNodeIP applies the kubelet's rule for a node IP given to it: not
// loopback, multicast, link-local or unspecified, and one of hostAddrs,
// the addresses of the host's interfaces.
func CheckNodeIP(ip netip.Addr, hostAddrs []netip.Addr) error {
	switch {
	case ip.IsLoopback():
		return errors.New("a loopback address cannot be the node's")
	case ip.IsMulticast():
		return errors.New("a multicast address cannot be the node's")
	case ip.IsLinkLocalUnicast():
		return errors.New("a link-local address cannot be the node's")
	case ip.IsUnspecified():
		return errors.New("an all-zeros address cannot be the node's")
	}
	for _, a := range hostAddrs {
		if a.Unmap() == ip {
			return nil
		}
	}
	return errors.New("not an address of this host's network interfaces")
}

// HostAddresses are the addresses of the host's interfaces, for
// CheckNodeIP.
func HostAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// NodeIPs are the node's InternalIP addresses, in order, as the kubelet
// reports them for --node-ip's given (ParseNodeIP's): the given ones, each
// checked by CheckNodeIP against hostAddrs; or, when none is given or it
// is 0.0.0.0 or ::, the default route's address under root (PrimaryAddress,
// of the unspecified address's family first). It is empty, with no error,
// when there is no default route with an address.
func NodeIPs(root string, given, hostAddrs []netip.Addr) ([]netip.Addr, error) {
	if len(given) == 0 || given[0].IsUnspecified() {
		preferV6 := len(given) == 1 && given[0].Is6()
		if ip, ok := PrimaryAddress(root, preferV6); ok {
			a, _ := netip.AddrFromSlice(ip)
			return []netip.Addr{a.Unmap()}, nil
		}
		return nil, nil
	}
	for _, ip := range given {
		if err := CheckNodeIP(ip, hostAddrs); err != nil {
			return nil, fmt.Errorf("%s: %w", ip, err)
		}
	}
	return given, nil
}
