package e2e

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// TestNodeIPAndLabels: --node-ip's addresses (IPv6 first when the host has
// both, to show their order is kept) are the node's InternalIPs and the
// pods' hostIPs, and a host-network pod's podIPs; --node-labels are among
// the node's labels, as `staticlet get node -o yaml` shows them.
func TestNodeIPAndLabels(t *testing.T) {
	ips := defaultRouteAddresses(t)
	t.Logf("--node-ip %s", strings.Join(ips, ","))
	e := harness.NewEnv(t)
	d := e.Start("--node-ip", strings.Join(ips, ","), "--node-labels", "example.com/rack=r1, node.kubernetes.io/pool=edge")

	out, err := d.CLI("get", "node", "-o", "yaml")
	if err != nil {
		t.Fatalf("get node: %v\n%s", err, out)
	}
	var node v1.Node
	if err := yaml.Unmarshal([]byte(out), &node); err != nil {
		t.Fatalf("get node -o yaml: %v\n%s", err, out)
	}
	var internal []string
	for _, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if !slices.Equal(internal, ips) {
		t.Errorf("InternalIPs %v, want --node-ip's %v", internal, ips)
	}
	if node.Labels["example.com/rack"] != "r1" || node.Labels["node.kubernetes.io/pool"] != "edge" || node.Labels[v1.LabelHostname] != harness.TestNode {
		t.Errorf("labels %v, want --node-labels' beside the node's own", node.Labels)
	}

	e.Write("host.yaml", harness.SleeperPod("host", "x", true))
	e.Write("pod.yaml", harness.SleeperPod("pod", "x", false))
	for _, name := range []string{"host", "pod"} {
		p := d.WaitPod(name+"-"+harness.TestNode, 30*time.Second, name+" running", harness.Running)
		var hostIPs, podIPs []string
		for _, ip := range p.Status.HostIPs {
			hostIPs = append(hostIPs, ip.IP)
		}
		for _, ip := range p.Status.PodIPs {
			podIPs = append(podIPs, ip.IP)
		}
		if p.Status.HostIP != ips[0] || !slices.Equal(hostIPs, ips) {
			t.Errorf("%s: hostIP %q, hostIPs %v, want %v", name, p.Status.HostIP, hostIPs, ips)
		}
		if hostNet := name == "host"; hostNet != slices.Equal(podIPs, ips) {
			t.Errorf("%s: podIPs %v; want --node-ip's %v on the host's network only", name, podIPs, ips)
		}
	}
}

// TestNodeFlagsRefused: an address the kubelet would not take, or a label
// it may not set, stops the start with an error naming the flag.
func TestNodeFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-ip", "127.0.0.1"}, `--node-ip "127.0.0.1": 127.0.0.1: a loopback address`},
		{[]string{"--node-ip", "192.0.2.7,192.0.2.8"}, `--node-ip "192.0.2.7,192.0.2.8": want one IP address or a dual-stack pair`},
		{[]string{"--node-ip", "node1"}, `--node-ip "node1": "node1" is not an IP address`},
		{[]string{"--node-labels", "node-role.kubernetes.io/worker="}, `--node-labels "node-role.kubernetes.io/worker=": the kubelet may not set`},
		{[]string{"--node-labels", "rack=a b"}, `--node-labels "rack=a b": value "a b"`},
	} {
		args := append([]string{"run", "--root-dir", filepath.Join(dir, "root"), "--status-socket", filepath.Join(dir, "s.sock"),
			"--manifest-dir", dir, "--containerd-address", filepath.Join(dir, "none.sock")}, tc.args...)
		out, err := exec.Command(harness.Binary(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("staticlet %s: %v, %s; want a failure saying %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "root")); err == nil {
		t.Errorf("a refused start made --root-dir")
	}
}

// defaultRouteAddresses are the global addresses of the interface of the
// IPv4 default route: its IPv6 one first, if it has one, then its IPv4.
func defaultRouteAddresses(t *testing.T) []string {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var iface string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 7 && fields[1] == "00000000" && fields[7] == "00000000" {
			iface = fields[0]
			break
		}
	}
	var v4, v6 string
	if link, err := net.InterfaceByName(iface); err == nil {
		addrs, _ := link.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || !n.IP.IsGlobalUnicast() {
				continue
			}
			if n.IP.To4() != nil && v4 == "" {
				v4 = n.IP.String()
			} else if n.IP.To4() == nil && v6 == "" {
				v6 = n.IP.String()
			}
		}
	}
	if v4 == "" {
		tier.Missing(t, "an IPv4 default route with a global address, for --node-ip")
	}
	if v6 == "" {
		return []string{v4}
	}
	return []string{v6, v4}
}
