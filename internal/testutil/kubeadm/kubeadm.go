// Package kubeadm holds, as a fixture for tests, the KubeletConfiguration
// kubeadm writes on a node (/var/lib/kubelet/config.yaml, its zero
// durations included), embedded so that a test binary run elsewhere (in
// the test VM) carries it. The parser's tests (internal/kubeletconfig) and
// the end-to-end test of staticlet run --config (test/e2e) read the same
// file. It holds no state.
package kubeadm

import (
	_ "embed"
	"strconv"
	"strings"
)

//go:embed kubelet-config.yaml
var kubeletConfig string

// KubeletConfig returns kubeadm's KubeletConfiguration with staticPodPath
// relative to the file, the given containerd socket, pod log directory and
// healthz port, and evictionHard added.
func KubeletConfig(containerd, logs string, port int) string {
	return strings.NewReplacer("CONTAINERD", containerd, "LOGS", logs, "PORT", strconv.Itoa(port)).Replace(kubeletConfig)
}
