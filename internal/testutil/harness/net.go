package harness

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"

	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// TestNet is a pod network of a test's own: a bridge, a range and an
// nftables table no other test (nor a concurrent run) uses, removed with
// the test.
type TestNet struct {
	Bridge string
	Table  string
	CIDR   netip.Prefix
}

// NewTestNet picks a free /24 at random in 100.64.0.0/10 (shared address
// space, which no machine here routes) and names after it a bridge and a
// table.
func NewTestNet(tb testing.TB) *TestNet {
	tb.Helper()
	var b [2]byte
	for range 100 {
		_, _ = rand.Read(b[:])
		n := (uint16(b[0])<<8 | uint16(b[1])) % (64 * 256)
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(64 + n/256), byte(n % 256), 0}), 24)
		if inUse(cidr) {
			continue
		}
		tag := hex.EncodeToString(b[:])
		tn := &TestNet{Bridge: "stlt" + tag, Table: "stltest_" + tag, CIDR: cidr}
		tb.Cleanup(func() {
			if err := (netns.NAT{Table: tn.Table}).Delete(); err != nil {
				tb.Errorf("deleting nftables table %s: %v", tn.Table, err)
			}
			if err := (netns.Bridge{Name: tn.Bridge}).Delete(); err != nil {
				tb.Errorf("deleting bridge %s: %v", tn.Bridge, err)
			}
		})
		return tn
	}
	tb.Fatal("no free /24 for a test pod network")
	return nil
}

// inUse tells whether a local address is in cidr.
func inUse(cidr netip.Prefix) bool {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && cidr.Contains(ip.Unmap()) {
				return true
			}
		}
	}
	return false
}

// Flags are staticlet's flags for this network. Masquerade is off, so
// tests leave forwarding as it is; a test that checks it turns it on.
func (n *TestNet) Flags() []string {
	return []string{"--pod-bridge", n.Bridge, "--pod-cidr", n.CIDR.String(), "--nftables-table", n.Table, "--masquerade=false"}
}

// Veths lists the links on the bridge.
func (n *TestNet) Veths(t *testing.T) []string {
	t.Helper()
	br, err := netlink.LinkByName(n.Bridge)
	if err != nil {
		t.Fatalf("bridge %s: %v", n.Bridge, err)
	}
	var out []string
	for _, l := range HostLinks(t) {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			out = append(out, l.Attrs().Name)
		}
	}
	slices.Sort(out)
	return out
}

// HostLinks lists the host's links. The host's links change while tests
// run (a pod's veth is deleted as another is listed), and the kernel then
// marks the dump interrupted: its result may be incomplete, so it is taken
// again until one dump completes unchanged.
func HostLinks(t *testing.T) []netlink.Link {
	t.Helper()
	for range 100 {
		links, err := netlink.LinkList()
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return links
	}
	t.Fatal("listing the host's links: every dump was interrupted by a change")
	return nil
}

// MasqueradeRules counts the masquerade rules of the table.
func (n *TestNet) MasqueradeRules(t *testing.T) int {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyINet, Name: n.Table}
	rules, err := c.GetRules(tb, &nftables.Chain{Name: "postrouting", Table: tb})
	if err != nil {
		t.Fatalf("listing table %s: %v", n.Table, err)
	}
	count := 0
	for _, r := range rules {
		for _, e := range r.Exprs {
			if _, ok := e.(*expr.Masq); ok {
				count++
			}
		}
	}
	return count
}
