package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const aliased = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: HOSTNET
  hostAliases:
  - ip: 192.0.2.10
    hostnames: [db.internal]
  dnsConfig:
    searches: [pods.test]
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "100000"]
    env:
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: HOST_IP
      valueFrom: {fieldRef: {fieldPath: status.hostIP}}
`

// TestPodFiles checks the /etc/hosts, /etc/resolv.conf and /etc/hostname a
// pod's container sees, read from the host through the process's root.
func TestPodFiles(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	host, _ := os.Hostname()
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	for _, hostNet := range []bool{false, true} {
		name := fmt.Sprintf("files-%v", hostNet)
		e.Write(name+".yaml", strings.NewReplacer("NAME", name, "HOSTNET", fmt.Sprint(hostNet)).Replace(aliased))
		p := d.WaitPod(name+"-"+harness.TestNode, 30*time.Second, name+" running", harness.Running)
		pid, err := e.PidOf(p.Status.ContainerStatuses[0])
		if err != nil {
			t.Fatal(err)
		}
		read := func(path string) string {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, path))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return string(b)
		}
		hosts, resolv, hostname := read("/etc/hosts"), read("/etc/resolv.conf"), read("/etc/hostname")
		if !strings.Contains(hosts, "192.0.2.10\tdb.internal\n") {
			t.Errorf("%s: /etc/hosts lacks the host alias:\n%s", name, hosts)
		}
		if !strings.Contains(resolv, "search pods.test") && !strings.Contains(resolv, " pods.test") {
			t.Errorf("%s: /etc/resolv.conf lacks the pod's search domain:\n%s", name, resolv)
		}
		for _, line := range strings.Split(string(hostResolv), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" && !strings.Contains(resolv, line) {
				t.Errorf("%s: /etc/resolv.conf lacks the host's %q (ClusterFirst without cluster DNS):\n%s", name, line, resolv)
			}
		}
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range []string{"HOST_IP=" + p.Status.HostIP, "POD_IP=" + p.Status.PodIP} {
			if !strings.Contains(string(environ), "\x00"+kv+"\x00") {
				t.Errorf("%s: environment lacks %q (the status's addresses)", name, kv)
			}
		}
		if hostNet && (p.Status.PodIP == "" || p.Status.PodIP != p.Status.HostIP) {
			t.Errorf("%s: podIP %q, want the host's %q under hostNetwork", name, p.Status.PodIP, p.Status.HostIP)
		}
		want := name + "-" + harness.TestNode + "\n"
		if hostNet {
			want = host + "\n"
		}
		if hostname != want {
			t.Errorf("%s: /etc/hostname = %q, want %q", name, hostname, want)
		}
	}
}
