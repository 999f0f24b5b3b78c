package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/nodeinfo"
	"github.com/staticlet/staticlet/internal/status"
)

// nodeFacts are what the node object says that staticlet knows rather
// than reads of the machine.
type nodeFacts struct {
	name    string
	started time.Time
	// addresses are the node's InternalIPs, the primary first; none when
	// it has none.
	addresses []string
	// labels are --node-labels, added to the node's own.
	labels map[string]string
	// runtimeVersion is containerd's version, empty when unknown.
	runtimeVersion string
	// maxPods is --max-pods, 0 for no limit.
	maxPods int
	// storageBytes is the size of --root-dir's filesystem, 0 if unknown.
	storageBytes uint64
	// apiPort is the Kubernetes API's port, 0 when it is not served.
	apiPort int32
}

// nodeObject is the node that GET /node and the Kubernetes API show, but
// for its conditions and CDI devices: what the kubelet would report of
// this machine.
func nodeObject(f nodeFacts, m nodeinfo.Machine) v1.Node {
	capacity, allocatable := nodeinfo.Resources(m, f.maxPods, f.storageBytes)
	n := v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: f.name, CreationTimestamp: metav1.NewTime(f.started),
			Labels: map[string]string{
				v1.LabelHostname:          f.name,
				v1.LabelOSStable:          runtime.GOOS,
				v1.LabelArchStable:        runtime.GOARCH,
				"beta.kubernetes.io/os":   runtime.GOOS,
				"beta.kubernetes.io/arch": runtime.GOARCH,
			},
		},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			DaemonEndpoints: v1.NodeDaemonEndpoints{
				KubeletEndpoint: v1.DaemonEndpoint{Port: f.apiPort},
			},
			NodeInfo: v1.NodeSystemInfo{
				MachineID:       m.MachineID,
				SystemUUID:      m.SystemUUID,
				BootID:          m.BootID,
				KernelVersion:   m.KernelVersion,
				OSImage:         m.OSImage,
				KubeletVersion:  version,
				OperatingSystem: runtime.GOOS,
				Architecture:    runtime.GOARCH,
			},
		},
	}
	if f.runtimeVersion != "" {
		n.Status.NodeInfo.ContainerRuntimeVersion = "containerd://" + f.runtimeVersion
	}
	for _, ip := range f.addresses {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	withLabels(&n, f.labels)
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: f.name})
	return n
}

// runtimeVersionTimeout bounds asking containerd its version for the
// node object.
const runtimeVersionTimeout = 5 * time.Second

// readNode reads the machine and the facts of f that need reading (the
// runtime's version, the root dir's filesystem), and returns the node
// object. What cannot be read is left out of it, with a warning.
func readNode(ctx context.Context, f nodeFacts, rootDir string, runtimeVersion func(context.Context) (string, error), logger *slog.Logger) v1.Node {
	m, err := nodeinfo.Read("/")
	if err != nil {
		logger.Warn("reading the machine for the node object", "err", err)
	}
	if f.storageBytes, err = nodeinfo.FilesystemBytes(rootDir); err != nil {
		logger.Warn("reading the node's ephemeral-storage capacity", "err", err)
	}
	vctx, cancel := context.WithTimeout(ctx, runtimeVersionTimeout)
	defer cancel()
	if f.runtimeVersion, err = runtimeVersion(vctx); err != nil {
		logger.Warn("reading containerd's version for the node object", "err", err)
	}
	return nodeObject(f, m)
}

// nodeUsage samples the whole node's usage for the Kubernetes API's
// metrics.k8s.io nodes (kubectl top node): the CPU time of /proc/stat
// at both ends of the window, and the memory working set (the runtime's
// NodeWorkingSet) at its end.
func nodeUsage(workingSet func() (uint64, error)) func(ctx context.Context, window time.Duration) (status.Usage, error) {
	return func(ctx context.Context, window time.Duration) (status.Usage, error) {
		first, err := nodeinfo.ReadCPUTime("/")
		if err != nil {
			return status.Usage{}, err
		}
		start := time.Now()
		timer := time.NewTimer(window)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return status.Usage{}, fmt.Errorf("sampling the node's usage: %w", ctx.Err())
		case <-timer.C:
		}
		second, err := nodeinfo.ReadCPUTime("/")
		if err != nil {
			return status.Usage{}, err
		}
		elapsed := time.Since(start)
		ws, err := workingSet()
		if err != nil {
			return status.Usage{}, err
		}
		var cpu uint64
		if second > first && elapsed > 0 {
			cpu = uint64(float64(second-first) / elapsed.Seconds())
		}
		return status.Usage{CPUNanoCores: cpu, MemoryWorkingSetBytes: ws}, nil
	}
}
