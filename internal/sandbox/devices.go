package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/pod"
)

// LabelDevices is on a container that holds CDI devices given by its
// resource limits: their qualified names, comma-separated, sorted. It is
// the one record of the allocation: a device is held while a container
// with it in this label exists, running or exited, and free once the
// container is removed.
const LabelDevices = labelPrefix + "devices"

// LabelRestarts is on a container that holds devices: whether it runs
// again once it exited, as its pod's restartPolicy says for it (Always,
// OnFailure or Never; an init container that is not a sidecar is
// OnFailure unless its pod's policy is Never). A container that will not
// run again holds its devices no longer, as the kubelet's device manager
// frees those of a finished pod.
const LabelRestarts = labelPrefix + "restarts"

// deviceAllocator hands out the CDI devices containers ask for.
type deviceAllocator struct {
	// registry is the devices the node's specs name; nil gives none.
	registry *devices.Registry
	// mu is held from the listing of what is held to the creation of the
	// container labelled with what it takes, so that two containers never
	// take the same device.
	mu sync.Mutex
	// freedMu orders the sends on freed, which merge with a value not yet
	// read instead of blocking.
	freedMu sync.Mutex
	freed   chan []string
}

func newDeviceAllocator(reg *devices.Registry) deviceAllocator {
	return deviceAllocator{registry: reg, freed: make(chan []string, 1)}
}

// DevicesFreed tells the kinds of CDI devices freed by the removal of a
// container that held some: a container waiting for devices of one of
// them (InsufficientDevices) may start now. A value not yet read takes
// in the next one's kinds; the channel is never closed.
func (r *Runtime) DevicesFreed() <-chan []string { return r.devices.freed }

// tellFreed sends the kinds of devices on the freed channel without
// blocking: merged with a value nobody has read yet.
func (a *deviceAllocator) tellFreed(held string) {
	kinds := kindsOf(splitList(held))
	if len(kinds) == 0 {
		return
	}
	a.freedMu.Lock()
	defer a.freedMu.Unlock()
	select {
	case old := <-a.freed:
		kinds = append(kinds, old...)
		slices.Sort(kinds)
		kinds = slices.Compact(kinds)
	default:
	}
	a.freed <- kinds // room: only senders fill it, one at a time
}

// kindsOf are the kinds of the qualified devices, sorted, without repeats.
func kindsOf(devs []string) []string {
	var kinds []string
	for _, d := range devs {
		kinds = append(kinds, devices.KindOf(d))
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// applyDevices gives container req the devices it gets in s: every host
// device when it is privileged, the CDI devices of its pod's annotations,
// and those its limits ask for, which it allocates and records in labels
// (LabelDevices). On success the caller must call unlock once the
// container is created (or its creation failed): until then no other
// container can take devices.
func (r *Runtime) applyDevices(ctx context.Context, req pod.ContainerRequest, s *specs.Spec, labels map[string]string) (unlock func(), err error) {
	p, c := req.Pod, req.Container
	if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
		host, err := devices.HostDevices()
		if err != nil {
			return nil, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: err}
		}
		// Its device cgroup is open (spec.Container).
		s.Linux.Devices = append(s.Linux.Devices, host...)
	}
	reg := r.devices.registry
	if reg == nil {
		return func() {}, nil
	}
	named, err := devices.FromAnnotations(p.Annotations)
	if err != nil {
		return nil, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: fmt.Errorf("pod %s: %w", p, err)}
	}
	asked, err := askedDevices(reg, c)
	if err != nil {
		return nil, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: fmt.Errorf("container %q of pod %s: %w", c.Name, p, err)}
	}
	unlock = func() {}
	if len(asked) > 0 {
		r.devices.mu.Lock()
		unlock = r.devices.mu.Unlock
		held, err := r.allocate(ctx, req, asked)
		if err != nil {
			unlock()
			return nil, err
		}
		labels[LabelDevices] = strings.Join(held, ",")
		labels[LabelRestarts] = string(restartsOf(p, c, req.Kind))
		named = append(named, held...)
	}
	if err := reg.Inject(s, named); err != nil {
		unlock()
		return nil, &pod.WaitingError{Reason: "CreateContainerConfigError", Err: fmt.Errorf("container %q of pod %s: %w", c.Name, p, err)}
	}
	return unlock, nil
}

// askedDevices is how many devices of each CDI kind c's limits ask for.
func askedDevices(reg *devices.Registry, c *v1.Container) (map[string]int, error) {
	asked := map[string]int{}
	for name, q := range c.Resources.Limits {
		if !devices.IsKind(string(name)) {
			continue
		}
		if !reg.KnownKind(string(name)) {
			return nil, fmt.Errorf("resources.limits[%s]: no CDI spec names a device of this kind", name)
		}
		if n := q.Value(); n > 0 {
			asked[string(name)] = int(n)
		}
	}
	return asked, nil
}

// allocate chooses the devices of each kind asked, with r.devices.mu
// held: the first free ones in sorted order, those the container's
// earlier instances in the same sandbox held first (a restart keeps its
// devices), then those of its pod's finished init containers. It
// returns them sorted, or an InsufficientDevices error.
func (r *Runtime) allocate(ctx context.Context, req pod.ContainerRequest, asked map[string]int) ([]string, error) {
	// Not the shared listing (listContainers), which may predate the last
	// allocation's container.
	cctx, cancel := r.call(ctx)
	defer cancel()
	cs, err := r.client.ContainerService().List(cctx, fmt.Sprintf("labels.%q", LabelDevices))
	if err != nil {
		return nil, &pod.WaitingError{Reason: "CreateContainerError",
			Err: fmt.Errorf("listing the devices held, for container %q of pod %s: %w", req.Container.Name, req.Pod, err)}
	}
	holders := map[string]string{} // device: the pod holding it
	mine := map[string]bool{}
	for _, c := range cs {
		if r.finished(cctx, c) {
			continue // it will not run again: its devices are free
		}
		reusable := c.Labels[LabelSandboxID] == req.Sandbox.ID &&
			(c.Labels[LabelContainer] == req.Container.Name || r.initDone(cctx, req.Pod, c))
		for _, d := range splitList(c.Labels[LabelDevices]) {
			if reusable {
				mine[d] = true
			} else {
				holders[d] = c.Labels[LabelPodNamespace] + "/" + c.Labels[LabelPodName]
			}
		}
	}
	var out []string
	for _, kind := range slices.Sorted(maps.Keys(asked)) {
		got, err := chooseDevices(kind, asked[kind], r.devices.registry.Devices(kind), holders, mine)
		if err != nil {
			return nil, &pod.WaitingError{Reason: "InsufficientDevices",
				Err: fmt.Errorf("container %q of pod %s: %w", req.Container.Name, req.Pod, err)}
		}
		out = append(out, got...)
	}
	slices.Sort(out)
	return out, nil
}

// initDone tells whether c, a container of pod p's sandbox, is an init
// container that has run to its end and will not run again (not a
// sidecar): the pod's later containers may take its devices, as the
// kubelet's device manager lets them.
func (r *Runtime) initDone(ctx context.Context, p *pod.Pod, c containers.Container) bool {
	if c.Labels[LabelKind] != string(pod.KindInit) {
		return false
	}
	i := slices.IndexFunc(p.Spec.InitContainers, func(ic v1.Container) bool { return ic.Name == c.Labels[LabelContainer] })
	if i < 0 {
		return false
	}
	if rp := p.Spec.InitContainers[i].RestartPolicy; rp != nil && *rp == v1.ContainerRestartPolicyAlways {
		return false
	}
	if _, ok := c.Labels[LabelExitCode]; ok {
		return true
	}
	// Its exit may not be recorded yet: a stopped task tells it.
	t, err := r.getTask(ctx, c.ID)
	return err == nil && t.Status == task.Status_STOPPED
}

// chooseDevices picks n of the kind's devices (sorted) that holders do
// not hold, those in mine first; an error names the kind, how many are
// free and who holds the others.
func chooseDevices(kind string, n int, all []string, holders map[string]string, mine map[string]bool) ([]string, error) {
	var free, pods []string
	for _, d := range all {
		if h, ok := holders[d]; ok {
			pods = append(pods, h)
			continue
		}
		free = append(free, d)
	}
	if len(free) < n {
		slices.Sort(pods)
		held := ""
		if pods = slices.Compact(pods); len(pods) > 0 {
			held = " (held by " + strings.Join(pods, ", ") + ")"
		}
		return nil, fmt.Errorf("%d of %d %s devices are free%s; %d asked", len(free), len(all), kind, held, n)
	}
	// Stable: the devices held before, then the others, each in order.
	slices.SortStableFunc(free, func(a, b string) int {
		switch {
		case mine[a] == mine[b]:
			return 0
		case mine[a]:
			return -1
		}
		return 1
	})
	return free[:n], nil
}

// restartsOf is whether container c of p, of kind, runs again after it
// exits (LabelRestarts).
func restartsOf(p *pod.Pod, c *v1.Container, kind pod.ContainerKind) v1.RestartPolicy {
	policy := p.Spec.RestartPolicy
	if kind != pod.KindInit {
		return policy
	}
	switch {
	case c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways:
		return v1.RestartPolicyAlways // a sidecar
	case policy == v1.RestartPolicyNever:
		return v1.RestartPolicyNever
	}
	return v1.RestartPolicyOnFailure
}

// finished tells whether container c, which holds devices, exited and
// will not run again: its exit code is in its labels or, not recorded
// yet, in its stopped task's status.
func (r *Runtime) finished(ctx context.Context, c containers.Container) bool {
	policy, ok := c.Labels[LabelRestarts]
	if !ok {
		return false // made before the label; held until removed
	}
	code, err := strconv.ParseInt(c.Labels[LabelExitCode], 10, 32)
	if _, recorded := c.Labels[LabelExitCode]; !recorded || err != nil {
		t, err := r.getTask(ctx, c.ID)
		if err != nil || t.Status != task.Status_STOPPED {
			return false
		}
		code = int64(t.ExitStatus)
	}
	return !pod.RunsAgain(v1.RestartPolicy(policy), int32(code))
}

// exitFrees tells the kinds of the devices of container c, which exited
// with code, when it will not run again: they are free now.
func (r *Runtime) exitFrees(ctx context.Context, c client.Container, code uint32) {
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return
	}
	held, policy := info.Labels[LabelDevices], info.Labels[LabelRestarts]
	if held == "" || policy == "" || pod.RunsAgain(v1.RestartPolicy(policy), int32(code)) {
		return
	}
	r.devices.tellFreed(held)
}
