package spec

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/pod"
)

// The kubelet's CPU constants (pkg/kubelet/cm/helpers_linux.go).
const (
	// MinShares is the least cpu.shares a cgroup gets: a container that
	// requests no CPU, and every BestEffort pod.
	MinShares = 2
	// MaxShares is the most cpu.shares the kernel takes.
	MaxShares = 262144
	// CFSPeriod is the CFS period, in microseconds, of every CPU limit.
	CFSPeriod = 100000
	// minQuota is the least CFS quota a CPU limit comes to, in microseconds.
	minQuota = 1000
)

// The kubelet's oom_score_adj values (pkg/kubelet/qos/policy.go), and the
// sandbox's (containerd's defaultSandboxOOMAdj).
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
	sandboxOOMScoreAdj    = -998
	// MinOOMScoreAdj is the kernel's lowest oom_score_adj.
	MinOOMScoreAdj = -1000
)

// ResourceFacts are what the node lets a spec's resource settings be.
type ResourceFacts struct {
	// MinOOMScoreAdj is the lowest oom_score_adj a container may be given.
	// Without CAP_SYS_RESOURCE a process cannot lower its children's below
	// its own, and runc fails to start a container asked to, so a spec asks
	// for no less than this. The zero value is 0; MinOOMScoreAdj (-1000)
	// lets the kubelet's values through.
	MinOOMScoreAdj int
	// Swap tells whether the node's memory cgroup limits swap: a memory
	// limit then also forbids swap, as the kubelet's NoSwap does.
	Swap bool
	// HugePageSizes are the huge page sizes the node's hugetlb cgroup can
	// limit, as runc names them ("2MB", "1GB"). A container that limits a
	// size not here is an error; every size here that a container does not
	// limit is limited to 0, as the kubelet does.
	HugePageSizes []string
	// PodPidsLimit is the most processes a pod's cgroup may hold, the
	// kubelet's podPidsLimit; 0 or less is no limit.
	PodPidsLimit int64
}

// PodCgroup is the cgroup of a pod under root, as the kubelet lays them out
// with cgroupfs: Guaranteed pods directly under root, the others under
// root/burstable or root/besteffort. The pod's sandbox and containers are
// its children.
func PodCgroup(root string, qos v1.PodQOSClass, uid string) string {
	switch qos {
	case v1.PodQOSBurstable:
		return path.Join(root, "burstable", "pod"+uid)
	case v1.PodQOSBestEffort:
		return path.Join(root, "besteffort", "pod"+uid)
	}
	return path.Join(root, "pod"+uid)
}

// PodSlice is the systemd slice of a pod under the root slice named
// root+".slice", as the kubelet names them with the systemd driver:
// Guaranteed pods' directly under the root, the others' under root's
// burstable or besteffort slice. root and uid must hold no dash, which
// would nest the slice deeper.
func PodSlice(root string, qos v1.PodQOSClass, uid string) string {
	switch qos {
	case v1.PodQOSBurstable:
		return root + "-burstable-pod" + uid + ".slice"
	case v1.PodQOSBestEffort:
		return root + "-besteffort-pod" + uid + ".slice"
	}
	return root + "-pod" + uid + ".slice"
}

// PodSliceCandidates are every slice a pod with this uid may have had
// under root, whatever its class was.
func PodSliceCandidates(root, uid string) []string {
	return []string{
		PodSlice(root, v1.PodQOSGuaranteed, uid),
		PodSlice(root, v1.PodQOSBurstable, uid),
		PodSlice(root, v1.PodQOSBestEffort, uid),
	}
}

// PodCgroupCandidates are every cgroup a pod with this uid may have had
// under root, whatever its class was: what to remove when it is gone.
func PodCgroupCandidates(root, uid string) []string {
	return []string{
		PodCgroup(root, v1.PodQOSGuaranteed, uid),
		PodCgroup(root, v1.PodQOSBurstable, uid),
		PodCgroup(root, v1.PodQOSBestEffort, uid),
	}
}

// CPUShares converts a CPU request in millicores to cpu.shares as the
// kubelet does (MilliCPUToShares).
func CPUShares(milli int64) uint64 {
	if milli <= 0 {
		return MinShares
	}
	shares := milli * 1024 / 1000
	return uint64(min(max(shares, MinShares), MaxShares))
}

// CPUQuota converts a CPU limit in millicores to a CFS quota for period as
// the kubelet does (MilliCPUToQuota); 0 means no limit.
func CPUQuota(milli, period int64) int64 {
	if milli <= 0 {
		return 0
	}
	return max(milli*period/1000, minQuota)
}

// OOMScoreAdj is the oom_score_adj the kubelet gives container c of p
// (GetContainerOOMScoreAdjust) on a node with nodeMemory bytes, before any
// clamping: -997 for node-critical and Guaranteed pods, 1000 for
// BestEffort, and for Burstable 1000 less the container's share of the
// node's memory in thousandths, kept within 3 to 999. A sidecar gets no
// more than the pod's smallest app container would.
func OOMScoreAdj(p *pod.Pod, c *v1.Container, nodeMemory int64) int {
	if nodeCritical(p) {
		return guaranteedOOMScoreAdj
	}
	switch pod.QOSClass(&p.Spec) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if nodeMemory <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	adj := 1000 - 1000*memoryRequest(c)/nodeMemory
	if isSidecar(p, c) {
		least := int64(math.MaxInt64)
		for i := range p.Spec.Containers {
			least = min(least, memoryRequest(&p.Spec.Containers[i]))
		}
		if least != math.MaxInt64 {
			adj = min(adj, 1000-1000*least/nodeMemory)
		}
	}
	switch {
	case adj < 1000+guaranteedOOMScoreAdj:
		return 1000 + guaranteedOOMScoreAdj
	case adj == besteffortOOMScoreAdj:
		return besteffortOOMScoreAdj - 1
	}
	return int(adj)
}

// nodeCritical tells whether p is a node-critical pod, which the kubelet
// protects like a Guaranteed one whatever its class.
func nodeCritical(p *pod.Pod) bool {
	return p.Spec.PriorityClassName == "system-node-critical" ||
		(p.Spec.Priority != nil && *p.Spec.Priority >= pod.SystemNodeCriticalPriority)
}

// isSidecar tells whether c is one of p's restartable init containers.
func isSidecar(p *pod.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	return slices.ContainsFunc(p.Spec.InitContainers, func(ic v1.Container) bool { return ic.Name == c.Name })
}

func memoryRequest(c *v1.Container) int64 {
	q := c.Resources.Requests[v1.ResourceMemory]
	return q.Value()
}

// clampOOM keeps adj no lower than the node allows.
func clampOOM(adj int, f ResourceFacts) *int {
	adj = max(adj, f.MinOOMScoreAdj, MinOOMScoreAdj)
	return &adj
}

// applyContainerResources sets c's cgroup limits and oom_score_adj in s as
// the kubelet asks the runtime to: cpu shares from the request, a CFS
// quota from the limit, the memory limit (with swap forbidden where the
// node can), and hugepage limits.
func applyContainerResources(s *specs.Spec, p *pod.Pod, c *v1.Container, nodeMemory int64, f ResourceFacts) error {
	r := s.Linux.Resources
	cpuReq, cpuLim := c.Resources.Requests[v1.ResourceCPU], c.Resources.Limits[v1.ResourceCPU]
	milli := cpuReq.MilliValue()
	if cpuReq.IsZero() && !cpuLim.IsZero() {
		milli = cpuLim.MilliValue()
	}
	r.CPU = &specs.LinuxCPU{Shares: ptr(CPUShares(milli))}
	if quota := CPUQuota(cpuLim.MilliValue(), CFSPeriod); quota > 0 {
		r.CPU.Quota, r.CPU.Period = ptr(quota), ptr(uint64(CFSPeriod))
	}
	if memLim := c.Resources.Limits[v1.ResourceMemory]; !memLim.IsZero() {
		r.Memory = &specs.LinuxMemory{Limit: ptr(memLim.Value())}
		if f.Swap {
			r.Memory.Swap = ptr(memLim.Value())
		}
	}
	limits, err := hugePageLimits(c.Resources.Limits, f.HugePageSizes)
	if err != nil {
		return err
	}
	r.HugepageLimits = limits
	s.Process.OOMScoreAdj = clampOOM(OOMScoreAdj(p, c, nodeMemory), f)
	return nil
}

// applySandboxResources gives the pause process the least CPU weight and
// the sandbox oom_score_adj containerd gives it.
func applySandboxResources(s *specs.Spec, f ResourceFacts) {
	s.Linux.Resources.CPU = &specs.LinuxCPU{Shares: ptr(uint64(MinShares))}
	s.Process.OOMScoreAdj = clampOOM(sandboxOOMScoreAdj, f)
}

// PodResources are the limits of p's pod cgroup as the kubelet sets them
// (ResourceConfigForPod): cpu shares from the pod's total request (the
// least for BestEffort); a CFS quota and a memory limit from its total
// limit when every container has one (always for Guaranteed); hugepage
// limits from its total request, 0 for the other sizes the node can
// limit. A pod's total is what it may run at once: its app containers and
// sidecars, or an init container with the sidecars started before it.
func PodResources(p *pod.Pod, f ResourceFacts) (*specs.LinuxResources, error) {
	r := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: ptr(uint64(MinShares))}}
	if f.PodPidsLimit > 0 {
		r.Pids = &specs.LinuxPids{Limit: ptr(f.PodPidsLimit)}
	}
	qos := pod.QOSClass(&p.Spec)
	if qos == v1.PodQOSBestEffort {
		limits, err := hugePageLimits(nil, f.HugePageSizes)
		r.HugepageLimits = limits
		return r, err
	}
	requests := podTotal(p, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests })
	limits := podTotal(p, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits })
	cpuReq, cpuLim := requests[v1.ResourceCPU], limits[v1.ResourceCPU]
	r.CPU.Shares = ptr(CPUShares(cpuReq.MilliValue()))
	if qos == v1.PodQOSGuaranteed || allLimit(p, v1.ResourceCPU) {
		if quota := CPUQuota(cpuLim.MilliValue(), CFSPeriod); quota > 0 {
			r.CPU.Quota, r.CPU.Period = ptr(quota), ptr(uint64(CFSPeriod))
		}
	}
	if mem := limits[v1.ResourceMemory]; (qos == v1.PodQOSGuaranteed || allLimit(p, v1.ResourceMemory)) && !mem.IsZero() {
		r.Memory = &specs.LinuxMemory{Limit: ptr(mem.Value())}
	}
	hp, err := hugePageLimits(requests, f.HugePageSizes)
	r.HugepageLimits = hp
	return r, err
}

// allLimit tells whether every container of p limits name.
func allLimit(p *pod.Pod, name v1.ResourceName) bool {
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if q := c.Resources.Limits[name]; q.IsZero() {
				return false
			}
		}
	}
	return true
}

// podTotal adds up what of p the list of each container says, as the
// kubelet's PodRequests and PodLimits do: the app containers and sidecars
// together, or, if more, any other init container with the sidecars
// started before it.
func podTotal(p *pod.Pod, list func(*v1.Container) v1.ResourceList) v1.ResourceList {
	total := v1.ResourceList{}
	for i := range p.Spec.Containers {
		addList(total, list(&p.Spec.Containers[i]))
	}
	sidecars, initMax := v1.ResourceList{}, v1.ResourceList{}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		var at v1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			addList(total, list(c))
			addList(sidecars, list(c))
			at = sidecars
		} else {
			at = v1.ResourceList{}
			addList(at, list(c))
			addList(at, sidecars)
		}
		maxList(initMax, at)
	}
	maxList(total, initMax)
	return total
}

func addList(into, l v1.ResourceList) {
	for name, q := range l {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func maxList(into, l v1.ResourceList) {
	for name, q := range l {
		if have, ok := into[name]; !ok || q.Cmp(have) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

// hugePageLimits turns the hugepages-<size> entries of l into hugetlb
// limits for every size the node can limit, 0 for those l does not name.
func hugePageLimits(l v1.ResourceList, sizes []string) ([]specs.LinuxHugepageLimit, error) {
	want := map[string]uint64{}
	for name, q := range l {
		size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
		if !ok {
			continue
		}
		page, err := resource.ParseQuantity(size)
		if err != nil {
			return nil, fmt.Errorf("resource %s: bad page size: %w", name, err)
		}
		runcSize, err := HugePageSizeName(page.Value())
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
		if !slices.Contains(sizes, runcSize) && !q.IsZero() {
			return nil, fmt.Errorf("resource %s: this node cannot limit huge pages of %s (no hugetlb cgroup for that size)", name, runcSize)
		}
		want[runcSize] = uint64(q.Value())
	}
	var out []specs.LinuxHugepageLimit
	for _, size := range sizes {
		out = append(out, specs.LinuxHugepageLimit{Pagesize: size, Limit: want[size]})
	}
	return out, nil
}

// HugePageSizeName names a huge page size in bytes as runc and the kernel's
// hugetlb cgroup files do: "2MB" for 2Mi, "1GB" for 1Gi.
func HugePageSizeName(bytes int64) (string, error) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	n := bytes
	for _, u := range units {
		if n < 1024 || n%1024 != 0 {
			if n <= 0 {
				break
			}
			return fmt.Sprintf("%d%s", n, u), nil
		}
		n /= 1024
	}
	return "", fmt.Errorf("page size %d is not a whole number of a unit", bytes)
}

func ptr[T any](v T) *T { return &v }
