package main

import (
	"runtime"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/nodeinfo"
)

// TestNodeObject: the node says what the kubelet's would of the machine
// and of staticlet.
func TestNodeObject(t *testing.T) {
	m := nodeinfo.Machine{MachineID: "mid", BootID: "bid", KernelVersion: "6.1.0", OSImage: "Debian", CPUs: 2, MemoryBytes: 4 << 30}
	f := nodeFacts{name: "n1", started: time.Now(), addresses: []string{"192.0.2.7", "2001:db8::7"},
		labels: map[string]string{"tier": "edge", "kubernetes.io/hostname": "n1.example", "node.kubernetes.io/pool": "a"}, runtimeVersion: "2.1.4", maxPods: 50, storageBytes: 10 << 30, apiPort: 6443}
	n := nodeObject(f, m)
	for k, want := range map[string]string{
		"kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH,
		// --node-labels, over the node's own of the same key, as with the
		// kubelet.
		"tier": "edge", "kubernetes.io/hostname": "n1.example", "node.kubernetes.io/pool": "a",
	} {
		if n.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	info := n.Status.NodeInfo
	if info.ContainerRuntimeVersion != "containerd://2.1.4" || info.KubeletVersion != version || info.OperatingSystem != "linux" ||
		info.MachineID != "mid" || info.OSImage != "Debian" {
		t.Errorf("nodeInfo = %+v", info)
	}
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}, {Type: v1.NodeInternalIP, Address: "2001:db8::7"},
		{Type: v1.NodeHostName, Address: "n1"}}
	if !slices.Equal(n.Status.Addresses, want) {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, want)
	}
	if p := n.Status.Capacity[v1.ResourcePods]; p.Value() != 50 {
		t.Errorf("capacity pods = %v, want 50", p.String())
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 6443 {
		t.Errorf("kubeletEndpoint = %+v", n.Status.DaemonEndpoints)
	}
	// Without an address or a runtime version, neither is made up.
	n = nodeObject(nodeFacts{name: "n1"}, m)
	if len(n.Status.Addresses) != 1 || n.Status.NodeInfo.ContainerRuntimeVersion != "" || n.Labels[v1.LabelHostname] != "n1" {
		t.Errorf("node without address nor runtime = %+v", n.Status)
	}
}

// TestNodeUsage samples this machine's CPU over a short window, with the
// working set handed in.
func TestNodeUsage(t *testing.T) {
	u, err := nodeUsage(func() (uint64, error) { return 42, nil })(t.Context(), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if u.MemoryWorkingSetBytes != 42 || u.CPUNanoCores > uint64(runtime.NumCPU())*1e9 {
		t.Errorf("nodeUsage = %+v", u)
	}
}
