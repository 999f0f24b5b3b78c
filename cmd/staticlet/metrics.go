package main

import (
	"github.com/staticlet/staticlet/internal/metrics"
	"github.com/staticlet/staticlet/internal/status"
)

// newMetrics returns the daemon's metrics, whose pod and manifest gauges
// are read from store at each scrape.
func newMetrics(store *status.Store) *metrics.Metrics {
	return metrics.New(metrics.Config{
		Version: version,
		Pods:    store.Pods,
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
