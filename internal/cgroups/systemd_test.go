package cgroups

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/testutil/logindtest"
)

func TestSliceProperties(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	limited := &specs.LinuxResources{
		CPU:    &specs.LinuxCPU{Shares: u64(256), Quota: i64(50000), Period: u64(100000)},
		Memory: &specs.LinuxMemory{Limit: i64(128 << 20)},
		Pids:   &specs.LinuxPids{Limit: i64(1024)},
	}
	unlimited := &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: u64(2)}}
	type prop struct {
		name  string
		value uint64
	}
	tests := []struct {
		name string
		v2   bool
		r    *specs.LinuxResources
		want []prop
	}{
		{"v2 limits", true, limited, []prop{{"CPUWeight", 10}, {"CPUQuotaPerSecUSec", 500000}, {"MemoryMax", 128 << 20}, {"TasksMax", 1024}}},
		{"v1 limits", false, limited, []prop{{"CPUShares", 256}, {"CPUQuotaPerSecUSec", 500000}, {"MemoryLimit", 128 << 20}, {"TasksMax", 1024}}},
		{"v2 lifted", true, unlimited, []prop{{"CPUWeight", 1}, {"CPUQuotaPerSecUSec", math.MaxUint64}, {"MemoryMax", math.MaxUint64}, {"TasksMax", math.MaxUint64}}},
		{"none", true, nil, nil},
	}
	for _, tt := range tests {
		var got []prop
		for _, p := range sliceProperties(tt.v2, tt.r) {
			v, ok := p.Value.Value().(uint64)
			if !ok {
				t.Errorf("%s: property %s = %v, want a uint64", tt.name, p.Name, p.Value)
			}
			got = append(got, prop{p.Name, v})
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: sliceProperties = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestQuotaPerSecond: systemd keeps a quota in steps of 1% of a CPU, so a
// pod's is rounded up, never below what its containers may use.
func TestQuotaPerSecond(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		c    specs.LinuxCPU
		want uint64
	}{
		{specs.LinuxCPU{}, math.MaxUint64},
		{specs.LinuxCPU{Quota: i64(-1)}, math.MaxUint64},
		{specs.LinuxCPU{Quota: i64(50000)}, 500000},
		{specs.LinuxCPU{Quota: i64(1000), Period: u64(100000)}, 10000},
		{specs.LinuxCPU{Quota: i64(25500), Period: u64(100000)}, 260000},
		{specs.LinuxCPU{Quota: i64(50000), Period: u64(50000)}, 1000000},
	}
	for _, tt := range tests {
		if got := quotaPerSecond(&tt.c); got != tt.want {
			t.Errorf("quotaPerSecond(%+v) = %d, want %d", tt.c, got, tt.want)
		}
	}
}

// TestSystemdCgroupNames: the names runc and systemd are given agree with
// the layout the systemd driver promises, and RelPath finds the
// container's cgroup from its cgroupsPath.
func TestSystemdCgroupNames(t *testing.T) {
	r := &Manager{root: "static-let", slices: &systemdSlices{}}
	if got := r.rootSlice(); got != "static_let" {
		t.Errorf("rootSlice() = %q, want static_let", got)
	}
	cg := r.ContainerCgroup("static_let-burstable-podu_1.slice", "c1")
	if cg != "static_let-burstable-podu_1.slice:static_let:c1" {
		t.Errorf("containerCgroup = %q", cg)
	}
	rel, err := RelPath(cg)
	want := "/static_let.slice/static_let-burstable.slice/static_let-burstable-podu_1.slice/static_let-c1.scope"
	if err != nil || rel != want {
		t.Errorf("RelPath(%q) = %q, %v; want %q", cg, rel, err, want)
	}
	if _, ok := r.RuntimeOptions().(interface{ GetSystemdCgroup() bool }); !ok {
		t.Errorf("RuntimeOptions() = %T, want runc options", r.RuntimeOptions())
	}
	fs := &Manager{root: "staticlet"}
	if got := fs.ContainerCgroup("/staticlet/podu", "c1"); got != "/staticlet/podu/c1" {
		t.Errorf("cgroupfs containerCgroup = %q", got)
	}
	if fs.RuntimeOptions() != nil {
		t.Errorf("cgroupfs RuntimeOptions() = %v, want none", fs.RuntimeOptions())
	}
}

// TestSystemdConnectionOutlivesItsCall checks that the D-Bus connection
// the slices share stays up when the call that made it ends: go-systemd
// gives godbus the context it connects with as the connection's, and
// godbus closes the connection when that context ends, under the other
// pods' calls then on it. A private bus stands in for the system bus.
func TestSystemdConnectionOutlivesItsCall(t *testing.T) {
	bus := logindtest.Start(t, logindtest.Config{})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address)
	s := &systemdSlices{v2: true}
	t.Cleanup(s.close)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	conn, err := s.connection(ctx)
	if err != nil {
		t.Fatalf("connection: %v", err)
	}
	cancel()
	// godbus closes a connection whose context ended from a goroutine
	// of its own, a moment later: give it that moment.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) && conn.Connected() {
		time.Sleep(10 * time.Millisecond)
	}
	if !conn.Connected() {
		t.Fatal("the connection closed when the call that made it ended")
	}
	again, err := s.connection(t.Context())
	if err != nil {
		t.Fatalf("connection again: %v", err)
	}
	if again != conn {
		t.Error("connection made a new connection while the first was up")
	}
}

// TestDialSystemdContextDone checks that a dial whose context is already
// done returns its error rather than a connection.
func TestDialSystemdContextDone(t *testing.T) {
	bus := logindtest.Start(t, logindtest.Config{})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.Address)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if conn, err := dialSystemd(ctx); err == nil {
		conn.Close()
		t.Fatal("dialSystemd with a done context: no error")
	}
}
