package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

// writeCgroup writes files into the cgroup rel below mnt, a fake mount.
func writeCgroup(t *testing.T, mnt, rel string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(mnt, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeHosts are a cgroup v1 and a cgroup v2 host in temp dirs.
func fakeHosts(t *testing.T) (v1, v2 cgroupHost) {
	t.Helper()
	root := t.TempDir()
	v1 = cgroupHost{v1: map[string]string{
		"cpu":     filepath.Join(root, "cpu,cpuacct"),
		"cpuacct": filepath.Join(root, "cpu,cpuacct"),
		"memory":  filepath.Join(root, "memory"),
	}}
	v2 = cgroupHost{unified: true, v2Root: filepath.Join(root, "unified")}
	return v1, v2
}

func TestTopCgroupReads(t *testing.T) {
	v1, v2 := fakeHosts(t)
	const rel = "/staticlet/burstable/pod1/abc"
	// cached is a cgroup whose page cache is all inactive, and charged
	// less than it as usage and memory.stat are not read at once: its
	// working set is floored at 0.
	const cached = "/staticlet/besteffort/pod2/def"
	fixtures := []struct {
		mnt, rel string
		files    map[string]string
	}{
		{v1.v1["cpuacct"], rel, map[string]string{"cpuacct.usage": "123456789\n"}},
		// inactive_file is the cgroup's own; total_ counts its children too.
		{v1.v1["memory"], rel, map[string]string{
			"memory.usage_in_bytes": "50000000\n",
			"memory.stat":           "cache 1000\ninactive_file 5\nactive_file 7\ntotal_inactive_file 8000000\ntotal_active_file 1\n",
		}},
		{v2.v2Root, rel, map[string]string{
			"cpu.stat":       "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
			"memory.current": "30000000\n",
			"memory.stat":    "anon 100\nfile 200\nactive_anon 1\ninactive_anon 2\nactive_file 9\ninactive_file 1000000\n",
		}},
		{v1.v1["memory"], cached, map[string]string{"memory.usage_in_bytes": "4096\n", "memory.stat": "total_inactive_file 8192\n"}},
		{v2.v2Root, cached, map[string]string{"memory.current": "4096\n", "memory.stat": "inactive_file 8192\n"}},
		// Files that do not parse.
		{v1.v1["cpuacct"], "/bad", map[string]string{"cpuacct.usage": "lots\n"}},
		{v2.v2Root, "/bad", map[string]string{"cpu.stat": "user_usec 1\n", "memory.current": "max\n"}},
	}
	for _, f := range fixtures {
		writeCgroup(t, f.mnt, f.rel, f.files)
	}

	tests := []struct {
		name    string
		h       cgroupHost
		rel     string
		cpu, ws uint64
		there   bool
	}{
		{"v1", v1, rel, 123456789, 42000000, true},
		{"v2", v2, rel, 2500000, 29000000, true},
		{"v1 gone", v1, "/staticlet/gone", 0, 0, false},
		{"v2 gone", v2, "/staticlet/gone", 0, 0, false},
	}
	for _, tt := range tests {
		cpu, ok, err := tt.h.cpuUsage(tt.rel)
		if err != nil || ok != tt.there || cpu != tt.cpu {
			t.Errorf("%s: cpuUsage(%q) = %d, %v, %v, want %d, %v, nil", tt.name, tt.rel, cpu, ok, err, tt.cpu, tt.there)
		}
		ws, ok, err := tt.h.workingSet(tt.rel)
		if err != nil || ok != tt.there || ws != tt.ws {
			t.Errorf("%s: workingSet(%q) = %d, %v, %v, want %d, %v, nil", tt.name, tt.rel, ws, ok, err, tt.ws, tt.there)
		}
	}
	for name, h := range map[string]cgroupHost{"v1": v1, "v2": v2} {
		if ws, ok, err := h.workingSet(cached); err != nil || !ok || ws != 0 {
			t.Errorf("%s: workingSet(%q) = %d, %v, %v, want 0, true, nil", name, cached, ws, ok, err)
		}
	}

	// Files that do not parse are errors.
	if _, _, err := v1.cpuUsage("/bad"); err == nil {
		t.Errorf("v1: cpuUsage of a bad cpuacct.usage: no error")
	}
	if _, _, err := v2.cpuUsage("/bad"); err == nil {
		t.Errorf("v2: cpuUsage of a cpu.stat without usage_usec: no error")
	}
	if _, _, err := v2.workingSet("/bad"); err == nil {
		t.Errorf("v2: workingSet of a bad memory.current: no error")
	}
}

func TestTopWorkingSetOf(t *testing.T) {
	tests := []struct{ usage, inactive, want uint64 }{
		{100, 30, 70},
		{100, 0, 100},
		{100, 100, 0},
		{100, 250, 0},
		{0, 0, 0},
	}
	for _, tt := range tests {
		if got := workingSetOf(tt.usage, tt.inactive); got != tt.want {
			t.Errorf("workingSetOf(%d, %d) = %d, want %d", tt.usage, tt.inactive, got, tt.want)
		}
	}
}

func TestTopStatValue(t *testing.T) {
	stat := []byte("cache 5\ntotal_inactive_file 77\ninactive_file 3\n")
	tests := []struct {
		key  string
		want uint64
		ok   bool
	}{
		{"inactive_file", 3, true},
		{"total_inactive_file", 77, true},
		{"cache", 5, true},
		{"inactive", 0, false},
	}
	for _, tt := range tests {
		if got, ok := statValue(stat, tt.key); got != tt.want || ok != tt.ok {
			t.Errorf("statValue(%q) = %d, %v, want %d, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNodeWorkingSet(t *testing.T) {
	v1, v2 := fakeHosts(t)
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal:  1000 kB\nMemFree:  200 kB\nInactive(file):  300 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeCgroup(t, v1.v1["memory"], "/", map[string]string{
		"memory.usage_in_bytes": "900000\n",
		"memory.stat":           "inactive_file 1\ntotal_inactive_file 100000\n",
	})
	// A v2 host without memory.stat at its root (older kernels),
	// then with one.
	bare := v2
	bare.v2Root = filepath.Join(t.TempDir(), "bare")
	writeCgroup(t, v2.v2Root, "/", map[string]string{"memory.stat": "anon 5\ninactive_file 102400\n"})
	for _, tc := range []struct {
		name string
		host cgroupHost
		want uint64
	}{
		{"v1: root usage less total_inactive_file", v1, 800000},
		{"v2: meminfo in use less Inactive(file)", bare, (800 - 300) * 1024},
		{"v2: meminfo in use less root inactive_file", v2, 800*1024 - 102400},
	} {
		got, err := tc.host.nodeWorkingSet(meminfo)
		if err != nil || got != tc.want {
			t.Errorf("%s: nodeWorkingSet = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := v2.nodeWorkingSet(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("nodeWorkingSet without meminfo: no error")
	}
}
