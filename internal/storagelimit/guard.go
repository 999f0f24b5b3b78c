package storagelimit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Meter measures the pods' local ephemeral storage and kills containers:
// the runtime.
type Meter interface {
	// StorageUsage measures the pods with the UIDs given that have a
	// running container.
	StorageUsage(ctx context.Context, uids map[string]bool) ([]pod.StorageUsage, error)
	// Evict kills the container with id at once, its exit to be reported
	// with reason Evicted and message.
	Evict(ctx context.Context, id, message string) error
}

// Pods lists the pods that run, with their specs: the status store.
type Pods interface {
	Pods() []v1.Pod
}

// Events takes the events the Guard tells.
type Events interface {
	Event(e pod.Event)
}

// DefaultPeriod is how often a Guard measures by default: the kubelet's
// eviction manager's period.
const DefaultPeriod = 10 * time.Second

// Config configures a Guard.
type Config struct {
	Meter  Meter
	Pods   Pods
	Events Events
	// Period is how often the pods are measured; DefaultPeriod when zero.
	Period time.Duration
	Logger *slog.Logger
	// Now is the clock of the events; time.Now when nil.
	Now func() time.Time
}

// Guard enforces the pods' ephemeral storage limits.
type Guard struct {
	cfg Config
	// told holds the containers already killed or, in a critical pod,
	// warned of, by ID: one is acted on once in its life. Only Run's
	// goroutine touches it.
	told map[string]bool
}

// New returns a Guard; it starts nothing.
func New(cfg Config) *Guard {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{cfg: cfg, told: map[string]bool{}}
}

// Run measures the pods every period and acts on what is over its limit,
// until ctx ends; it returns nil then.
func (g *Guard) Run(ctx context.Context) error {
	tick := time.NewTicker(g.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			g.Check(ctx)
		}
	}
}

// Check measures the pods once and acts on every limit one is over. It is
// Run's step; it must not run at once with another Check.
func (g *Guard) Check(ctx context.Context) {
	pods := g.cfg.Pods.Pods()
	uids := Limited(pods)
	if len(uids) == 0 {
		clear(g.told)
		return // nothing to measure: no call at all
	}
	usage, err := g.cfg.Meter.StorageUsage(ctx, uids)
	if err != nil {
		if ctx.Err() == nil {
			g.cfg.Logger.Warn("measuring the pods' ephemeral storage", "err", err)
		}
		return
	}
	running := map[string]bool{}
	for _, u := range usage {
		for _, c := range u.Containers {
			running[c.ID] = true
		}
	}
	// A container gone is forgotten: its ID is never used again.
	for id := range g.told {
		if !running[id] {
			delete(g.told, id)
		}
	}
	for _, e := range Decide(pods, usage) {
		g.act(ctx, e)
	}
}

// act kills the targets of e not already killed, or warns of them in a
// critical pod, with an event for each.
func (g *Guard) act(ctx context.Context, e Eviction) {
	for _, c := range e.Targets {
		if g.told[c.ID] {
			continue
		}
		g.told[c.ID] = true
		ev := pod.Event{Time: g.cfg.Now(), Pod: e.Pod.String(), Container: c.Name, Type: pod.EventWarning, Reason: Reason}
		if e.Critical {
			ev.Reason = "EvictionSkipped"
			ev.Message = e.Message + "The pod is critical: its container is not killed."
			g.cfg.Events.Event(ev)
			g.cfg.Logger.Warn("not killing a container of a critical pod over its ephemeral storage limit",
				"pod", e.Pod.String(), "container", c.Name, "reason", e.Message)
			continue
		}
		if err := g.cfg.Meter.Evict(ctx, c.ID, e.Message); err != nil {
			delete(g.told, c.ID) // tried again at the next check
			g.cfg.Logger.Warn("killing a container over its ephemeral storage limit",
				"pod", e.Pod.String(), "container", c.Name, "err", err)
			continue
		}
		ev.Message = fmt.Sprintf("%sContainer %s is killed; it starts again as its pod's restartPolicy says.", e.Message, c.Name)
		g.cfg.Events.Event(ev)
		g.cfg.Logger.Info("killed a container over its ephemeral storage limit",
			"pod", e.Pod.String(), "container", c.Name, "reason", e.Message, "rootfs", c.RootfsBytes, "logs", c.LogBytes)
	}
}
