package nodeinfo

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources are the node's capacity and allocatable as the kubelet
// reports them: cpu, memory, ephemeral-storage (storageBytes, the size
// of the root dir's filesystem; left out when 0), hugepages-<size>, and
// pods (maxPods; left out when 0, which is no limit). Allocatable is the
// capacity less the memory held in huge pages: staticlet reserves
// nothing for the system and evicts nothing, so no threshold is taken
// off.
func Resources(m Machine, maxPods int, storageBytes uint64) (capacity, allocatable v1.ResourceList) {
	capacity = v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(int64(m.CPUs)*1000, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(int64(m.MemoryBytes), resource.BinarySI),
	}
	if storageBytes > 0 {
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(storageBytes), resource.BinarySI)
	}
	if maxPods > 0 {
		capacity[v1.ResourcePods] = *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
	}
	var huge uint64
	sizes := make([]uint64, 0, len(m.HugePages))
	for size := range m.HugePages {
		sizes = append(sizes, size)
	}
	slices.Sort(sizes)
	for _, size := range sizes {
		bytes := m.HugePages[size]
		huge += bytes
		capacity[HugePageResource(size)] = *resource.NewQuantity(int64(bytes), resource.BinarySI)
	}
	allocatable = capacity.DeepCopy()
	mem := int64(m.MemoryBytes) - int64(huge)
	allocatable[v1.ResourceMemory] = *resource.NewQuantity(max(mem, 0), resource.BinarySI)
	return capacity, allocatable
}

// HugePageResource is the resource name of huge pages of size bytes, as
// the kubelet names it: hugepages-2Mi, hugepages-1Gi.
func HugePageResource(size uint64) v1.ResourceName {
	q := resource.NewQuantity(int64(size), resource.BinarySI)
	return v1.ResourceName(v1.ResourceHugePagesPrefix + q.String())
}

// FilesystemBytes is the size of the filesystem path is on.
func FilesystemBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("reading the size of the filesystem of %s: %w", path, err)
	}
	return st.Blocks * uint64(st.Bsize), nil
}
