package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// NAT is staticlet's nftables table (family inet): masquerade of pods'
// outbound traffic and DNAT of their hostPorts. Each hostPort rule carries
// its sandbox's ID in its comment, so the rules of a sandbox that is gone
// can be found and removed after a restart.
type NAT struct {
	// HostNS is the network namespace of the table, a path; empty means
	// staticlet's own.
	HostNS string
	// Table is the table's name.
	Table string
	// Bridge is the pod bridge. When set, hostPorts also answer on IPv4
	// loopback (127.0.0.1), as the CNI portmap plugin's do: connections
	// from 127.0.0.0/8 leaving through the bridge are masqueraded, so the
	// pod's replies come back, and new connections to 127.0.0.0/8
	// arriving from the bridge are dropped. Loopback hostPorts also need
	// the bridge's route_localnet (EnableRouteLocalnet).
	Bridge string
}

// The chains of the table. hostports is a regular chain jumped to for
// packets to a local address, from outside (prerouting) and from the host
// itself (output). guard keeps pods from using the loopback range that
// route_localnet opens on the bridge.
const (
	chainPostrouting = "postrouting"
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainGuard       = "guard"
	chainHostPorts   = "hostports"
	ownerPrefix      = "staticlet sandbox "
)

// loopback4 is IPv4's loopback range; ipv6Loopback is ::1.
var (
	loopback4    = netip.MustParsePrefix("127.0.0.0/8")
	ipv6Loopback = netip.PrefixFrom(netip.IPv6Loopback(), 128)
)

// HostPort publishes a pod's port on the host.
type HostPort struct {
	// Protocol is TCP, UDP or SCTP.
	Protocol string
	// HostIP is the local address it is published on; the zero Addr means
	// every local address of its family.
	HostIP   netip.Addr
	HostPort uint16
	PodIP    netip.Addr
	PodPort  uint16
}

func (n NAT) conn() (*nftables.Conn, func(), error) {
	if n.HostNS == "" {
		c, err := nftables.New()
		return c, func() {}, err
	}
	f, err := os.Open(n.HostNS)
	if err != nil {
		return nil, nil, fmt.Errorf("opening network namespace %s: %w", n.HostNS, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return c, func() { f.Close() }, nil
}

func (n NAT) table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: n.Table}
}

// Ensure creates the table and its chains if missing, and replaces the
// masquerade rules with one per range of masquerade: traffic from the
// range to anywhere outside it leaves with the host's address. Empty
// masquerade removes them. It also replaces the rules that make hostPorts
// answer on 127.0.0.1 (with Bridge set). hostPort rules are kept.
func (n NAT) Ensure(masquerade []netip.Prefix) error {
	c, done, err := n.conn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	defer done()
	t := c.AddTable(n.table())
	post := c.AddChain(&nftables.Chain{Name: chainPostrouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	pre := c.AddChain(&nftables.Chain{Name: chainPrerouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	out := c.AddChain(&nftables.Chain{Name: chainOutput, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	guard := c.AddChain(&nftables.Chain{Name: chainGuard, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityFilter})
	c.AddChain(&nftables.Chain{Name: chainHostPorts, Table: t})
	for _, ch := range []*nftables.Chain{post, pre, out, guard} {
		c.FlushChain(ch)
	}
	for _, p := range masquerade {
		ex := family(p.Addr())
		ex = append(ex, matchPrefix(p, true, false)...)
		ex = append(ex, matchPrefix(p, false, true)...)
		ex = append(ex, &expr.Masq{})
		c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: ex})
	}
	if n.Bridge != "" {
		n.addLoopbackRules(c, t, post, guard)
	}
	// fib daddr type local jump hostports
	toLocal := []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: chainHostPorts},
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: toLocal})
	// ip6 daddr ::1 return: a packet from ::1 cannot leave the host (IPv6
	// has no route_localnet), so a connection to [::1]:<hostPort> is
	// refused at once rather than DNATed to the pod and never answered.
	noV6Loopback := append(family(ipv6Loopback.Addr()), matchPrefix(ipv6Loopback, false, false)...)
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(noV6Loopback, &expr.Verdict{Kind: expr.VerdictReturn})})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: toLocal})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("setting up nftables table %s: %w", n.Table, err)
	}
	return nil
}

// addLoopbackRules adds what makes a hostPort answer on 127.0.0.1, whose
// DNAT the output chain does as for any local address, and what keeps the
// pods off the host's loopback range:
//
//	postrouting: oifname <bridge> ip saddr 127.0.0.0/8 masquerade
//	guard:       iifname <bridge> ip saddr 127.0.0.0/8 drop
//	guard:       iifname <bridge> ip daddr 127.0.0.0/8 ct state != established,related drop
//
// The masquerade gives the connection the bridge's address, which the
// pod can answer; route_localnet on the bridge lets the packet from
// 127.0.0.1 out and the de-NATed replies to 127.0.0.1 in. The drops undo
// what else that setting lets in from the bridge, where the kernel would
// have dropped it as martian: a packet from 127.0.0.0/8 (a pod posing as
// the host's own loopback, to a service that trusts it; the kernel still
// refuses it as from a local address, unless the bridge's accept_local
// is set) and a new connection to 127.0.0.0/8 (a pod reaching a service
// the host binds to loopback only: CVE-2020-8558, from the kube-proxy's
// route_localnet).
// Neither is ever the traffic of a loopback hostPort: the pod sees the
// bridge's address, and the host's replies to it are established.
func (n NAT) addLoopbackRules(c *nftables.Conn, t *nftables.Table, post, guard *nftables.Chain) {
	fromBridge := append(family(loopback4.Addr()), ifname(expr.MetaKeyIIFNAME, n.Bridge)...)
	masq := append(family(loopback4.Addr()), ifname(expr.MetaKeyOIFNAME, n.Bridge)...)
	masq = append(masq, matchPrefix(loopback4, true, false)...)
	c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: append(masq, &expr.Masq{})})
	spoofed := append(slices.Clone(fromBridge), matchPrefix(loopback4, true, false)...)
	c.AddRule(&nftables.Rule{Table: t, Chain: guard, Exprs: append(spoofed, &expr.Verdict{Kind: expr.VerdictDrop})})
	toLoopback := append(slices.Clone(fromBridge), matchPrefix(loopback4, false, false)...)
	established := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	toLoopback = append(toLoopback,
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: established, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictDrop},
	)
	c.AddRule(&nftables.Rule{Table: t, Chain: guard, Exprs: toLoopback})
}

// ifname matches the input or output interface's name (key IIFNAME or
// OIFNAME) being name.
func ifname(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// family matches packets of a's address family (meta nfproto).
func family(a netip.Addr) []expr.Any {
	proto := byte(unix.NFPROTO_IPV4)
	if a.Is6() {
		proto = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// matchPrefix matches the source (or destination) address being in p, or
// not in it when negate.
func matchPrefix(p netip.Prefix, source, negate bool) []expr.Any {
	offset, size := uint32(16), uint32(4)
	if p.Addr().Is6() {
		offset, size = 24, 16
	}
	if source {
		offset -= size
	}
	mask := make([]byte, size)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	op := expr.CmpOpEq
	if negate {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: mask, Xor: make([]byte, size)},
		&expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

var l4protos = map[string]byte{"TCP": unix.IPPROTO_TCP, "UDP": unix.IPPROTO_UDP, "SCTP": unix.IPPROTO_SCTP}

// hostPortRule is the DNAT rule of one hostPort.
func hostPortRule(hp HostPort) ([]expr.Any, error) {
	proto, ok := l4protos[strings.ToUpper(hp.Protocol)]
	if !ok {
		return nil, fmt.Errorf("hostPort %d: protocol %q is not supported", hp.HostPort, hp.Protocol)
	}
	ex := family(hp.PodIP)
	if hp.HostIP.IsValid() {
		ex = append(ex, matchPrefix(netip.PrefixFrom(hp.HostIP, hp.HostIP.BitLen()), false, false)...)
	}
	natFamily := uint32(unix.NFPROTO_IPV4)
	if hp.PodIP.Is6() {
		natFamily = unix.NFPROTO_IPV6
	}
	ex = append(ex,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(hp.HostPort)},
		&expr.Immediate{Register: 1, Data: hp.PodIP.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(hp.PodPort)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: natFamily, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	)
	return ex, nil
}

// AddHostPorts adds the DNAT rules of owner's hostPorts, all or none.
func (n NAT) AddHostPorts(owner string, ports []HostPort) error {
	if len(ports) == 0 {
		return nil
	}
	c, done, err := n.conn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	defer done()
	t := n.table()
	ch := &nftables.Chain{Name: chainHostPorts, Table: t}
	for _, hp := range ports {
		ex, err := hostPortRule(hp)
		if err != nil {
			return err
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: ex,
			UserData: userdata.AppendString(nil, userdata.TypeComment, ownerPrefix+owner)})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("adding hostPort rules of sandbox %s: %w", owner, err)
	}
	return nil
}

// hostPortRules lists the hostPort rules by owner. A missing table has
// none.
func (n NAT) hostPortRules(c *nftables.Conn) (map[string][]*nftables.Rule, error) {
	t := n.table()
	rules, err := c.GetRules(t, &nftables.Chain{Name: chainHostPorts, Table: t})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing hostPort rules in table %s: %w", n.Table, err)
	}
	out := map[string][]*nftables.Rule{}
	for _, r := range rules {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		if owner, ok := strings.CutPrefix(comment, ownerPrefix); ok {
			out[owner] = append(out[owner], r)
		}
	}
	return out, nil
}

// RemoveHostPorts removes owner's hostPort rules. Removing none succeeds.
func (n NAT) RemoveHostPorts(owner string) error {
	c, done, err := n.conn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	defer done()
	rules, err := n.hostPortRules(c)
	if err != nil || len(rules[owner]) == 0 {
		return err
	}
	for _, r := range rules[owner] {
		if err := c.DelRule(r); err != nil {
			return fmt.Errorf("removing hostPort rules of sandbox %s: %w", owner, err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("removing hostPort rules of sandbox %s: %w", owner, err)
	}
	return nil
}

// HostPortOwners lists the sandboxes that have hostPort rules.
func (n NAT) HostPortOwners() ([]string, error) {
	c, done, err := n.conn()
	if err != nil {
		return nil, fmt.Errorf("opening nftables: %w", err)
	}
	defer done()
	rules, err := n.hostPortRules(c)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rules))
	for owner := range rules {
		out = append(out, owner)
	}
	return out, nil
}

// Delete removes the table. Removing what is not there succeeds.
func (n NAT) Delete() error {
	c, done, err := n.conn()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	defer done()
	if _, err := c.ListTableOfFamily(n.Table, nftables.TableFamilyINet); err != nil {
		return nil
	}
	c.DelTable(n.table())
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting nftables table %s: %w", n.Table, err)
	}
	return nil
}
