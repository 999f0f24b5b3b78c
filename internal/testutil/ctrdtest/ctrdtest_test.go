package ctrdtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/staticlet/staticlet/internal/sandbox/procfs"
)

// TestRunContainer proves the harness and the test image on this machine: a
// container from the imported image runs a shell that exits 3.
func TestRunContainer(t *testing.T) {
	env := Start(t)
	const ns = "staticlet"
	img := env.ImportImage(t, ns, "")
	c := env.Client(t)

	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), time.Minute)
	defer cancel()
	id := "ctrdtest-" + rand.Text()[:8] // unique: cgroup paths are shared across daemons
	ctr, err := c.NewContainer(ctx, id,
		client.WithImage(img),
		client.WithSnapshotter(env.Snapshotter),
		client.WithNewSnapshot(id+"-snapshot", img),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("sh", "-c", "echo hi; exit 3")),
	)
	if err != nil {
		t.Fatalf("NewContainer: %v", err)
	}
	// No deferred cleanup of ctr or its task: Env's cleanup must do it.

	var stdout, stderr strings.Builder
	task, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr)))
	if err != nil {
		t.Fatalf("NewTask: %v", err)
	}
	exitCh, err := task.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case st := <-exitCh:
		code, _, err := st.Result()
		if err != nil {
			t.Fatalf("exit status: %v", err)
		}
		if code != 3 {
			t.Errorf("exit code = %d, want 3", code)
		}
	case <-ctx.Done():
		t.Fatalf("waiting for task exit: %v", ctx.Err())
	}
	// The output is copied once the shim closes its end of the FIFOs,
	// after the exit; Delete would close ours (cio's Cancel), losing what
	// a copy on a busy machine has not read yet.
	task.IO().Wait()
	if _, err := task.Delete(ctx); err != nil {
		t.Fatalf("task Delete: %v", err)
	}
	if got := stdout.String(); got != "hi\n" {
		t.Errorf("stdout = %q, want %q (stderr %q)", got, "hi\n", stderr.String())
	}
}

// TestStopLeavesNothing checks that Stop removes a running task's shim and
// container process, its mounts and the temp dir, whether containerd is still
// there to delete the task or was killed and left them behind.
func TestStopLeavesNothing(t *testing.T) {
	tests := []struct {
		name       string
		killDaemon bool
	}{
		{name: "daemon running"},
		{name: "daemon killed", killDaemon: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testStopLeavesNothing(t, tt.killDaemon)
		})
	}
}

func testStopLeavesNothing(t *testing.T, killDaemon bool) {
	if err := Preflight(); err != nil {
		t.Skip(err)
	}
	// Built first, so the build, when it has to run, is not held to the
	// start's deadline.
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), buildTimeout)
	_, err := SelectedDaemon(buildCtx)
	cancelBuild()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := tempDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := StartDaemon(ctx, dir)
	if env == nil {
		os.RemoveAll(dir)
	}
	if err != nil {
		if env != nil {
			env.Stop(ctx)
		}
		t.Fatalf("StartDaemon: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			env.Stop(ctx)
		}
	})

	const ns, ref = "other", "example.com/busybox:other"
	img := env.ImportImage(t, ns, ref)
	if got := img.Name(); got != ref {
		t.Errorf("image name = %q, want %q", got, ref)
	}
	c := env.Client(t)
	nsCtx := namespaces.WithNamespace(ctx, ns)
	id := "ctrdtest-" + rand.Text()[:8]
	ctr, err := c.NewContainer(nsCtx, id,
		client.WithSnapshotter(env.Snapshotter),
		client.WithNewSnapshot(id, img),
		client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs("sleep", "600")),
	)
	if err != nil {
		t.Fatalf("NewContainer: %v", err)
	}
	task, err := ctr.NewTask(nsCtx, cio.NullIO)
	if err != nil {
		t.Fatalf("NewTask: %v", err)
	}
	if err := task.Start(nsCtx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	initPID := int(task.Pid())
	if shimDir := env.daemon.ShimDir; shimDir != "" {
		checkShimFrom(t, env.Address, shimDir)
	}
	if killDaemon {
		if err := env.cmd.Process.Kill(); err != nil {
			t.Fatalf("killing containerd: %v", err)
		}
		<-env.exited
	}

	stopped = true
	if err := env.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop, stat %s: %v, want not exist", dir, err)
	}
	if err := waitGone(initPID, 5*time.Second); err != nil {
		t.Errorf("container init: %v", err)
	}
	procs, err := procfs.List()
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	for _, p := range procs {
		if strings.Contains(strings.Join(p.Args, " "), dir) {
			t.Errorf("process %d %q outlived Stop", p.PID, p.Args)
		}
		if p.PPID == self && p.State == 'Z' {
			t.Errorf("zombie child %d (%s) left unreaped", p.PID, p.Comm)
		}
	}
	points, err := mountPointsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 0 {
		t.Errorf("mounts under %s outlived Stop: %q", dir, points)
	}
	leftovers, err := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", ns, id))
	if err != nil {
		t.Fatal(err)
	}
	if st := filepath.Join(runcRoot, ns, id); exists(st) {
		leftovers = append(leftovers, st)
	}
	if len(leftovers) != 0 {
		t.Errorf("cgroups or runc state outlived Stop: %q", leftovers)
	}
}

// checkShimFrom checks that the shims serving the daemon at address run
// the runc shim in dir: that of the daemon's own release, not the
// distribution's.
func checkShimFrom(t *testing.T, address, dir string) {
	t.Helper()
	procs, err := procfs.List()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, shimName)
	found := false
	for _, p := range procs {
		if !isShimFor(p.Args, address) {
			continue
		}
		found = true
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID)); err != nil || exe != want {
			t.Errorf("shim %d runs %q (%v), want %q", p.PID, exe, err, want)
		}
	}
	if !found {
		t.Errorf("no shim for %s among the processes", address)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestUnescapeMountPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/plain", "/plain"},
		{`/a\040b`, "/a b"},
		{`/a\134b`, `/a\b`},
		{`/trailing\04`, `/trailing\04`},
	}
	for _, tt := range tests {
		if got := unescapeMountPath(tt.in); got != tt.want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestConfig(t *testing.T) {
	dir := "/tmp/ctrd123"
	tests := []struct {
		major        int
		want, unwant []string
	}{
		{major: 1, want: []string{"version = 2", `"io.containerd.snapshotter.v1.aufs"`}},
		{major: 2, want: []string{"version = 3", `"io.containerd.cri.v1.runtime"`}, unwant: []string{"aufs"}},
	}
	for _, tt := range tests {
		cfg := config(dir, socketPaths(dir), tt.major)
		for _, want := range append(tt.want, `address = "/tmp/ctrd123/c.sock"`, `"io.containerd.grpc.v1.cri"`, `"io.containerd.nri.v1.nri"`) {
			if !strings.Contains(cfg, want) {
				t.Errorf("config(%q, major %d) lacks %s:\n%s", dir, tt.major, want, cfg)
			}
		}
		for _, unwant := range tt.unwant {
			if strings.Contains(cfg, unwant) {
				t.Errorf("config(%q, major %d) has %s:\n%s", dir, tt.major, unwant, cfg)
			}
		}
	}
}

func TestParseMajor(t *testing.T) {
	tests := []struct {
		out  string
		want int
	}{
		{"containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", 1},
		{"containerd github.com/containerd/containerd v1.7.35 \n", 1},
		{"containerd github.com/containerd/containerd/v2 v2.4.2 \n", 2},
	}
	for _, tt := range tests {
		if got, err := parseMajor(tt.out); err != nil || got != tt.want {
			t.Errorf("parseMajor(%q) = %d, %v, want %d", tt.out, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "containerd x", "containerd x y.1"} {
		if _, err := parseMajor(bad); err == nil {
			t.Errorf("parseMajor(%q) succeeded, want error", bad)
		}
	}
}

// TestReleases checks the pins: a module version of the module path its
// major version implies, and no series twice.
func TestReleases(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Releases {
		wantModule := "github.com/containerd/containerd"
		if r.Major() >= 2 {
			wantModule += fmt.Sprintf("/v%d", r.Major())
		}
		if r.Major() < 1 || r.Module != wantModule || !strings.HasPrefix(r.Version, "v"+r.Series+".") || seen[r.Series] {
			t.Errorf("release %+v: want a version vN.M.P of series N.M (once) and module %s", r, wantModule)
		}
		seen[r.Series] = true
	}
}

func TestSelected(t *testing.T) {
	type test struct {
		env      string
		version  string // of the release selected, "" for none
		path     string
		wantFail bool
	}
	tests := []test{
		{env: ""},
		{env: "system"},
		{env: "/opt/ctrd/containerd", path: "/opt/ctrd/containerd"},
		{env: "1.5", wantFail: true},
		{env: "1.7.3", wantFail: true},
	}
	for _, r := range Releases {
		tests = append(tests,
			test{env: r.Series, version: r.Version},
			test{env: r.Version, version: r.Version},
			test{env: strings.TrimPrefix(r.Version, "v"), version: r.Version})
	}
	tests = append(tests, test{env: "2", version: Releases[len(Releases)-1].Version})
	for _, tt := range tests {
		t.Setenv(DaemonEnv, tt.env)
		sel, err := selected()
		if tt.wantFail {
			if err == nil {
				t.Errorf("%s=%q: selected() succeeded, want error", DaemonEnv, tt.env)
			}
			continue
		}
		var version string
		if sel.release != nil {
			version = sel.release.Version
		}
		if err != nil || version != tt.version || sel.path != tt.path {
			t.Errorf("%s=%q: selected() = release %q, path %q, %v; want release %q, path %q",
				DaemonEnv, tt.env, version, sel.path, err, tt.version, tt.path)
		}
	}
}
