package cgroups

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/staticlet/staticlet/internal/nodeinfo"
)

// Resource usage, as kubectl top shows it through the kubelet's summary
// API, read from the cgroups staticlet's pods and containers run in:
//   - CPU is the cgroup's CPU time (cpuacct.usage on cgroup v1, usage_usec
//     of cpu.stat on v2), which package sandbox reads at both ends of a
//     window;
//   - memory is the working set as cAdvisor computes it: the memory the
//     cgroup is charged for (memory.usage_in_bytes on v1, memory.current on
//     v2) less its inactive page cache (total_inactive_file, or
//     inactive_file, of memory.stat), which the kernel reclaims first; never
//     below 0.

// CPUUsage returns the CPU time the cgroup at rel (below the hierarchies'
// mounts, as RelPath gives it) has used, in ns, and whether it is there.
func (m *Manager) CPUUsage(rel string) (uint64, bool, error) { return m.host.cpuUsage(rel) }

// WorkingSet returns the memory working set of the cgroup at rel, and
// whether it is there.
func (m *Manager) WorkingSet(rel string) (uint64, bool, error) { return m.host.workingSet(rel) }

// PodCgroupOf is the path of the pod cgroup that holds a container's,
// whose spec's cgroupsPath is cg: its parent with cgroupfs, its slice
// with the systemd driver.
func PodCgroupOf(cg string) (string, error) {
	if slice := podSlice(cg); slice != "" {
		return SliceDir(slice)
	}
	return path.Dir(cg), nil
}

// cpuUsage returns the CPU time the cgroup at rel has used, in ns, and
// whether it is there.
func (h cgroupHost) cpuUsage(rel string) (uint64, bool, error) {
	if h.unified {
		b, ok, err := readCgroupFile(filepath.Join(h.v2Root, rel, "cpu.stat"))
		if !ok || err != nil {
			return 0, ok, err
		}
		usec, found := statValue(b, "usage_usec")
		if !found {
			return 0, true, fmt.Errorf("reading the CPU usage of cgroup %s: no usage_usec in cpu.stat", rel)
		}
		return usec * 1000, true, nil
	}
	mnt, ok := h.v1["cpuacct"]
	if !ok {
		return 0, false, nil
	}
	b, ok, err := readCgroupFile(filepath.Join(mnt, rel, "cpuacct.usage"))
	if !ok || err != nil {
		return 0, ok, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("reading the CPU usage of cgroup %s: %w", rel, err)
	}
	return n, true, nil
}

// workingSet returns the memory working set of the cgroup at rel, and
// whether it is there.
func (h cgroupHost) workingSet(rel string) (uint64, bool, error) {
	dir, usageFile, inactiveKey := filepath.Join(h.v2Root, rel), "memory.current", "inactive_file"
	if !h.unified {
		mnt, ok := h.v1["memory"]
		if !ok {
			return 0, false, nil
		}
		dir, usageFile, inactiveKey = filepath.Join(mnt, rel), "memory.usage_in_bytes", "total_inactive_file"
	}
	b, ok, err := readCgroupFile(filepath.Join(dir, usageFile))
	if !ok || err != nil {
		return 0, ok, err
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("reading the memory usage of cgroup %s: %w", rel, err)
	}
	stat, ok, err := readCgroupFile(filepath.Join(dir, "memory.stat"))
	if !ok || err != nil {
		return 0, ok, err
	}
	inactive, _ := statValue(stat, inactiveKey)
	return workingSetOf(usage, inactive), true, nil
}

// workingSetOf is usage less inactive, floored at 0 as cAdvisor's.
func workingSetOf(usage, inactive uint64) uint64 {
	if inactive >= usage {
		return 0
	}
	return usage - inactive
}

// readCgroupFile reads a cgroup's file, and tells whether it is there.
func readCgroupFile(file string) ([]byte, bool, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("reading %s: %w", file, err)
	}
	return b, true, nil
}

// statValue finds key's value in a cgroup file of "key value" lines
// (memory.stat, cpu.stat), and tells whether it is there.
func statValue(b []byte, key string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// meminfoFile is the kernel's account of the machine's memory.
const meminfoFile = "/proc/meminfo"

// NodeWorkingSet returns the memory working set of the whole node, as
// cAdvisor computes it for the root cgroup, which metrics-server reports
// as the node's memory: with a v1 memory hierarchy (legacy or hybrid
// mode), the root memory cgroup's usage_in_bytes less its
// total_inactive_file; on v2, whose root cgroup has no memory.current,
// the memory in use by /proc/meminfo (MemTotal less MemFree) less the
// root's inactive_file (of its memory.stat, or meminfo's Inactive(file)
// on a kernel without one).
func (m *Manager) NodeWorkingSet() (uint64, error) { return m.host.nodeWorkingSet(meminfoFile) }

func (h cgroupHost) nodeWorkingSet(meminfoPath string) (uint64, error) {
	if _, ok := h.v1["memory"]; ok && !h.unified {
		ws, ok, err := h.workingSet("/")
		if err == nil && !ok {
			err = errors.New("no memory.usage_in_bytes")
		}
		if err != nil {
			return 0, fmt.Errorf("reading the node's memory working set: %w", err)
		}
		return ws, nil
	}
	meminfo, err := os.ReadFile(meminfoPath)
	if err != nil {
		return 0, fmt.Errorf("reading the node's memory working set: %w", err)
	}
	total, okTotal := nodeinfo.MeminfoValue(meminfo, "MemTotal")
	free, okFree := nodeinfo.MeminfoValue(meminfo, "MemFree")
	if !okTotal || !okFree {
		return 0, fmt.Errorf("reading the node's memory working set: no MemTotal or MemFree in %s", meminfoPath)
	}
	inactive, found := uint64(0), false
	if h.v2Root != "" {
		if stat, ok, err := readCgroupFile(filepath.Join(h.v2Root, "memory.stat")); ok && err == nil {
			inactive, found = statValue(stat, "inactive_file")
		}
	}
	if !found {
		inactive, _ = nodeinfo.MeminfoValue(meminfo, "Inactive(file)")
	}
	return workingSetOf(total-min(free, total), inactive), nil
}
