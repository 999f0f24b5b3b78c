package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// testNet is a pod network of a test's own: a bridge, a range and an
// nftables table no other test (nor a concurrent run) uses, removed with
// the test.
type testNet struct {
	bridge string
	table  string
	cidr   netip.Prefix
}

// newTestNet picks a free /24 at random in 100.64.0.0/10 (shared address
// space, which no machine here routes) and names after it a bridge and a
// table.
func newTestNet(tb testing.TB) *testNet {
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
		tn := &testNet{bridge: "stlt" + tag, table: "stltest_" + tag, cidr: cidr}
		tb.Cleanup(func() {
			if err := (netns.NAT{Table: tn.table}).Delete(); err != nil {
				tb.Errorf("deleting nftables table %s: %v", tn.table, err)
			}
			if err := (netns.Bridge{Name: tn.bridge}).Delete(); err != nil {
				tb.Errorf("deleting bridge %s: %v", tn.bridge, err)
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

// flags are staticlet's flags for this network. Masquerade is off, so
// tests leave forwarding as it is; a test that checks it turns it on.
func (n *testNet) flags() []string {
	return []string{"--pod-bridge", n.bridge, "--pod-cidr", n.cidr.String(), "--nftables-table", n.table, "--masquerade=false"}
}

// veths lists the links on the bridge.
func (n *testNet) veths(t *testing.T) []string {
	t.Helper()
	br, err := netlink.LinkByName(n.bridge)
	if err != nil {
		t.Fatalf("bridge %s: %v", n.bridge, err)
	}
	var out []string
	for _, l := range hostLinks(t) {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			out = append(out, l.Attrs().Name)
		}
	}
	slices.Sort(out)
	return out
}

// hostLinks lists the host's links. The host's links change while tests
// run (a pod's veth is deleted as another is listed), and the kernel then
// marks the dump interrupted: its result may be incomplete, so it is taken
// again until one dump completes unchanged.
func hostLinks(t *testing.T) []netlink.Link {
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

// strayVeths lists staticlet-named veths on the host that are not on the
// bridge (a veth created before it was attached would be one).
func strayVeths(t *testing.T, keep []string) []string {
	t.Helper()
	var out []string
	for _, l := range hostLinks(t) {
		if l.Type() == "veth" && strings.HasPrefix(l.Attrs().Name, "stl") && l.Attrs().MasterIndex == 0 && !slices.Contains(keep, l.Attrs().Name) {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// allocations lists the address files under the root dir.
func (e *env) allocations() []string {
	files, _ := filepath.Glob(filepath.Join(e.root, "network", "ipam", "*", "*"))
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "last" {
			out = append(out, filepath.Base(f))
		}
	}
	slices.Sort(out)
	return out
}

// sandboxPins lists the pinned namespace directories under the root dir.
func (e *env) sandboxPins() []string {
	dirs, _ := filepath.Glob(filepath.Join(e.root, "sandboxes", "*"))
	return dirs
}

// masqueradeRules counts the masquerade rules of the table.
func (n *testNet) masqueradeRules(t *testing.T) int {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyINet, Name: n.table}
	rules, err := c.GetRules(tb, &nftables.Chain{Name: "postrouting", Table: tb})
	if err != nil {
		t.Fatalf("listing table %s: %v", n.table, err)
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

// httpdPod serves its own address (from status.podIP) on port 8080, or,
// with peer set, what it fetched from peer's port 8080.
func httpdPod(name, peer string, hostPort int) string {
	script := `mkdir -p /www && echo "$POD_IP" > /www/index.html && exec httpd -f -p 8080 -h /www`
	if peer != "" {
		script = fmt.Sprintf(`mkdir -p /www && until wget -q -O /www/index.html http://%s:8080/; do sleep 0.2; done && exec httpd -f -p 8080 -h /www`, peer)
	}
	ports := ""
	if hostPort != 0 {
		ports = fmt.Sprintf("\n    ports:\n    - {containerPort: 8080, hostPort: %d}", hostPort)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: localhost/busybox:test
    command: ["sh", "-c", %q]
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}%s
`, name, script, ports)
}

// get fetches http://addr/ from the test process.
func get(addr string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func waitGet(t *testing.T, addr, want string) {
	t.Helper()
	waitFor(t, 20*time.Second, "GET "+addr+" = "+want, func() (bool, string) {
		got, err := get(addr)
		return err == nil && got == want, fmt.Sprintf("%q, %v", got, err)
	})
}

// TestPodNetwork runs two pods on the pod network: each gets an address in
// the range, the host reaches both, one reaches the other, a hostPort
// answers on the host's address, the addresses and veths survive a killed
// and restarted staticlet, and deleting a pod releases all it had.
func TestPodNetwork(t *testing.T) {
	e := newEnv(t)
	// Masquerading turns on IP forwarding; give the host back what it had.
	const forward = "/proc/sys/net/ipv4/ip_forward"
	if was, err := os.ReadFile(forward); err == nil {
		t.Cleanup(func() { _ = os.WriteFile(forward, was, 0o644) })
	}
	d := e.start("--masquerade=true")
	if got := e.net.masqueradeRules(t); got != 1 {
		t.Errorf("%d masquerade rules in table %s, want 1", got, e.net.table)
	}
	hostPort := 20000 + int(e.net.cidr.Addr().As4()[2])*8 + int(e.net.cidr.Addr().As4()[1]%8)
	e.write("a.yaml", httpdPod("a", "", hostPort))
	a := d.waitPod("a-"+testNode, 30*time.Second, "pod a running with an IP", func(p *v1.Pod) bool { return running(p) && p.Status.PodIP != "" })
	ipA := a.Status.PodIP
	if addr, err := netip.ParseAddr(ipA); err != nil || !e.net.cidr.Contains(addr) || len(a.Status.PodIPs) != 1 {
		t.Fatalf("pod a: podIP %q podIPs %v, want one address in %s", ipA, a.Status.PodIPs, e.net.cidr)
	}
	if a.Status.HostIP == "" || a.Status.HostIP == ipA {
		t.Errorf("pod a: hostIP %q, want the node's address", a.Status.HostIP)
	}
	e.write("b.yaml", httpdPod("b", ipA, 0))
	b := d.waitPod("b-"+testNode, 30*time.Second, "pod b running with an IP", func(p *v1.Pod) bool { return running(p) && p.Status.PodIP != "" })
	ipB := b.Status.PodIP
	if addr, err := netip.ParseAddr(ipB); err != nil || !e.net.cidr.Contains(addr) || ipB == ipA {
		t.Fatalf("pod b: podIP %q, want another address in %s than a's %s", ipB, e.net.cidr, ipA)
	}
	// a serves its own address (status.podIP reached its environment);
	// b serves what it fetched from a.
	waitGet(t, net.JoinHostPort(ipA, "8080"), ipA)
	waitGet(t, net.JoinHostPort(ipB, "8080"), ipA)
	waitGet(t, net.JoinHostPort(a.Status.HostIP, fmt.Sprint(hostPort)), ipA)
	hosts, _ := filepath.Glob(filepath.Join(e.root, "pods", string(a.UID), "etc-hosts"))
	if len(hosts) == 1 {
		if b, _ := os.ReadFile(hosts[0]); !strings.Contains(string(b), ipA+"\t") {
			t.Errorf("pod a's /etc/hosts has no line for %s:\n%s", ipA, b)
		}
	} else {
		t.Errorf("pod a's etc-hosts not found")
	}

	veths := e.net.veths(t)
	if len(veths) != 2 {
		t.Fatalf("veths on the bridge: %v, want 2", veths)
	}
	allocs := e.allocations()
	if !slices.Equal(allocs, sortedOf(ipA, ipB)) {
		t.Errorf("address files %v, want %s and %s", allocs, ipA, ipB)
	}

	// A restarted staticlet keeps the addresses, veths and rules.
	d.kill()
	d = e.start("--masquerade=true")
	for name, ip := range map[string]string{"a-" + testNode: ipA, "b-" + testNode: ipB} {
		p := d.waitPod(name, 30*time.Second, name+" running", running)
		if p.Status.PodIP != ip || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s after a restart: podIP %q restarts %d, want %s and 0", name, p.Status.PodIP, p.Status.ContainerStatuses[0].RestartCount, ip)
		}
	}
	if got := e.net.veths(t); !slices.Equal(got, veths) {
		t.Errorf("veths after a restart: %v, want %v", got, veths)
	}
	if got := e.allocations(); !slices.Equal(got, allocs) {
		t.Errorf("address files after a restart: %v, want %v", got, allocs)
	}
	waitGet(t, net.JoinHostPort(a.Status.HostIP, fmt.Sprint(hostPort)), ipA)

	// Deleting a pod releases its address, veth and hostPort rule.
	e.remove("a.yaml")
	waitFor(t, 30*time.Second, "pod a's address released", func() (bool, string) {
		got := e.allocations()
		return slices.Equal(got, []string{ipB}), fmt.Sprint(got)
	})
	if got := e.net.veths(t); len(got) != 1 {
		t.Errorf("veths after deleting a: %v, want one", got)
	}
	owners, err := (netns.NAT{Table: e.net.table}).HostPortOwners()
	if err != nil || len(owners) != 0 {
		t.Errorf("hostPort rules after deleting a: %v, %v; want none", owners, err)
	}
	if _, err := get(net.JoinHostPort(a.Status.HostIP, fmt.Sprint(hostPort))); err == nil {
		t.Errorf("the hostPort still answers after deleting a")
	}
	e.remove("b.yaml")
	waitFor(t, 30*time.Second, "every address released", func() (bool, string) {
		got := e.allocations()
		return len(got) == 0 && len(e.net.veths(t)) == 0 && len(e.sandboxPins()) == 0, fmt.Sprint(got, e.net.veths(t), e.sandboxPins())
	})
}

func sortedOf(s ...string) []string {
	slices.Sort(s)
	return s
}

// TestNetworkKilledMidSetup kills staticlet while a pod's network is being
// set up, at each step, and checks that the next start leaves no stray
// veth, address file, hostPort rule or pinned namespace.
func TestNetworkKilledMidSetup(t *testing.T) {
	e := newEnv(t)
	e.extraEnv = []string{"STATICLET_TEST_NETWORK_STEP_PAUSE=3s"}
	steps := []struct {
		name string
		done func() bool
	}{
		{"address allocated", func() bool { return len(e.allocations()) > 0 }},
		{"veth attached", func() bool { return len(e.net.veths(t)) > 0 }},
		{"hostPort added", func() bool {
			owners, _ := (netns.NAT{Table: e.net.table}).HostPortOwners()
			return len(owners) > 0
		}},
	}
	for _, step := range steps {
		d := e.start()
		e.write("web.yaml", httpdPod("web", "", 20000+int(e.net.cidr.Addr().As4()[2])))
		waitFor(t, 30*time.Second, step.name, func() (bool, string) { return step.done(), "" })
		d.kill()
		e.remove("web.yaml")
		// Restart with nothing to run: the start's sweep removes it all.
		d = e.start()
		waitFor(t, 10*time.Second, "nothing left after killing staticlet at "+step.name, func() (bool, string) {
			owners, _ := (netns.NAT{Table: e.net.table}).HostPortOwners()
			left := fmt.Sprint(e.allocations(), e.net.veths(t), e.sandboxPins(), owners, strayVeths(t, nil))
			return len(e.allocations()) == 0 && len(e.net.veths(t)) == 0 && len(e.sandboxPins()) == 0 &&
				len(owners) == 0 && len(strayVeths(t, nil)) == 0, left
		})
		d.kill()
	}
	// And a pod set up after such a start runs normally.
	e.extraEnv = nil
	d := e.start()
	e.write("web.yaml", httpdPod("web", "", 0))
	p := d.waitPod("web-"+testNode, 30*time.Second, "web running", func(p *v1.Pod) bool { return running(p) && p.Status.PodIP != "" })
	waitGet(t, net.JoinHostPort(p.Status.PodIP, "8080"), p.Status.PodIP)
}
