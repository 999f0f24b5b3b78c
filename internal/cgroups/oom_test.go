package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseOOMKills(t *testing.T) {
	tests := []struct {
		name, file string
		want       int
	}{
		{"v2 memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n", 1},
		{"v1 memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3},
		{"v1 before kernel 4.13", "oom_kill_disable 0\nunder_oom 0\n", 0},
		{"oom_group_kill alone", "oom_group_kill 4\n", 0},
		{"empty", "", 0},
	}
	for _, tt := range tests {
		if got := parseOOMKills([]byte(tt.file)); got != tt.want {
			t.Errorf("%s: parseOOMKills = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestCgroupRelPath(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "/staticlet/burstable/pod1/abc", want: "/staticlet/burstable/pod1/abc"},
		{in: "staticlet.slice:staticlet:abc", want: "/staticlet.slice/staticlet-abc.scope"},
		{in: "kubepods-burstable-pod1.slice:cri-containerd:abc", want: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope"},
		{in: ":staticlet:abc", want: "/system.slice/staticlet-abc.scope"},
		{in: "a.slice::abc", want: "/a.slice/abc.scope"},
		{in: "a.slice:x:b-c.slice", want: "/a.slice/b-c.slice"},
		{in: "a.slice:b", bad: true},
		{in: "notaslice:x:y", bad: true},
	}
	for _, tt := range tests {
		got, err := RelPath(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("RelPath(%q) = %q, %v; want %q (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

func TestSliceDir(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "-.slice", want: "/"},
		{in: "system.slice", want: "/system.slice"},
		{in: "staticlet-besteffort-pod1.slice", want: "/staticlet.slice/staticlet-besteffort.slice/staticlet-besteffort-pod1.slice"},
		{in: "a--b.slice", bad: true},
		{in: "-a.slice", bad: true},
		{in: "a-.slice", bad: true},
		{in: "a.scope", bad: true},
		{in: ".slice", bad: true},
		{in: "a/b.slice", bad: true},
	}
	for _, tt := range tests {
		got, err := SliceDir(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("SliceDir(%q) = %q, %v; want %q (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// TestOOMKills reads the count from either hierarchy's file, and a cgroup
// that is gone as none.
func TestOOMKills(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "v2/staticlet.slice/staticlet-c1.scope/memory.events"), "oom 1\noom_kill 1\n")
	write(filepath.Join(dir, "memory/staticlet/pod1/c1/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
	v2 := cgroupHost{unified: true, v2Root: filepath.Join(dir, "v2")}
	v1 := cgroupHost{v1: map[string]string{"memory": filepath.Join(dir, "memory")}}
	tests := []struct {
		name string
		h    cgroupHost
		path string
		want int
	}{
		{"v2 systemd scope", v2, "staticlet.slice:staticlet:c1", 1},
		{"v2 gone", v2, "staticlet.slice:staticlet:c2", 0},
		{"v1 cgroupfs", v1, "/staticlet/pod1/c1", 2},
		{"v1 gone", v1, "/staticlet/pod1/c2", 0},
		{"v1 without memory controller", cgroupHost{v1: map[string]string{}}, "/staticlet/pod1/c1", 0},
	}
	for _, tt := range tests {
		got, err := tt.h.oomKills(tt.path)
		if err != nil || got != tt.want {
			t.Errorf("%s: oomKills(%q) = %d, %v; want %d", tt.name, tt.path, got, err, tt.want)
		}
	}
}

// TestOOMLedger: a slice's kill is guessed only beyond those accounted
// for, and only for slices staticlet made since it started.
func TestOOMLedger(t *testing.T) {
	var l oomLedger
	if l.take("p.slice", 3) {
		t.Errorf("take on an unknown slice = true, want false: kills before staticlet saw it are not guessed")
	}
	l.baseline("p.slice", 2) // two kills before
	l.baseline("p.slice", 5) // a later start does not move it
	if l.take("p.slice", 2) {
		t.Errorf("take with no new kill = true")
	}
	l.claim("p.slice", 1) // a container marked by its own cgroup or the event
	if l.take("p.slice", 3) {
		t.Errorf("take of a kill already claimed = true")
	}
	if !l.take("p.slice", 4) || l.take("p.slice", 4) {
		t.Errorf("take of one new kill: want true once")
	}
	l.forget("p.slice")
	if l.take("p.slice", 9) {
		t.Errorf("take after forget = true")
	}
	l.claim("q.slice", 1) // no entry: nothing to account
	if l.take("q.slice", 1) {
		t.Errorf("take on a slice only claimed = true")
	}
}

func TestPodSlice(t *testing.T) {
	for in, want := range map[string]string{
		"staticlet-podu.slice:staticlet:c1": "staticlet-podu.slice",
		"/staticlet/podu/c1":                "",
		"":                                  "",
	} {
		if got := podSlice(in); got != want {
			t.Errorf("podSlice(%q) = %q, want %q", in, got, want)
		}
	}
}
