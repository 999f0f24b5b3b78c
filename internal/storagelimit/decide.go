package storagelimit

import (
	"cmp"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/pod"
)

// The kubelet's messages (pkg/kubelet/eviction), kept word for word: tools
// that read pod statuses look for them.
const (
	emptyDirMessage  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podMessage       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerMessage = "Container %s exceeded its local ephemeral storage limit %q. "
)

// Reason is the reason of an eviction, the kubelet's.
const Reason = "Evicted"

// Eviction is a limit a pod is over, and the running containers of the
// pod to kill for it.
type Eviction struct {
	Pod pod.Key
	// Message is the kubelet's message for the limit.
	Message string
	// Targets are the containers to kill, sorted by name.
	Targets []pod.ContainerStorage
	// Critical says the pod is critical: it is told, never killed.
	Critical bool
}

// Decide returns the limits each pod of pods is over by its usage (from
// the runtime; a pod's usage counts only when its UID matches), in the
// kubelet's order: an emptyDir over its sizeLimit, else the pod over the
// total of its containers' limits, else every container over its own
// limit. A pod gets one Eviction, or one per container over its own
// limit; one whose usage is unknown gets none.
func Decide(pods []v1.Pod, usage []pod.StorageUsage) []Eviction {
	byKey := make(map[pod.Key]pod.StorageUsage, len(usage))
	for _, u := range usage {
		byKey[u.Pod] = u
	}
	var out []Eviction
	for i := range pods {
		p := &pods[i]
		key := pod.Key{Namespace: p.Namespace, Name: p.Name}
		u, ok := byKey[key]
		if !ok || u.UID != string(p.UID) || len(u.Containers) == 0 {
			continue
		}
		critical := pod.Critical(&p.Spec)
		for _, e := range decidePod(&p.Spec, u) {
			e.Pod, e.Critical = key, critical
			out = append(out, e)
		}
	}
	return out
}

// Limited returns the UIDs of the pods that have a limit to enforce: a
// container's ephemeral-storage limit, or a disk emptyDir's sizeLimit.
// Only those are measured.
func Limited(pods []v1.Pod) map[string]bool {
	out := map[string]bool{}
	for i := range pods {
		spec := &pods[i].Spec
		_, limited := podLimit(spec)
		for _, v := range spec.Volumes {
			if ed := v.EmptyDir; ed != nil && ed.Medium == v1.StorageMediumDefault && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
				limited = true
			}
		}
		if limited {
			out[string(pods[i].UID)] = true
		}
	}
	return out
}

// decidePod is Decide for one pod.
func decidePod(spec *v1.PodSpec, u pod.StorageUsage) []Eviction {
	if e, ok := emptyDirOver(spec, u); ok {
		return []Eviction{e}
	}
	if e, ok := podOver(spec, u); ok {
		return []Eviction{e}
	}
	return containersOver(spec, u)
}

// emptyDirOver finds the first disk-backed emptyDir of spec that uses
// more than its sizeLimit (a limit of 0 is none), and the running
// containers that mount it. One that no running container mounts is not
// acted on: no restart would stop it from growing, nor shrink it.
func emptyDirOver(spec *v1.PodSpec, u pod.StorageUsage) (Eviction, bool) {
	for _, v := range spec.Volumes {
		ed := v.EmptyDir
		if ed == nil || ed.Medium != v1.StorageMediumDefault || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		used, ok := u.EmptyDirs[v.Name]
		if !ok || used <= ed.SizeLimit.Value() {
			continue
		}
		targets := mounting(spec, u.Containers, v.Name)
		if len(targets) == 0 {
			continue
		}
		return Eviction{Message: fmt.Sprintf(emptyDirMessage, v.Name, ed.SizeLimit.String()), Targets: targets}, true
	}
	return Eviction{}, false
}

// podOver tells whether the pod uses more than the total of its
// containers' limits, when one of them has a limit: its running
// containers and its disk-backed emptyDirs count. The kubelet checks this
// before each container's own limit, so that a pod of one container over
// its limit gets this message.
func podOver(spec *v1.PodSpec, u pod.StorageUsage) (Eviction, bool) {
	limit, ok := podLimit(spec)
	if !ok {
		return Eviction{}, false
	}
	var used int64
	for _, c := range u.Containers {
		used += c.Bytes()
	}
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault {
			used += u.EmptyDirs[v.Name]
		}
	}
	if used <= limit.Value() {
		return Eviction{}, false
	}
	// The containers over their own limits are at fault; when none is,
	// the pod as a whole is, and all its containers are killed.
	var targets []pod.ContainerStorage
	for _, e := range containersOver(spec, u) {
		targets = append(targets, e.Targets...)
	}
	if len(targets) == 0 {
		targets = sortedCopy(u.Containers)
	}
	return Eviction{Message: fmt.Sprintf(podMessage, limit.String()), Targets: targets}, true
}

// podLimit is the pod's ephemeral-storage limit as the kubelet computes
// it (resource.PodLimits): the sum over its app containers and sidecars,
// or a regular init container's own limit where that is larger; found
// only when a container sets one. Pod overhead is not supported by
// staticlet.
func podLimit(spec *v1.PodSpec) (resource.Quantity, bool) {
	var sum resource.Quantity
	found := false
	add := func(c *v1.Container) {
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
			sum.Add(q)
			found = true
		}
	}
	for i := range spec.Containers {
		add(&spec.Containers[i])
	}
	var sidecars resource.Quantity
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok {
			continue
		}
		found = true
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars.Add(q)
			sum.Add(q)
			continue
		}
		// A regular init container runs beside the sidecars started before it.
		q.Add(sidecars)
		if q.Cmp(sum) > 0 {
			sum = q
		}
	}
	return sum, found
}

// containersOver returns an Eviction for each running container of the
// pod that uses more than its own limit.
func containersOver(spec *v1.PodSpec, u pod.StorageUsage) []Eviction {
	var out []Eviction
	for _, c := range sortedCopy(u.Containers) {
		ctr := specContainer(spec, c.Name)
		if ctr == nil {
			continue
		}
		limit, ok := ctr.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok || c.Bytes() <= limit.Value() {
			continue
		}
		out = append(out, Eviction{Message: fmt.Sprintf(containerMessage, c.Name, limit.String()), Targets: []pod.ContainerStorage{c}})
	}
	return out
}

// mounting returns the running containers that mount volume name.
func mounting(spec *v1.PodSpec, running []pod.ContainerStorage, name string) []pod.ContainerStorage {
	var out []pod.ContainerStorage
	for _, c := range running {
		ctr := specContainer(spec, c.Name)
		if ctr != nil && slices.ContainsFunc(ctr.VolumeMounts, func(m v1.VolumeMount) bool { return m.Name == name }) {
			out = append(out, c)
		}
	}
	sortTargets(out)
	return out
}

// specContainer is the init or app container of spec named name.
func specContainer(spec *v1.PodSpec, name string) *v1.Container {
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func sortedCopy(cs []pod.ContainerStorage) []pod.ContainerStorage {
	out := slices.Clone(cs)
	sortTargets(out)
	return out
}

func sortTargets(cs []pod.ContainerStorage) {
	slices.SortFunc(cs, func(a, b pod.ContainerStorage) int { return cmp.Compare(a.Name, b.Name) })
}
