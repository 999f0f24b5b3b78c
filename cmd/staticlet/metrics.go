package main

import (
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/metrics"
	"github.com/staticlet/staticlet/internal/status"
)

// newMetrics returns the daemon's metrics, whose pod and manifest gauges
// are read from store at each scrape.
func newMetrics(store *status.Store) *metrics.Metrics {
	return metrics.New(metrics.Config{
		Version: version,
		Pods:    store.Pods,
		NodeConditions: func() []v1.NodeCondition {
			return store.Node().Status.Conditions
		},
		ManifestErrors: func() map[string]int {
			errs := map[string]int{}
			for _, m := range store.Manifests() {
				// Every source that has read a file shows, with 0 when
				// all are good.
				n := errs[m.Source]
				if m.Error != "" {
					n++
				}
				errs[m.Source] = n
			}
			return errs
		},
	})
}
