package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/containerd/containerd/v2/core/containers"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/pod"
)

// Resource usage, as kubectl top shows it through the kubelet's summary
// API, read from the cgroups staticlet's pods and containers run in:
//   - CPU is the cores used on average over a window: the cgroup's CPU
//     time (cpuacct.usage on cgroup v1, usage_usec of cpu.stat on v2) read
//     at both ends of it, its growth divided by the time between the reads;
//   - memory is the working set as cAdvisor computes it: the memory the
//     cgroup is charged for (memory.usage_in_bytes on v1, memory.current on
//     v2) less its inactive page cache (total_inactive_file, or
//     inactive_file, of memory.stat), which the kernel reclaims first; never
//     below 0.
//
// A pod's usage is its cgroup's, which holds its containers and pause
// process; without pod cgroups (cgroups.Config.NoPodCgroups), it is the
// sum of theirs.

// PodUsage is the resource usage of one pod and of its running containers.
type PodUsage struct {
	Pod pod.Key
	// CPUNanoCores is the CPU used over the window, in billionths of a core.
	CPUNanoCores uint64
	// WorkingSetBytes is the memory working set at the window's end.
	WorkingSetBytes uint64
	// Containers are the pod's init and app containers whose cgroups were
	// there at both reads, by name.
	Containers []ContainerUsage
}

// ContainerUsage is the resource usage of one container, as PodUsage's.
type ContainerUsage struct {
	Name            string
	CPUNanoCores    uint64
	WorkingSetBytes uint64
}

// UsageSample is the usage of every pod over one window.
type UsageSample struct {
	// Time is when the window ended.
	Time time.Time
	// Window is the time between the two reads of CPU time.
	Window time.Duration
	// Pods are sorted by namespace and name.
	Pods []PodUsage
}

// usageTarget is one cgroup to sample: a pod's or one of its containers'.
type usageTarget struct {
	pod pod.Key
	// podLevel marks the pod's own cgroup; the others are a container's.
	podLevel  bool
	container string
	kind      pod.ContainerKind
	// rel is the cgroup's path below the hierarchies' mounts.
	rel string
}

// cgroupUsage is what one cgroup read at a window's end tells.
type cgroupUsage struct {
	cpu, workingSet uint64
}

// SampleUsage samples the resource usage of every pod: it reads each
// pod's and container's CPU time, waits window (or until ctx ends, an
// error), and reads them again with their memory. Containers are found
// from containerd's metadata alone, no shim is asked. A cgroup that
// cannot be read is left out; the error is returned only when none could.
func (r *Runtime) SampleUsage(ctx context.Context, window time.Duration) (UsageSample, error) {
	all, err := r.listContainers(ctx)
	if err != nil {
		return UsageSample{}, fmt.Errorf("listing containers for their usage: %w", err)
	}
	targets := usageTargets(all, !r.cfg.Cgroups.NoPodCgroups)
	var readErr error // the first, reported if no cgroup could be read
	first := make(map[usageTarget]uint64, len(targets))
	for _, t := range targets {
		n, ok, err := r.cgroups.CPUUsage(t.rel)
		if err != nil && readErr == nil {
			readErr = err
		}
		if err == nil && ok {
			first[t] = n
		}
	}
	start := time.Now()
	timer := time.NewTimer(window)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return UsageSample{}, fmt.Errorf("sampling pods' usage: %w", ctx.Err())
	case <-timer.C:
	}
	second := make(map[usageTarget]cgroupUsage, len(first))
	for t := range first {
		cpu, ok, err := r.cgroups.CPUUsage(t.rel)
		ws, wsOK, wsErr := r.cgroups.WorkingSet(t.rel)
		if err = cmp.Or(err, wsErr); err != nil && readErr == nil {
			readErr = err
		}
		if err == nil && ok && wsOK { // else gone meanwhile, or unreadable
			second[t] = cgroupUsage{cpu: cpu, workingSet: ws}
		}
	}
	elapsed := time.Since(start)
	if len(second) == 0 && readErr != nil {
		return UsageSample{}, fmt.Errorf("sampling pods' usage: %w", readErr)
	}
	return UsageSample{
		Time:   time.Now(),
		Window: elapsed,
		Pods:   podUsages(targets, first, second, elapsed),
	}, nil
}

// usageTargets are the cgroups to sample of the containers listed: each
// init or app container's, and with podCgroups each pod's, its
// containers' parent, found from a container's cgroupsPath.
func usageTargets(all []containers.Container, podCgroups bool) []usageTarget {
	var out []usageTarget
	pods := map[pod.Key]bool{}
	for _, c := range all {
		cg := specCgroupsPath(c.Spec)
		rel, err := cgroups.RelPath(cg)
		if cg == "" || err != nil {
			continue
		}
		key := pod.Key{Namespace: c.Labels[LabelPodNamespace], Name: c.Labels[LabelPodName]}
		kind := pod.ContainerKind(c.Labels[LabelKind])
		out = append(out, usageTarget{pod: key, container: c.Labels[LabelContainer], kind: kind, rel: rel})
		if !podCgroups || pods[key] {
			continue
		}
		parent, err := cgroups.PodCgroupOf(cg)
		if err != nil {
			continue
		}
		pods[key] = true
		out = append(out, usageTarget{pod: key, podLevel: true, rel: parent})
	}
	return out
}

// podUsages puts the reads of targets together per pod: first holds the
// CPU time read at the window's start, second both reads at its end, of
// the cgroups that were there then. A pod without a cgroup of its own
// sums its containers' (and its sandbox's).
func podUsages(targets []usageTarget, first map[usageTarget]uint64, second map[usageTarget]cgroupUsage, window time.Duration) []PodUsage {
	byPod := map[pod.Key]*PodUsage{}
	ownCgroup := map[pod.Key]bool{}
	for _, t := range targets {
		if t.podLevel {
			ownCgroup[t.pod] = true
		}
	}
	for _, t := range targets {
		end, ok := second[t]
		if !ok {
			continue
		}
		cpu := nanoCores(first[t], end.cpu, window)
		p := byPod[t.pod]
		if p == nil {
			p = &PodUsage{Pod: t.pod}
			byPod[t.pod] = p
		}
		switch {
		case t.podLevel:
			p.CPUNanoCores, p.WorkingSetBytes = cpu, end.workingSet
			continue
		case !ownCgroup[t.pod]:
			p.CPUNanoCores += cpu
			p.WorkingSetBytes += end.workingSet
		}
		if t.kind != pod.KindSandbox {
			p.Containers = append(p.Containers, ContainerUsage{Name: t.container, CPUNanoCores: cpu, WorkingSetBytes: end.workingSet})
		}
	}
	out := make([]PodUsage, 0, len(byPod))
	for _, p := range byPod {
		slices.SortFunc(p.Containers, func(a, b ContainerUsage) int { return cmp.Compare(a.Name, b.Name) })
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b PodUsage) int {
		return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name))
	})
	return out
}

// nanoCores is the CPU used on average over window by a cgroup whose CPU
// time, in ns, went from start to end: 0 if it went back (a cgroup made
// again under the same path).
func nanoCores(start, end uint64, window time.Duration) uint64 {
	if end <= start || window <= 0 {
		return 0
	}
	// In float: the product of a busy minute's ns would overflow uint64.
	return uint64(float64(end-start) * float64(time.Second) / float64(window))
}

// NodeWorkingSet returns the memory working set of the whole node, as
// the cgroups package reads it for kubectl top node.
func (r *Runtime) NodeWorkingSet() (uint64, error) { return r.cgroups.NodeWorkingSet() }
