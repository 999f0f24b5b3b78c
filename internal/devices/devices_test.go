package devices

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/testutil/cditest"
)

// mknod makes a char device like /dev/null at dir/name.
func mknod(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	cditest.MknodNull(t, path)
	return path
}

// writeSpec writes a CDI spec of kind example.test/dev naming a device
// for each of nodes (name: path), plus env on the kind.
func writeSpec(t *testing.T, dir, file string, nodes map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("cdiVersion: 0.6.0\nkind: example.test/dev\ncontainerEdits:\n  env: [EXAMPLE_TEST=1]\ndevices:\n")
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b.WriteString("- name: " + n + "\n  containerEdits:\n    deviceNodes:\n    - path: " + nodes[n] + "\n")
	}
	// Written whole through a rename, so a refresh that races the write
	// never reads a half-written spec.
	path := filepath.Join(dir, file)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRegistry(t *testing.T) {
	devDir, specDir := t.TempDir(), t.TempDir()
	d0, d1 := mknod(t, devDir, "dev0"), mknod(t, devDir, "dev1")
	spec := writeSpec(t, specDir, "example.yaml", map[string]string{"d0": d0, "d1": d1})
	r := New(Config{SpecDirs: []string{filepath.Join(t.TempDir(), "missing"), specDir}})

	want := []Kind{{Name: "example.test/dev", Devices: []Device{
		{Name: "example.test/dev=d0", Spec: spec}, {Name: "example.test/dev=d1", Spec: spec}}}}
	if got := r.Kinds(); !equalKinds(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"KnownKind(example.test/dev)", r.KnownKind("example.test/dev"), true},
		{"KnownKind(example.test/other)", r.KnownKind("example.test/other"), false},
		{"KnownDevice(example.test/dev=d1)", r.KnownDevice("example.test/dev=d1"), true},
		{"KnownDevice(example.test/dev=all)", r.KnownDevice("example.test/dev=all"), true},
		{"KnownDevice(example.test/dev=d2)", r.KnownDevice("example.test/dev=d2"), false},
		{"KnownDevice(example.test/other=all)", r.KnownDevice("example.test/other=all"), false},
		{"KnownDevice(d1)", r.KnownDevice("d1"), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if got, want := r.Devices("example.test/dev"), []string{"example.test/dev=d0", "example.test/dev=d1"}; !slices.Equal(got, want) {
		t.Errorf("Devices = %v, want %v", got, want)
	}
	if got, want := r.Expand([]string{"example.test/dev=d1", "example.test/dev=all"}), []string{"example.test/dev=d0", "example.test/dev=d1"}; !slices.Equal(got, want) {
		t.Errorf("Expand = %v, want %v", got, want)
	}

	s := &specs.Spec{Linux: &specs.Linux{}, Process: &specs.Process{}}
	if err := r.Inject(s, []string{"example.test/dev=d1"}); err != nil {
		t.Fatalf("Inject: %v", err)
	}
	if len(s.Linux.Devices) != 1 || s.Linux.Devices[0].Path != d1 || s.Linux.Devices[0].Major != 1 || s.Linux.Devices[0].Minor != 3 {
		t.Errorf("Inject: devices %+v, want %s as 1:3", s.Linux.Devices, d1)
	}
	if !slices.Contains(s.Process.Env, "EXAMPLE_TEST=1") {
		t.Errorf("Inject: env %v lacks the kind's EXAMPLE_TEST=1", s.Process.Env)
	}
	if s.Linux.Resources == nil || !slices.ContainsFunc(s.Linux.Resources.Devices, func(c specs.LinuxDeviceCgroup) bool {
		return c.Allow && c.Major != nil && *c.Major == 1 && c.Minor != nil && *c.Minor == 3
	}) {
		t.Errorf("Inject: no cgroup rule allowing 1:3 in %+v", s.Linux.Resources)
	}
	if err := r.Inject(&specs.Spec{Linux: &specs.Linux{}}, []string{"example.test/dev=d2"}); err == nil {
		t.Errorf("Inject of an unknown device succeeded")
	}
}

func TestRunRefreshes(t *testing.T) {
	devDir, root := t.TempDir(), t.TempDir()
	d0 := mknod(t, devDir, "dev0")
	// The directory does not exist yet: its parent is watched.
	specDir := filepath.Join(root, "cdi")
	// Changed must never block Run: each write in the loop below may
	// change the listing, and only the first change is awaited.
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	r := New(Config{SpecDirs: []string{specDir}, Changed: notify})
	if r.KnownKind("example.test/dev") {
		t.Fatal("a kind known before any spec")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := os.Mkdir(specDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSpec(t, specDir, "example.yaml", map[string]string{"d0": d0})
	waitFor(t, "the spec", func() bool { return r.KnownDevice("example.test/dev=d0") })
	<-changed
	if err := os.Remove(filepath.Join(specDir, "example.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spec's removal", func() bool { return !r.KnownKind("example.test/dev") })
}

// TestWatchNearestRace makes the spec directory between its failed add
// and its parent's: the parent's watch gives no event for it then, so
// the directory itself must be added.
func TestWatchNearestRace(t *testing.T) {
	root := t.TempDir()
	specDir := filepath.Join(root, "etc", "cdi")
	var added []string
	add := func(d string) error {
		if _, err := os.Stat(d); err != nil {
			if d == specDir {
				// Made, with its parent, right after the add found
				// it missing.
				if err := os.MkdirAll(specDir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			return err
		}
		added = append(added, d)
		return nil
	}
	watchNearest(add, specDir)
	if want := []string{filepath.Join(root, "etc"), specDir}; !slices.Equal(added, want) {
		t.Errorf("added %v, want %v", added, want)
	}

	// Still missing: the nearest parent only.
	added = nil
	missing := filepath.Join(root, "a", "b")
	watchNearest(add, missing)
	if want := []string{root}; !slices.Equal(added, want) {
		t.Errorf("added %v, want %v", added, want)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFromAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		want    []string
		wantErr bool
	}{
		{"none", map[string]string{"other": "x"}, nil, false},
		{"two keys", map[string]string{"cdi.k8s.io/a": "example.test/dev=d1,example.test/dev=d0", "cdi.k8s.io/b": "example.test/dev=d0"},
			[]string{"example.test/dev=d0", "example.test/dev=d1"}, false},
		{"all", map[string]string{"cdi.k8s.io/a": "example.test/dev=all"}, []string{"example.test/dev=all"}, false},
		{"unqualified", map[string]string{"cdi.k8s.io/a": "d0"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromAnnotations(tc.ann)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("FromAnnotations(%v) = %v, %v; want %v, error %v", tc.ann, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestIsKind(t *testing.T) {
	for name, want := range map[string]bool{
		"example.test/dev": true, "nvidia.com/gpu": true, "cpu": false, "hugepages-2Mi": false, "/dev": false, "a/": false,
	} {
		if got := IsKind(name); got != want {
			t.Errorf("IsKind(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestHostDevices(t *testing.T) {
	devs, err := HostDevices()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(devs, func(d specs.LinuxDevice) bool { return d.Path == "/dev/null" && d.Major == 1 && d.Minor == 3 }) {
		t.Errorf("HostDevices() has no /dev/null 1:3: %v", devs)
	}
	if slices.ContainsFunc(devs, func(d specs.LinuxDevice) bool {
		return d.Path == "/dev/console" || strings.HasPrefix(d.Path, "/dev/pts/")
	}) {
		t.Errorf("HostDevices() has the console or a pts, which the CRI leaves out")
	}
}

func TestPollRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		r := New(Config{SpecDirs: []string{dir}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.poll(ctx) }()
		writeSpec(t, dir, "example.yaml", map[string]string{"d0": "/dev/null"})
		synctest.Wait()
		if r.KnownKind("example.test/dev") {
			t.Fatal("the spec counted before a poll")
		}
		time.Sleep(pollPeriod)
		synctest.Wait()
		if !r.KnownDevice("example.test/dev=d0") {
			t.Error("the spec did not count after a poll")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poll: %v", err)
		}
	})
}
