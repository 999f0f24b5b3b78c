package netns

import (
	"context"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
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
// host itself, the masquerade rules, and that Detach leaves nothing.
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
	nat := NAT{HostNS: hostNS, Table: "stltest"}
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/24"), netip.MustParsePrefix("fd00:213::/64")}
	if err := nat.Ensure(cidrs); err != nil {
		t.Fatalf("NAT.Ensure: %v", err)
	}
	if err := nat.Ensure(cidrs); err != nil {
		t.Fatalf("second NAT.Ensure: %v", err)
	}
	if got := masqueradeRules(t, nat); got != 2 {
		t.Errorf("%d masquerade rules after Ensure twice, want 2", got)
	}
	ports := []HostPort{
		{Protocol: "TCP", HostPort: 18080, PodIP: pods[0].addrs[0].Addr(), PodPort: 8080},
		{Protocol: "TCP", HostIP: netip.MustParseAddr("192.0.2.10"), HostPort: 18081, PodIP: pods[0].addrs[0].Addr(), PodPort: 8080},
		{Protocol: "UDP", HostPort: 18080, PodIP: pods[0].addrs[0].Addr(), PodPort: 8080},
	}
	if err := nat.AddHostPorts("sandbox-a", ports); err != nil {
		t.Fatalf("AddHostPorts: %v", err)
	}
	for _, target := range []string{"192.0.2.10:18080", "192.0.2.10:18081"} {
		if got, err := fetch(hostNS, target); err != nil || got != "pod0" {
			t.Errorf("host -> %s (hostPort) = %q, %v; want pod0", target, got, err)
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
	if _, err := fetch(hostNS, "192.0.2.10:18080"); err == nil {
		t.Errorf("hostPort still answers after RemoveHostPorts")
	}
	if err := nat.Ensure(nil); err != nil {
		t.Fatal(err)
	}
	if got := masqueradeRules(t, nat); got != 0 {
		t.Errorf("%d masquerade rules after Ensure(nil), want 0", got)
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

// masqueradeRules counts the masquerade rules of nat's table.
func masqueradeRules(t *testing.T, nat NAT) int {
	t.Helper()
	c, done, err := nat.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	tb := nat.table()
	rules, err := c.GetRules(tb, &nftables.Chain{Name: chainPostrouting, Table: tb})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rules {
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
