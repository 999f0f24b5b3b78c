package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/diskpressure"
	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/status"
)

// logBudgetInterval is how often the pod logs are held to
// --pod-logs-max-total, the kubelet's containerLogMonitorInterval.
const logBudgetInterval = 10 * time.Second

// parseLogBudget reads --pod-logs-max-total: a size in bytes, 0 for none.
func parseLogBudget(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("--pod-logs-max-total %q: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("--pod-logs-max-total %q: want a size in bytes such as 1Gi, or 0 for no cap", s)
	}
	return n, nil
}

// runLogBudget holds the files under dir to max bytes in all, at once and
// then every logBudgetInterval, until ctx ends. Without a budget it
// returns at once.
func runLogBudget(ctx context.Context, dir string, max int64, logger *slog.Logger) error {
	if max <= 0 {
		return nil
	}
	t := time.NewTicker(logBudgetInterval)
	defer t.Stop()
	for {
		removed, err := logs.EnforceBudget(dir, max)
		if err != nil {
			logger.Warn("holding the pod logs to --pod-logs-max-total", "dir", dir, "err", err)
		}
		if len(removed) > 0 {
			var bytes int64
			for _, f := range removed {
				bytes += f.Size
			}
			logger.Info("removed the oldest container log files over --pod-logs-max-total",
				"files", len(removed), "bytes", bytes, "oldest", removed[0].Path)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// evictionHardFlag is --eviction-hard: the kubelet's comma-separated
// signal<value items, kept as a map of signal to value. As with the
// kubelet's flag, the first value given replaces the default and later
// ones (the flag repeated) add to it.
type evictionHardFlag struct {
	m   *map[string]string
	set bool
}

// newEvictionHardFlag is the flag setting *m, which it sets to the
// kubelet's default for the nodefs signals.
func newEvictionHardFlag(m *map[string]string) *evictionHardFlag {
	*m = diskpressure.DefaultEvictionHard()
	return &evictionHardFlag{m: m}
}

// String is the map in the flag's syntax, in signal order.
func (f *evictionHardFlag) String() string {
	var items []string
	for _, name := range slices.Sorted(maps.Keys(*f.m)) {
		items = append(items, name+"<"+(*f.m)[name])
	}
	return strings.Join(items, ",")
}

func (f *evictionHardFlag) Set(s string) error {
	items, err := diskpressure.SplitEvictionHard(s)
	if err != nil {
		return err
	}
	if !f.set {
		*f.m, f.set = map[string]string{}, true
	}
	maps.Copy(*f.m, items)
	return nil
}

// Type is the kubelet's name for the flag's type.
func (f *evictionHardFlag) Type() string { return "mapStringString" }

// logUnwatchedSignals logs, once, the signals --eviction-hard (or
// evictionHard) names that staticlet does not watch.
func logUnwatchedSignals(node nodeConfig, logger *slog.Logger) {
	if len(node.unwatchedSignals) > 0 {
		logger.Info("eviction thresholds of signals staticlet does not watch have no effect (it evicts no pod)",
			"signals", strings.Join(node.unwatchedSignals, ","))
	}
}

// newDiskMonitor watches the filesystems of the root dir and the pod logs
// for disk pressure, and keeps the node's DiskPressure condition in store.
func newDiskMonitor(cfg runConfig, store *status.Store, logger *slog.Logger) *diskpressure.Monitor {
	return diskpressure.New(diskpressure.Config{
		Paths:      []string{cfg.rootDir, cfg.logs.dir},
		Thresholds: cfg.node.diskThresholds,
		Changed:    func(s diskpressure.State) { store.SetNodeCondition(diskPressureCondition(s)) },
		Logger:     logger,
	})
}

// diskPressureCondition is the node condition for s, with the kubelet's
// reasons and messages, the thresholds crossed added.
func diskPressureCondition(s diskpressure.State) v1.NodeCondition {
	c := v1.NodeCondition{
		Type: v1.NodeDiskPressure, Status: v1.ConditionFalse,
		Reason: "KubeletHasNoDiskPressure", Message: "staticlet has no disk pressure",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(s.Since),
	}
	if s.Pressure {
		c.Status, c.Reason = v1.ConditionTrue, "KubeletHasDiskPressure"
		c.Message = "staticlet has disk pressure (pods are not evicted): " + s.Message
	}
	return c
}
