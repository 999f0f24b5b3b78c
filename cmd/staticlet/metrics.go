package main

import (
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/metrics"
	"github.com/staticlet/staticlet/internal/status"
)

// newMetrics returns the daemon's metrics, whose pod and manifest gauges
// are read from store at each scrape, and the device gauge from devices
// and the pods' statuses.
func newMetrics(store *status.Store, devices status.DeviceLister) *metrics.Metrics {
	return metrics.New(metrics.Config{
		Version: version,
		Pods:    store.Pods,
		Devices: func() []metrics.DeviceCounts {
			return deviceCounts(status.HeldDevices(devices().Devices, store.Pods()))
		},
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

// deviceCounts counts devs by kind and state, the kinds in the order of
// their first device.
func deviceCounts(devs []status.Device) []metrics.DeviceCounts {
	var out []metrics.DeviceCounts
	index := map[string]int{}
	for _, d := range devs {
		i, ok := index[d.Kind]
		if !ok {
			i = len(out)
			index[d.Kind] = i
			out = append(out, metrics.DeviceCounts{Kind: d.Kind})
		}
		switch d.State {
		case status.DeviceAllocated:
			out[i].Allocated++
		case status.DeviceShared:
			out[i].Shared++
		default:
			out[i].Free++
		}
	}
	return out
}
