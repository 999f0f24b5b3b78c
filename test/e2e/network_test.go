package e2e

import (
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

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/podnet/netns"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// strayVeths lists staticlet-named veths on the host that are not on the
// bridge (a veth created before it was attached would be one).
func strayVeths(t *testing.T, keep []string) []string {
	t.Helper()
	var out []string
	for _, l := range harness.HostLinks(t) {
		if l.Type() == "veth" && strings.HasPrefix(l.Attrs().Name, "stl") && l.Attrs().MasterIndex == 0 && !slices.Contains(keep, l.Attrs().Name) {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// allocations lists the address files under the root dir.
func allocations(e *harness.Env) []string {
	files, _ := filepath.Glob(filepath.Join(e.Root, "network", "ipam", "*", "*"))
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
func sandboxPins(e *harness.Env) []string {
	dirs, _ := filepath.Glob(filepath.Join(e.Root, "sandboxes", "*"))
	return dirs
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
	harness.WaitFor(t, 20*time.Second, "GET "+addr+" = "+want, func() (bool, string) {
		got, err := get(addr)
		return err == nil && got == want, fmt.Sprintf("%q, %v", got, err)
	})
}

// TestPodNetwork runs two pods on the pod network: each gets an address in
// the range, the host reaches both, one reaches the other, a hostPort
// answers on the host's address and on 127.0.0.1, the addresses and veths
// survive a killed and restarted staticlet, and deleting a pod releases
// all it had.
func TestPodNetwork(t *testing.T) {
	e := harness.NewEnv(t)
	// Masquerading turns on IP forwarding; give the host back what it had.
	const forward = "/proc/sys/net/ipv4/ip_forward"
	if was, err := os.ReadFile(forward); err == nil {
		t.Cleanup(func() { _ = os.WriteFile(forward, was, 0o644) })
	}
	d := e.Start("--masquerade=true")
	// The range's, and loopback's for hostPorts on 127.0.0.1.
	if got := e.Net.MasqueradeRules(t); got != 2 {
		t.Errorf("%d masquerade rules in table %s, want 2", got, e.Net.Table)
	}
	hostPort := 20000 + int(e.Net.CIDR.Addr().As4()[2])*8 + int(e.Net.CIDR.Addr().As4()[1]%8)
	e.Write("a.yaml", httpdPod("a", "", hostPort))
	a := d.WaitPod("a-"+harness.TestNode, 30*time.Second, "pod a running with an IP", func(p *v1.Pod) bool { return harness.Running(p) && p.Status.PodIP != "" })
	ipA := a.Status.PodIP
	if addr, err := netip.ParseAddr(ipA); err != nil || !e.Net.CIDR.Contains(addr) || len(a.Status.PodIPs) != 1 {
		t.Fatalf("pod a: podIP %q podIPs %v, want one address in %s", ipA, a.Status.PodIPs, e.Net.CIDR)
	}
	if a.Status.HostIP == "" || a.Status.HostIP == ipA {
		t.Errorf("pod a: hostIP %q, want the node's address", a.Status.HostIP)
	}
	e.Write("b.yaml", httpdPod("b", ipA, 0))
	b := d.WaitPod("b-"+harness.TestNode, 30*time.Second, "pod b running with an IP", func(p *v1.Pod) bool { return harness.Running(p) && p.Status.PodIP != "" })
	ipB := b.Status.PodIP
	if addr, err := netip.ParseAddr(ipB); err != nil || !e.Net.CIDR.Contains(addr) || ipB == ipA {
		t.Fatalf("pod b: podIP %q, want another address in %s than a's %s", ipB, e.Net.CIDR, ipA)
	}
	// a serves its own address (status.podIP reached its environment);
	// b serves what it fetched from a.
	waitGet(t, net.JoinHostPort(ipA, "8080"), ipA)
	waitGet(t, net.JoinHostPort(ipB, "8080"), ipA)
	waitGet(t, net.JoinHostPort(a.Status.HostIP, fmt.Sprint(hostPort)), ipA)
	// On loopback too, as with the kubelet's portmap plugin.
	waitGet(t, net.JoinHostPort("127.0.0.1", fmt.Sprint(hostPort)), ipA)
	hosts, _ := filepath.Glob(filepath.Join(e.Root, "pods", string(a.UID), "etc-hosts"))
	if len(hosts) == 1 {
		if b, _ := os.ReadFile(hosts[0]); !strings.Contains(string(b), ipA+"\t") {
			t.Errorf("pod a's /etc/hosts has no line for %s:\n%s", ipA, b)
		}
	} else {
		t.Errorf("pod a's etc-hosts not found")
	}

	veths := e.Net.Veths(t)
	if len(veths) != 2 {
		t.Fatalf("veths on the bridge: %v, want 2", veths)
	}
	allocs := allocations(e)
	if !slices.Equal(allocs, sortedOf(ipA, ipB)) {
		t.Errorf("address files %v, want %s and %s", allocs, ipA, ipB)
	}

	// A restarted staticlet keeps the addresses, veths and rules.
	d.Kill()
	d = e.Start("--masquerade=true")
	for name, ip := range map[string]string{"a-" + harness.TestNode: ipA, "b-" + harness.TestNode: ipB} {
		p := d.WaitPod(name, 30*time.Second, name+" running", harness.Running)
		if p.Status.PodIP != ip || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s after a restart: podIP %q restarts %d, want %s and 0", name, p.Status.PodIP, p.Status.ContainerStatuses[0].RestartCount, ip)
		}
	}
	if got := e.Net.Veths(t); !slices.Equal(got, veths) {
		t.Errorf("veths after a restart: %v, want %v", got, veths)
	}
	if got := allocations(e); !slices.Equal(got, allocs) {
		t.Errorf("address files after a restart: %v, want %v", got, allocs)
	}
	waitGet(t, net.JoinHostPort(a.Status.HostIP, fmt.Sprint(hostPort)), ipA)
	waitGet(t, net.JoinHostPort("127.0.0.1", fmt.Sprint(hostPort)), ipA)
	if got := e.Net.MasqueradeRules(t); got != 2 {
		t.Errorf("%d masquerade rules in table %s after a restart, want 2", got, e.Net.Table)
	}

	// Deleting a pod releases its address, veth and hostPort rule.
	e.Remove("a.yaml")
	harness.WaitFor(t, 30*time.Second, "pod a's address released", func() (bool, string) {
		got := allocations(e)
		return slices.Equal(got, []string{ipB}), fmt.Sprint(got)
	})
	if got := e.Net.Veths(t); len(got) != 1 {
		t.Errorf("veths after deleting a: %v, want one", got)
	}
	owners, err := (netns.NAT{Table: e.Net.Table}).HostPortOwners()
	if err != nil || len(owners) != 0 {
		t.Errorf("hostPort rules after deleting a: %v, %v; want none", owners, err)
	}
	for _, host := range []string{a.Status.HostIP, "127.0.0.1"} {
		if _, err := get(net.JoinHostPort(host, fmt.Sprint(hostPort))); err == nil {
			t.Errorf("the hostPort still answers on %s after deleting a", host)
		}
	}
	e.Remove("b.yaml")
	harness.WaitFor(t, 30*time.Second, "every address released", func() (bool, string) {
		got := allocations(e)
		return len(got) == 0 && len(e.Net.Veths(t)) == 0 && len(sandboxPins(e)) == 0, fmt.Sprint(got, e.Net.Veths(t), sandboxPins(e))
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
	e := harness.NewEnv(t)
	e.ExtraEnv = []string{"STATICLET_TEST_NETWORK_STEP_PAUSE=3s"}
	steps := []struct {
		name string
		done func() bool
	}{
		{"address allocated", func() bool { return len(allocations(e)) > 0 }},
		{"veth attached", func() bool { return len(e.Net.Veths(t)) > 0 }},
		{"hostPort added", func() bool {
			owners, _ := (netns.NAT{Table: e.Net.Table}).HostPortOwners()
			return len(owners) > 0
		}},
	}
	for _, step := range steps {
		d := e.Start()
		e.Write("web.yaml", httpdPod("web", "", 20000+int(e.Net.CIDR.Addr().As4()[2])))
		harness.WaitFor(t, 30*time.Second, step.name, func() (bool, string) { return step.done(), "" })
		d.Kill()
		e.Remove("web.yaml")
		// Restart with nothing to run: the start's sweep removes it all.
		d = e.Start()
		harness.WaitFor(t, 10*time.Second, "nothing left after killing staticlet at "+step.name, func() (bool, string) {
			owners, _ := (netns.NAT{Table: e.Net.Table}).HostPortOwners()
			left := fmt.Sprint(allocations(e), e.Net.Veths(t), sandboxPins(e), owners, strayVeths(t, nil))
			return len(allocations(e)) == 0 && len(e.Net.Veths(t)) == 0 && len(sandboxPins(e)) == 0 &&
				len(owners) == 0 && len(strayVeths(t, nil)) == 0, left
		})
		d.Kill()
	}
	// And a pod set up after such a start runs normally.
	e.ExtraEnv = nil
	d := e.Start()
	e.Write("web.yaml", httpdPod("web", "", 0))
	p := d.WaitPod("web-"+harness.TestNode, 30*time.Second, "web running", func(p *v1.Pod) bool { return harness.Running(p) && p.Status.PodIP != "" })
	waitGet(t, net.JoinHostPort(p.Status.PodIP, "8080"), p.Status.PodIP)
}
