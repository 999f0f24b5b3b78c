package health

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// Runtime is what probes need of the container runtime.
type Runtime interface {
	// Exec runs cmd in running container id, killing it after timeout,
	// and returns its exit code and output; a command that timed out is an
	// error wrapping context.DeadlineExceeded.
	Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (code int, output []byte, err error)
	// DialPod dials addr from inside the network namespace of the pod
	// that container id, in sandbox sandboxID, runs in.
	DialPod(ctx context.Context, id, sandboxID, network, addr string) (net.Conn, error)
}

// Config configures a Manager.
type Config struct {
	Runtime Runtime
	Logger  *slog.Logger
	// Ran, when set, is told of every probe run, from the workers'
	// goroutines: it must be safe for concurrent use and not block.
	Ran func(pod.ProbeRun)
	// Buffer is the capacity of the verdict channel; default 256.
	Buffer int
}

// Manager runs the probes of the containers it is told about.
type Manager struct {
	cfg Config
	out chan pod.ProbeVerdict

	// mu guards the fields below.
	mu    sync.Mutex
	ctx   context.Context // Run's, nil when Run is not running
	wg    sync.WaitGroup
	start time.Time                               // when Run started
	pods  map[pod.Key]map[string]*containerProbes // by container ID
}

// containerProbes are the probe workers of one container.
type containerProbes struct {
	target pod.ProbeTarget
	cancel context.CancelFunc // nil until started
	// started tells liveness and readiness that they may probe: the
	// startup probe succeeded, or there is none.
	started atomic.Bool
}

// New returns a Manager; it starts nothing.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	return &Manager{cfg: cfg, out: make(chan pod.ProbeVerdict, cfg.Buffer), pods: map[pod.Key]map[string]*containerProbes{}}
}

// Verdicts is where probe workers report; the consumer must keep reading
// it while Run runs.
func (m *Manager) Verdicts() <-chan pod.ProbeVerdict { return m.out }

// Set makes the probes of pod key run for exactly targets (running
// containers with at least one probe): workers of containers not among
// them stop, new ones start. A container whose target changed (a new pod
// IP) has its probes started afresh. Set is idempotent, cheap when nothing
// changed, and safe to call from any goroutine, before Run too.
func (m *Manager) Set(key pod.Key, targets []pod.ProbeTarget) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.pods[key]
	if len(targets) == 0 && len(cur) == 0 {
		return
	}
	next := make(map[string]*containerProbes, len(targets))
	for _, t := range targets {
		if c, ok := cur[t.ContainerID]; ok && sameTarget(c.target, t) {
			next[t.ContainerID] = c
			continue
		}
		c := &containerProbes{target: t}
		c.started.Store(t.Container.StartupProbe == nil)
		next[t.ContainerID] = c
		if m.ctx != nil {
			m.launch(key, c)
		}
	}
	for id, c := range cur {
		if next[id] != c && c.cancel != nil {
			c.cancel()
		}
	}
	if len(next) == 0 {
		delete(m.pods, key)
	} else {
		m.pods[key] = next
	}
}

// sameTarget tells whether b needs no new workers where a, for the same
// container ID, has them. A container's ID changes with its spec.
func sameTarget(a, b pod.ProbeTarget) bool {
	return a.PodIP == b.PodIP && a.SandboxID == b.SandboxID
}

// Run runs the probe workers until ctx ends, and returns once they all
// have.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.ctx, m.start = ctx, time.Now()
	for key, cs := range m.pods {
		for _, c := range cs {
			m.launch(key, c)
		}
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.ctx = nil
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// launch starts c's workers, one per probe. m.mu must be held, with m.ctx
// set.
func (m *Manager) launch(key pod.Key, c *containerProbes) {
	ctx, cancel := context.WithCancel(m.ctx)
	c.cancel = cancel
	spec := c.target.Container
	for _, p := range []struct {
		typ   pod.ProbeType
		probe *v1.Probe
	}{{pod.Startup, spec.StartupProbe}, {pod.Liveness, spec.LivenessProbe}, {pod.Readiness, spec.ReadinessProbe}} {
		if p.probe == nil {
			continue
		}
		w := &worker{m: m, key: key, c: c, typ: p.typ, spec: p.probe}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			w.run(ctx, m.start)
		}()
	}
}
