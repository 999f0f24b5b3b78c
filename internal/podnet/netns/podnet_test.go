package netns

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// throwaway creates a network namespace that stands in for a host or a
// pod, removed with the test.
func throwaway(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := Create(Spec{Dir: dir, Kinds: []Kind{Net}}); err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = Remove(dir) })
	return Path(dir, Net)
}

// serve listens on addr inside namespace ns and answers every connection
// with reply.
func serve(t *testing.T, ns, addr, reply string) {
	t.Helper()
	var ln net.Listener
	if err := Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, reply)
			c.Close()
		}
	}()
}

// fetch dials addr from namespace ns and returns what it reads.
func fetch(ns, addr string) (string, error) {
	var conn net.Conn
	if err := Do(ns, func() error {
		var err error
		d := net.Dialer{FallbackDelay: -1, Timeout: 3 * time.Second}
		conn, err = d.DialContext(context.Background(), "tcp", addr)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

// TestPodNetwork wires two pods to a bridge in a throwaway host namespace,
// dual stack, and checks host to pod, pod to pod, hostPort DNAT from the
// host itself (to its address and to 127.0.0.1, not to ::1), the
// masquerade rules, and that Detach leaves nothing.
func TestPodNetwork(t *testing.T) {
	requireRoot(t)
	hostNS := throwaway(t, "host")
	br := Bridge{HostNS: hostNS, Name: "stltest0", Gateways: []netip.Prefix{
		netip.MustParsePrefix("10.213.0.1/24"), netip.MustParsePrefix("fd00:213::1/64")}}
	if err := br.Ensure(); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if err := br.Ensure(); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	pods := []struct {
		ns, veth string
		addrs    []netip.Prefix
	}{
		{throwaway(t, "a"), VethName("aaaaaaaaaaaaaaaa"), []netip.Prefix{netip.MustParsePrefix("10.213.0.2/24"), netip.MustParsePrefix("fd00:213::2/64")}},
		{throwaway(t, "b"), VethName("bbbbbbbbbbbbbbbb"), []netip.Prefix{netip.MustParsePrefix("10.213.0.3/24"), netip.MustParsePrefix("fd00:213::3/64")}},
	}
	for i, p := range pods {
		if err := br.Attach(PodLink{HostVeth: p.veth, PodNS: p.ns, Addrs: p.addrs}); err != nil {
			t.Fatalf("Attach(pod %d): %v", i, err)
		}
		for _, a := range p.addrs {
			serve(t, p.ns, net.JoinHostPort(a.Addr().String(), "8080"), "pod"+strconv.Itoa(i))
		}
	}
	for _, a := range pods[0].addrs {
		target := net.JoinHostPort(a.Addr().String(), "8080")
		if got, err := fetch(hostNS, target); err != nil || got != "pod0" {
			t.Errorf("host -> %s = %q, %v; want pod0", target, got, err)
		}
		if got, err := fetch(pods[1].ns, target); err != nil || got != "pod0" {
			t.Errorf("pod1 -> %s = %q, %v; want pod0", target, got, err)
		}
	}

	// The host's own address, on a dummy link, publishes pod 0's port.
	h, err := handleIn(hostNS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// A bridge with no ports stands in for an uplink (dummy links need a module).
	dummy := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "uplink"}}
	if err := h.LinkAdd(dummy); err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(dummy, addr(netip.MustParsePrefix("192.0.2.10/24"))); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(dummy); err != nil {
		t.Fatal(err)
	}
	nat := NAT{HostNS: hostNS, Table: "stltest", Bridge: br.Name}
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/24"), netip.MustParsePrefix("fd00:213::/64")}
	if err := nat.Ensure(cidrs); err != nil {
		t.Fatalf("NAT.Ensure: %v", err)
	}
	if err := nat.Ensure(cidrs); err != nil {
		t.Fatalf("second NAT.Ensure: %v", err)
	}
	// One per range, and one for connections from 127.0.0.0/8.
	if got := masqueradeRules(t, nat); got != 3 {
		t.Errorf("%d masquerade rules after Ensure twice, want 3", got)
	}
	if got := len(chainRules(t, nat, chainGuard)); got != 2 {
		t.Errorf("%d rules in the guard chain after Ensure twice, want 2", got)
	}
	localnet := "/proc/sys/net/ipv4/conf/" + br.Name + "/route_localnet"
	for i, want := range [][]string{{localnet}, nil} {
		if changed, err := EnableRouteLocalnet(hostNS, br.Name); err != nil || !slices.Equal(changed, want) {
			t.Errorf("EnableRouteLocalnet, call %d = %v, %v; want %v", i+1, changed, err, want)
		}
	}
	if got := sysctl(t, hostNS, "/proc/sys/net/ipv4/conf/all/route_localnet"); got != "0" {
		t.Errorf("route_localnet for all links = %s, want 0 (only the bridge's is set)", got)
	}
	ports := []HostPort{
		{Protocol: "TCP", HostPort: 18080, PodIP: pods[0].addrs[0].Addr(), PodPort: 8080},
		{Protocol: "TCP", HostIP: netip.MustParseAddr("192.0.2.10"), HostPort: 18081, PodIP: pods[0].addrs[0].Addr(), PodPort: 8080},
		{Protocol: "UDP", HostPort: 18080, PodIP: pods[0].addrs[0].Addr(), PodPort: 8080},
		{Protocol: "TCP", HostPort: 18080, PodIP: pods[0].addrs[1].Addr(), PodPort: 8080},
	}
	if err := nat.AddHostPorts("sandbox-a", ports); err != nil {
		t.Fatalf("AddHostPorts: %v", err)
	}
	for _, target := range []string{"192.0.2.10:18080", "192.0.2.10:18081", "127.0.0.1:18080", "[fd00:213::1]:18080"} {
		if got, err := fetch(hostNS, target); err != nil || got != "pod0" {
			t.Errorf("host -> %s (hostPort) = %q, %v; want pod0", target, got, err)
		}
	}
	// Not on loopback when published on another hostIP; never on ::1,
	// where the connection is refused rather than DNATed into a dead end.
	for _, target := range []string{"127.0.0.1:18081", "[::1]:18080"} {
		if got, err := fetch(hostNS, target); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("host -> %s = %q, %v; want connection refused", target, got, err)
		}
	}
	// route_localnet on the bridge does not open the host's loopback
	// range to the pods. Pod 1, which routes 127.0.0.2 through the bridge
	// and may send from 127.0.0.1 there, sends a datagram to the host's
	// 127.0.0.2, then one from 127.0.0.1 to the bridge's address; each
	// time the host, which listens on every address, receives only the
	// plain datagram to the bridge's address sent after it.
	gw := net.JoinHostPort(br.Gateways[0].Addr().String(), "18091")
	loopbackViaBridge(t, pods[1].ns, br.Gateways[0].Addr())
	// Without accept_local the kernel itself refuses a packet from a
	// local address coming in from a link; the guard does not count on it.
	acceptLocal := "/proc/sys/net/ipv4/conf/" + br.Name + "/accept_local"
	if err := Do(hostNS, func() error { return os.WriteFile(acceptLocal, []byte("1"), 0o644) }); err != nil {
		t.Fatal(err)
	}
	for _, first := range []datagram{{to: "127.0.0.2:18091"}, {from: "127.0.0.1:0", to: gw}} {
		if got := firstDatagram(t, hostNS, pods[1].ns, []datagram{first, {to: gw}}); got != 1 {
			t.Errorf("the host received pod1's datagram from %q to %s through the bridge; want it dropped", first.from, first.to)
		}
	}
	owners, err := nat.HostPortOwners()
	if err != nil || len(owners) != 1 || owners[0] != "sandbox-a" {
		t.Errorf("HostPortOwners() = %v, %v; want [sandbox-a]", owners, err)
	}
	if err := nat.RemoveHostPorts("sandbox-a"); err != nil {
		t.Fatalf("RemoveHostPorts: %v", err)
	}
	if owners, _ := nat.HostPortOwners(); len(owners) != 0 {
		t.Errorf("HostPortOwners() after RemoveHostPorts = %v, want none", owners)
	}
	for _, target := range []string{"192.0.2.10:18080", "127.0.0.1:18080"} {
		if _, err := fetch(hostNS, target); err == nil {
			t.Errorf("hostPort %s still answers after RemoveHostPorts", target)
		}
	}
	if err := nat.Ensure(nil); err != nil {
		t.Fatal(err)
	}
	if got := masqueradeRules(t, nat); got != 1 {
		t.Errorf("%d masquerade rules after Ensure(nil), want 1 (loopback's)", got)
	}

	for i, p := range pods {
		if err := br.Detach(p.veth); err != nil {
			t.Errorf("Detach(pod %d): %v", i, err)
		}
		if ok, err := LinkExists(hostNS, p.veth); ok || err != nil {
			t.Errorf("LinkExists(%s) after Detach = %v, %v", p.veth, ok, err)
		}
		if ok, _ := LinkExists(p.ns, PodInterface); ok {
			t.Errorf("pod %d still has %s after Detach", i, PodInterface)
		}
		if err := br.Detach(p.veth); err != nil {
			t.Errorf("second Detach(pod %d): %v", i, err)
		}
	}
	if err := nat.Delete(); err != nil {
		t.Errorf("NAT.Delete: %v", err)
	}
	if err := nat.Delete(); err != nil {
		t.Errorf("second NAT.Delete: %v", err)
	}
	if err := br.Delete(); err != nil {
		t.Errorf("Bridge.Delete: %v", err)
	}
}

// loopbackViaBridge makes the pod in namespace ns send its packets to
// 127.0.0.2 (its loopback range but 127.0.0.1) to gw, and lets it send
// packets from 127.0.0.1 through the bridge, as a pod with CAP_NET_ADMIN
// could.
func loopbackViaBridge(t *testing.T, ns string, gw netip.Addr) {
	t.Helper()
	h, err := handleIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth, err := h.LinkByName(PodInterface)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	local := &netlink.Route{Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST,
		Dst: &net.IPNet{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)}, LinkIndex: lo.Attrs().Index}
	if err := h.RouteDel(local); err != nil {
		t.Fatalf("deleting the pod's local route for 127.0.0.0/8: %v", err)
	}
	two := &net.IPNet{IP: net.IPv4(127, 0, 0, 2).To4(), Mask: net.CIDRMask(32, 32)}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: two, Gw: gw.AsSlice()}); err != nil {
		t.Fatalf("routing 127.0.0.2 through the bridge: %v", err)
	}
	// Packets from 127.0.0.1 may leave through eth0.
	localnet := "/proc/sys/net/ipv4/conf/" + PodInterface + "/route_localnet"
	if err := Do(ns, func() error { return os.WriteFile(localnet, []byte("1"), 0o644) }); err != nil {
		t.Fatal(err)
	}
}

// datagram is one UDP datagram to send: from an address ("" for any) to
// one.
type datagram struct{ from, to string }

// firstDatagram listens on UDP port 18091 of every address in namespace
// host, sends dgrams in turn from namespace from, and returns the index
// of the one that arrived first.
func firstDatagram(t *testing.T, host, from string, dgrams []datagram) int {
	t.Helper()
	var ln net.PacketConn
	if err := Do(host, func() error {
		var err error
		ln, err = net.ListenPacket("udp4", "0.0.0.0:18091")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := Do(from, func() error {
		for i, d := range dgrams {
			if err := sendDatagram(d, byte(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("sending datagrams: %v", err)
	}
	_ = ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	if _, _, err := ln.ReadFrom(b); err != nil {
		t.Fatalf("receiving the first datagram: %v", err)
	}
	return int(b[0])
}

// sendDatagram sends the one byte b as d says.
func sendDatagram(d datagram, b byte) error {
	c, err := net.ListenPacket("udp4", d.from)
	if err != nil {
		return err
	}
	defer c.Close()
	to, err := net.ResolveUDPAddr("udp4", d.to)
	if err != nil {
		return err
	}
	_, err = c.WriteTo([]byte{b}, to)
	return err
}

// sysctl reads a setting under /proc/sys in namespace ns.
func sysctl(t *testing.T, ns, file string) string {
	t.Helper()
	var b []byte
	if err := Do(ns, func() error {
		var err error
		b, err = os.ReadFile(file)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// chainRules lists the rules of a chain of nat's table.
func chainRules(t *testing.T, nat NAT, chain string) []*nftables.Rule {
	t.Helper()
	c, done, err := nat.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	tb := nat.table()
	rules, err := c.GetRules(tb, &nftables.Chain{Name: chain, Table: tb})
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// masqueradeRules counts the masquerade rules of nat's table.
func masqueradeRules(t *testing.T, nat NAT) int {
	t.Helper()
	n := 0
	for _, r := range chainRules(t, nat, chainPostrouting) {
		for _, e := range r.Exprs {
			if _, ok := e.(*expr.Masq); ok {
				n++
			}
		}
	}
	return n
}

func TestAttachFailureLeavesNothing(t *testing.T) {
	requireRoot(t)
	hostNS := throwaway(t, "host")
	br := Bridge{HostNS: hostNS, Name: "stltest0", Gateways: []netip.Prefix{netip.MustParsePrefix("10.213.0.1/24")}}
	if err := br.Ensure(); err != nil {
		t.Fatal(err)
	}
	pod := throwaway(t, "pod")
	// An address with no gateway on the bridge fails after the veth exists.
	err := br.Attach(PodLink{HostVeth: "stlfail", PodNS: pod, Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24")}})
	if err == nil {
		t.Fatal("Attach with an address outside the bridge's ranges succeeded")
	}
	if ok, _ := LinkExists(hostNS, "stlfail"); ok {
		t.Errorf("veth left after a failed Attach")
	}
	if ok, _ := LinkExists(pod, PodInterface); ok {
		t.Errorf("pod's %s left after a failed Attach", PodInterface)
	}
}
