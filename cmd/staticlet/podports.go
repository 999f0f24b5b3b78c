package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/kubeapi"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox"
)

// podDialer serves the Kubernetes API's port forwarding as the kubelet
// does: it connects to 127.0.0.1:port from inside the pod's network
// namespace (the sandbox's pin, or a running container's), so that a
// server listening on the pod's loopback is reached; a hostNetwork pod's
// port is the node's.
func podDialer(rt *sandbox.Runtime) kubeapi.PodDialer {
	return func(ctx context.Context, p *v1.Pod, port int32) (net.Conn, error) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		if p.Spec.HostNetwork {
			d := net.Dialer{FallbackDelay: -1}
			return d.DialContext(ctx, "tcp", addr)
		}
		key := pod.Key{Namespace: p.Namespace, Name: p.Name}
		recs, err := rt.PodContainers(ctx, key)
		if err != nil {
			return nil, err
		}
		id, sb, ok := netnsHolder(recs, string(p.UID))
		if !ok {
			return nil, fmt.Errorf("pod %s has no sandbox running", key)
		}
		return rt.DialPod(ctx, id, sb, "tcp", addr)
	}
}

// netnsHolder picks, among a pod's containers, the sandbox of the pod
// instance uid that has not exited (the latest one) and the container
// whose process holds its network namespace: a running container of that
// sandbox, or the sandbox itself. DialPod enters the sandbox's pinned
// namespace when there is one, and the holder's otherwise.
func netnsHolder(recs []pod.Record, uid string) (id, sandboxID string, ok bool) {
	var sb *pod.Record
	for i := range recs {
		r := &recs[i]
		if r.Kind != pod.KindSandbox || r.PodUID != uid || r.State == pod.TaskExited {
			continue
		}
		if sb == nil || r.CreatedAt.After(sb.CreatedAt) {
			sb = r
		}
	}
	if sb == nil {
		return "", "", false
	}
	for _, r := range recs {
		if r.SandboxID == sb.ID && r.State == pod.TaskRunning {
			return r.ID, sb.ID, true
		}
	}
	return sb.ID, sb.ID, true
}
