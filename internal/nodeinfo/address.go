package nodeinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// The routing tables, below the root given to PrimaryAddress.
const (
	routeFile     = "proc/net/route"
	ipv6RouteFile = "proc/net/ipv6_route"
)

// PrimaryAddress is the node's primary address, as the kubelet picks it
// when not told one: the first global unicast address of the interface
// of the IPv4 default route, or else of the IPv6 one; the IPv6 one first
// when preferV6 (--node-ip ::). It reports false when there is no default
// route with such an address.
func PrimaryAddress(root string, preferV6 bool) (net.IP, bool) {
	type table struct {
		file  string
		parse func([]byte) []string
		v4    bool
	}
	tables := []table{
		{routeFile, DefaultRouteInterfaces, true},
		{ipv6RouteFile, DefaultRouteInterfacesV6, false},
	}
	if preferV6 {
		tables[0], tables[1] = tables[1], tables[0]
	}
	for _, t := range tables {
		b, err := os.ReadFile(filepath.Join(root, t.file))
		if err != nil {
			continue
		}
		for _, name := range t.parse(b) {
			if ip, ok := interfaceAddress(name, t.v4); ok {
				return ip, true
			}
		}
	}
	return nil, false
}

// interfaceAddress is the first global unicast address of the family
// asked of the interface name.
func interfaceAddress(name string, v4 bool) (net.IP, bool) {
	iface, err := net.InterfaceByName(name)
	if err != nil || iface.Flags&net.FlagUp == 0 {
		return nil, false
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return nil, false
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() || (n.IP.To4() != nil) != v4 {
			continue
		}
		return n.IP, true
	}
	return nil, false
}

// rtfUp is the flag of a route that is up (RTF_UP).
const rtfUp = 0x1

// DefaultRouteInterfaces are the interfaces of the IPv4 default routes
// that are up in /proc/net/route, in the kernel's order.
func DefaultRouteInterfaces(route []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(route))
	for sc.Scan() {
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[0] == "Iface" {
			continue
		}
		var flags uint64
		if _, err := fmt.Sscanf(f[3], "%x", &flags); err != nil {
			continue
		}
		if f[1] == "00000000" && f[7] == "00000000" && flags&rtfUp != 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// DefaultRouteInterfacesV6 are the interfaces of the IPv6 default routes
// that are up in /proc/net/ipv6_route, in the kernel's order.
func DefaultRouteInterfacesV6(route []byte) []string {
	const zero = "00000000000000000000000000000000"
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(route))
	for sc.Scan() {
		// dest prefixlen src srcprefixlen nexthop metric refcnt use flags iface
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[9] == "lo" {
			continue
		}
		var flags uint64
		if _, err := fmt.Sscanf(f[8], "%x", &flags); err != nil {
			continue
		}
		if f[0] == zero && f[1] == "00" && flags&rtfUp != 0 {
			out = append(out, f[9])
		}
	}
	return out
}
