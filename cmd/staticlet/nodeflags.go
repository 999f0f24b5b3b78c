package main

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticlet/staticlet/internal/diskpressure"
	"github.com/staticlet/staticlet/internal/nodeinfo"
)

// nodeConfig is the node's identity beyond its name: --node-ip,
// --node-labels and its Lease's length; and the thresholds of its
// DiskPressure condition.
type nodeConfig struct {
	ip     string   // --node-ip as given; empty: the default route's
	labels []string // --node-labels: "key=value" each
	// leaseSeconds is the Lease's length (nodeLeaseDurationSeconds); 0
	// is the kubelet's default.
	leaseSeconds int32
	// evictionHard is --eviction-hard (evictionHard), signal to value:
	// the thresholds of the DiskPressure condition, which check parses
	// into diskThresholds, with the signals named that staticlet does
	// not watch.
	evictionHard     map[string]string
	diskThresholds   diskpressure.Thresholds
	unwatchedSignals []string
}

// nodeAddresses are the node's InternalIPs, from --node-ip or, when it
// names none (or 0.0.0.0 or ::), the default route's address; without a
// default route, the first global IPv4 address not the pod bridge's. An
// address --node-ip gives must be one of the host's, as the kubelet checks.
func nodeAddresses(flag, podBridge string) ([]string, error) {
	given, err := nodeinfo.ParseNodeIP(flag)
	if err != nil {
		return nil, fmt.Errorf("--node-ip %q: %w", flag, err)
	}
	var host []netip.Addr
	if len(given) > 0 && !given[0].IsUnspecified() {
		if host, err = nodeinfo.HostAddresses(); err != nil {
			return nil, fmt.Errorf("--node-ip %q: %w", flag, err)
		}
	}
	ips, err := nodeinfo.NodeIPs("/", given, host)
	if err != nil {
		return nil, fmt.Errorf("--node-ip %q: %w", flag, err)
	}
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	if len(out) == 0 {
		if ip := hostIP(podBridge); ip != "" {
			out = []string{ip}
		}
	}
	return out, nil
}

// kubeletLabelDomains are the label domains under kubernetes.io that the
// kubelet may set on its own Node, with their subdomains.
var kubeletLabelDomains = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}

// kubeletLabels are the other labels under kubernetes.io the kubelet may
// set on its own Node.
var kubeletLabels = []string{
	v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyRegion,
	v1.LabelFailureDomainBetaZone, v1.LabelFailureDomainBetaRegion,
	v1.LabelInstanceType, v1.LabelInstanceTypeStable, v1.LabelOSStable, v1.LabelArchStable,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}

// parseNodeLabels parses --node-labels as the kubelet does: "key=value"
// items (a key alone has the empty value; a later key wins), each key a
// qualified name and each value a label value, and none under kubernetes.io
// or k8s.io (or their subdomains) but those the kubelet may set on its own
// Node (node-role.kubernetes.io/ is not among them).
func parseNodeLabels(items []string) (map[string]string, error) {
	labels := map[string]string{}
	for _, item := range items {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, _ := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--node-labels %q: key %q: %s", item, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("--node-labels %q: value %q: %s", item, v, strings.Join(errs, "; "))
		}
		if kubernetesLabel(k) && !kubeletLabel(k) {
			return nil, fmt.Errorf("--node-labels %q: the kubelet may not set %q on its own Node: under kubernetes.io and k8s.io, only %s, "+
				"and labels under %s", item, k, strings.Join(kubeletLabels, ", "), strings.Join(kubeletLabelDomains, " or "))
		}
		labels[k] = v
	}
	return labels, nil
}

// labelDomain is the prefix of a label key, "" for none.
func labelDomain(key string) string {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return domain
}

// inDomain tells whether domain is d or a subdomain of it.
func inDomain(domain, d string) bool {
	return domain == d || strings.HasSuffix(domain, "."+d)
}

// kubernetesLabel tells whether key is in Kubernetes' own domains.
func kubernetesLabel(key string) bool {
	d := labelDomain(key)
	return inDomain(d, "kubernetes.io") || inDomain(d, "k8s.io")
}

// kubeletLabel tells whether the kubelet may set key on its own Node.
func kubeletLabel(key string) bool {
	if slices.Contains(kubeletLabels, key) {
		return true
	}
	d := labelDomain(key)
	return slices.ContainsFunc(kubeletLabelDomains, func(allowed string) bool { return inDomain(d, allowed) })
}

// withLabels adds labels to the node's, over its own of the same key, as
// the kubelet lets --node-labels override its defaults.
func withLabels(n *v1.Node, labels map[string]string) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	maps.Copy(n.Labels, labels)
}
