package cgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestCgroupFiles(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	full := &specs.LinuxResources{
		CPU:            &specs.LinuxCPU{Shares: u64(1024), Quota: i64(50000), Period: u64(100000)},
		Memory:         &specs.LinuxMemory{Limit: i64(128 << 20)},
		HugepageLimits: []specs.LinuxHugepageLimit{{Pagesize: "2MB", Limit: 4 << 20}},
		Pids:           &specs.LinuxPids{Limit: i64(1024)},
	}
	sharesOnly := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2)}}
	tests := []struct {
		name string
		v2   bool
		r    *specs.LinuxResources
		want []cgroupFile
	}{
		{"v1 limits", false, full, []cgroupFile{
			{"cpu", "cpu.shares", "1024"},
			{"cpu", "cpu.cfs_period_us", "100000"},
			{"cpu", "cpu.cfs_quota_us", "50000"},
			{"memory", "memory.limit_in_bytes", "134217728"},
			{"pids", "pids.max", "1024"},
			{"hugetlb", "hugetlb.2MB.limit_in_bytes", "4194304"},
		}},
		{"v2 limits", true, full, []cgroupFile{
			{"cpu", "cpu.weight", "39"},
			{"cpu", "cpu.max", "50000 100000"},
			{"memory", "memory.max", "134217728"},
			{"pids", "pids.max", "1024"},
			{"hugetlb", "hugetlb.2MB.max", "4194304"},
		}},
		{"v1 shares only", false, sharesOnly, []cgroupFile{
			{"cpu", "cpu.shares", "2"},
			{"cpu", "cpu.cfs_quota_us", "-1"},
		}},
		{"v2 shares only", true, sharesOnly, []cgroupFile{
			{"cpu", "cpu.weight", "1"},
			{"cpu", "cpu.max", "max 100000"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cgroupFiles(tt.v2, tt.r); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cgroupFiles(v2=%v) = %v, want %v", tt.v2, got, tt.want)
			}
		})
	}
}

func TestSharesToWeight(t *testing.T) {
	// runc's conversion: 2 → 1, 1024 → 39, 262144 → 10000.
	for shares, want := range map[uint64]uint64{0: 0, 2: 1, 1024: 39, 262144: 10000} {
		if got := sharesToWeight(shares); got != want {
			t.Errorf("sharesToWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

// TestCgroupWriteAndRemoveV1 writes a pod cgroup into a stand-in v1 tree
// and removes it with a leftover container cgroup under it.
func TestCgroupWriteAndRemoveV1(t *testing.T) {
	root := t.TempDir()
	h := cgroupHost{v1: map[string]string{"cpu": filepath.Join(root, "cpu"), "memory": filepath.Join(root, "memory")}}
	h.all = []string{h.v1["cpu"], h.v1["memory"]}
	files := []cgroupFile{{"cpu", "cpu.shares", "512"}, {"memory", "memory.limit_in_bytes", "1048576"}, {"hugetlb", "hugetlb.2MB.limit_in_bytes", "0"}}
	if err := h.write("/staticlet/burstable/podU", files); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"cpu/staticlet/burstable/podU/cpu.shares":               "512",
		"memory/staticlet/burstable/podU/memory.limit_in_bytes": "1048576",
	} {
		if b, err := os.ReadFile(filepath.Join(root, path)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", path, b, err, want)
		}
	}
	// A real cgroup directory's files go with rmdir; here only directories
	// are left to remove.
	for _, f := range []string{"cpu/staticlet/burstable/podU/cpu.shares", "memory/staticlet/burstable/podU/memory.limit_in_bytes"} {
		os.Remove(filepath.Join(root, f))
	}
	if err := os.MkdirAll(filepath.Join(root, "cpu/staticlet/burstable/podU/ctr"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Manager{root: "staticlet", host: h}
	if err := r.RemovePod(t.Context(), "U"); err != nil {
		t.Fatalf("RemovePod: %v", err)
	}
	for _, dir := range []string{"cpu/staticlet/burstable/podU", "memory/staticlet/burstable/podU"} {
		if _, err := os.Stat(filepath.Join(root, dir)); !os.IsNotExist(err) {
			t.Errorf("%s still exists after RemovePod (stat: %v)", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cpu/staticlet/burstable")); err != nil {
		t.Errorf("the QoS cgroup went with the pod's: %v", err)
	}
	// Removing again finds nothing and succeeds.
	if err := r.RemovePod(t.Context(), "U"); err != nil {
		t.Errorf("RemovePod again: %v", err)
	}
}

// TestDetectCgroups checks the node's own mounts parse into something
// runc-like: a v2 root in unified mode, else v1 cpu and memory.
func TestDetectCgroups(t *testing.T) {
	h, err := detectCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.all) == 0 {
		t.Skip("no cgroup mounts here")
	}
	if h.unified {
		if h.v2Root != "/sys/fs/cgroup" {
			t.Errorf("unified mode with v2 root %q", h.v2Root)
		}
		return
	}
	if h.v1["cpu"] == "" || h.v1["memory"] == "" {
		t.Errorf("v1 mode without cpu or memory hierarchy: %+v", h)
	}
}

func TestCgroupMode(t *testing.T) {
	tests := []struct {
		h    cgroupHost
		want string
	}{
		{cgroupHost{unified: true, v2Root: "/sys/fs/cgroup", v2Mount: "/sys/fs/cgroup"}, "v2 (unified)"},
		{cgroupHost{v1: map[string]string{"cpu": "/sys/fs/cgroup/cpu"}, v2Mount: "/sys/fs/cgroup/unified"}, "hybrid (v1, with v2 at /sys/fs/cgroup/unified)"},
		{cgroupHost{v1: map[string]string{"cpu": "/sys/fs/cgroup/cpu"}}, "v1 (legacy)"},
	}
	for _, tt := range tests {
		if got := tt.h.mode(); got != tt.want {
			t.Errorf("mode(%+v) = %q, want %q", tt.h, got, tt.want)
		}
	}
}
