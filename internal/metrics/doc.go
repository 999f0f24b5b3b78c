// Package metrics owns staticlet's Prometheus metrics: a registry of its
// own (never the global default one) with the Go and process collectors,
// the counters and histograms that the other packages feed, and gauges
// computed at each scrape from the pods and manifests as the status
// socket reports them, so that nothing has to push them.
//
// Names follow the kubelet's where the kubelet has the same metric
// (kubelet_running_pods, prober_probe_total...), so that its dashboards
// carry over, and start with staticlet_ otherwise. The package serves
// nothing itself: Handler is mounted by whoever serves HTTP. It imports
// no other staticlet package than pod; the packages that feed it know
// nothing of it (cmd hands them its methods as plain funcs). All methods
// are safe for concurrent use.
package metrics
