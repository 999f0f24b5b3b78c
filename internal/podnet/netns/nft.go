package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
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
}

// The chains of the table. hostports is a regular chain jumped to for
// packets to a local address, from outside (prerouting) and from the host
// itself (output).
const (
	chainPostrouting = "postrouting"
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainHostPorts   = "hostports"
	ownerPrefix      = "staticlet sandbox "
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
// masquerade removes them. hostPort rules are kept.
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
	c.AddChain(&nftables.Chain{Name: chainHostPorts, Table: t})
	for _, ch := range []*nftables.Chain{post, pre, out} {
		c.FlushChain(ch)
	}
	for _, p := range masquerade {
		ex := family(p.Addr())
		ex = append(ex, matchPrefix(p, true, false)...)
		ex = append(ex, matchPrefix(p, false, true)...)
		ex = append(ex, &expr.Masq{})
		c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: ex})
	}
	// fib daddr type local jump hostports
	toLocal := []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Verdict{Kind: expr.VerdictJump, Chain: chainHostPorts},
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: toLocal})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: toLocal})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("setting up nftables table %s: %w", n.Table, err)
	}
	return nil
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
