package bench

// Benchmarks for `make bench`: the built staticlet against a private
// containerd, each figure next to what the containerd Go client does for the
// same container in the same run, so that the ratios mean something on any
// machine. Nothing here asserts a timing: each sub-benchmark reports its
// medians with b.ReportMetric and BenchmarkStaticlet prints a summary table.
//
// Latencies are observed from outside, as a user would: a container counts
// as running once a process whose arguments hold a marker unique to the
// iteration has been exec'd, and as gone once its process has exited, both
// as the kernel's process events tell it, with its timestamps (procWatch;
// /proc is polled where those are not to be had).
//
// Environment:
//   STATICLET_BENCH_IDLE  the window over which idle CPU is measured (60s),
//                         by Resources and IdleCPU
//   STATICLET_BENCH_LOG   keep staticlet's output, at debug level, in this file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// rawNS holds the containers the benchmarks create through the containerd
// client directly, out of staticlet's sight.
const rawNS = "rawbench"

// benchWait bounds every wait of a benchmark; none is reached when things work.
const benchWait = 30 * time.Second

// benchWaitPer is how long, per pod or process, a wait on many of them
// may take past benchWait: hundreds of pods take tens of seconds to start
// or go on two busy cores.
const benchWaitPer = 500 * time.Millisecond

// waitFor bounds a wait on n pods, containers or processes.
func waitFor(n int) time.Duration { return max(benchWait, time.Duration(n)*benchWaitPer) }

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

func benchArgs(marker string) []string { return []string{"sh", "-c", harness.BenchScript, marker} }

var markerSeq atomic.Int64

// newMarker returns an argument no other process on the machine has.
func newMarker() string {
	return fmt.Sprintf("slbench-%d-%d", os.Getpid(), markerSeq.Add(1))
}

// BenchmarkStaticlet runs every figure against one private containerd and one
// staticlet, then prints the summary table.
func BenchmarkStaticlet(b *testing.B) {
	be := newBenchEnv(b)
	b.Run("ManifestToRunning", be.benchStart)
	b.Run("ChangeToRunning", be.benchChange)
	b.Run("RemoveToGone", be.benchRemove)
	b.Run("ExitToRestart", be.benchRestart)
	b.Run("EtcdToHealthy", be.benchEtcd)
	b.Run("Resources", be.benchResources)
	b.Run("ManyAtOnce", be.benchMany)
	b.Run("Footprint", be.benchFootprint)
	b.Run("IdleCPU", be.benchIdleCPU)
	b.Run("Hundreds", be.benchHundreds)
	b.Run("ProbeCPU", be.benchProbeCPU)
	b.Run("LivenessToRestart", be.benchLiveness)
	be.printSummary()
}

// benchEnv is the world of BenchmarkStaticlet: a private containerd holding
// the test image in staticlet's namespace and in rawNS, and one staticlet.
type benchEnv struct {
	ctrd     *ctrdtest.Env
	client   *client.Client
	rawImage client.Image
	manifest string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
	status   *status.Client
	summary  map[string][]string
	order    []string
	// lastPort is the last port probePort handed out.
	lastPort int
}

func newBenchEnv(b *testing.B) *benchEnv {
	dir, err := os.MkdirTemp("", "slb")
	if err != nil {
		b.Fatal(err)
	}
	// The log daemon outlives staticlet; it goes last (see harness.NewEnv).
	var logDaemon int
	logDir := logd.Dir(filepath.Join(dir, "root"))
	b.Cleanup(func() { harness.StopLogDaemon(b, logDaemon, logDir) })
	b.Cleanup(func() { // after containerd has stopped
		logDaemon = logd.DaemonPID(logDir)
		_ = ctrdtest.UnmountUnder(dir) // namespaces pinned by the killed staticlet
		os.RemoveAll(dir)
	})
	ctrd := ctrdtest.Start(b)
	if p := os.Getenv("STATICLET_BENCH_LOG"); p != "" {
		b.Cleanup(func() { copyFile(b, ctrd.LogPath, p+".containerd") }) // before containerd stops
	}
	ctrd.ImportImage(b, harness.TestNS, testimage.DefaultRef)
	ctrd.ImportImage(b, rawNS, testimage.DefaultRef)
	be := &benchEnv{
		ctrd:     ctrd,
		client:   ctrd.Client(b),
		manifest: filepath.Join(dir, "manifests"),
		logPath:  filepath.Join(dir, "staticlet.log"),
		summary:  map[string][]string{},
	}
	be.rawImage, err = be.client.GetImage(rawCtx(context.Background()), testimage.DefaultRef)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(be.manifest, 0o755); err != nil {
		b.Fatal(err)
	}
	level := "info"
	if p := os.Getenv("STATICLET_BENCH_LOG"); p != "" {
		be.logPath, level = p, "debug"
	}
	out, err := os.Create(be.logPath)
	if err != nil {
		b.Fatal(err)
	}
	socket := filepath.Join(dir, "status.sock")
	be.cmd = exec.Command(harness.Binary(b), "run",
		"--manifest-dir", be.manifest,
		"--containerd-address", ctrd.Address,
		"--root-dir", filepath.Join(dir, "root"),
		"--pod-logs-dir", filepath.Join(dir, "logs"),
		"--status-socket", socket,
		"--node-name", harness.TestNode,
		"--log-level", level)
	be.cmd.Args = append(be.cmd.Args, harness.NewTestNet(b).Flags()...)
	be.cmd.Stdout, be.cmd.Stderr = out, out
	if err := be.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	be.done = make(chan struct{})
	go func() { _ = be.cmd.Wait(); out.Close(); close(be.done) }()
	b.Cleanup(func() {
		_ = be.cmd.Process.Signal(syscall.SIGKILL)
		<-be.done
		if b.Failed() {
			be.logTail(b)
		}
	})
	be.status = status.NewClient(socket)
	harness.WaitFor(b, benchWait, "staticlet ready", func() (bool, string) {
		err := be.status.Ready(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return be
}

// logTail logs the end of staticlet's output.
func (be *benchEnv) logTail(tb testing.TB) {
	out, _ := os.ReadFile(be.logPath)
	if len(out) > 16<<10 {
		out = out[len(out)-16<<10:]
	}
	tb.Logf("staticlet output (end of %s):\n%s", be.logPath, out)
}

// copyFile copies src to dst, for logs kept past the run.
func copyFile(tb testing.TB, src, dst string) {
	data, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, data, 0o644)
	}
	if err != nil {
		tb.Logf("keeping %s: %v", src, err)
	}
}

// trace logs one sample with its wall-clock start, to line up with the
// daemons' logs, when STATICLET_BENCH_LOG asks for logs.
func trace(tb testing.TB, what string, t0 time.Time, d time.Duration) {
	if os.Getenv("STATICLET_BENCH_LOG") != "" {
		tb.Logf("trace %s: from %s took %s", what, t0.UTC().Format("15:04:05.000000"), d)
	}
}

// report records a sub-benchmark's lines for the summary and logs them.
func (be *benchEnv) report(b *testing.B, lines ...string) {
	name := b.Name()
	if _, ok := be.summary[name]; !ok {
		be.order = append(be.order, name)
	}
	be.summary[name] = lines
	for _, l := range lines {
		b.Log(l)
	}
}

func (be *benchEnv) printSummary() {
	if len(be.order) == 0 {
		return
	}
	fmt.Println("\nstaticlet vs raw containerd (same containerd, same run):")
	for _, name := range be.order {
		for _, l := range be.summary[name] {
			fmt.Println("  " + l)
		}
	}
	fmt.Println()
}

// --- staticlet side ---

func (be *benchEnv) write(tb testing.TB, name, content string) {
	tmp := filepath.Join(be.manifest, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(be.manifest, name)); err != nil {
		tb.Fatal(err)
	}
}

func (be *benchEnv) remove(tb testing.TB, name string) {
	if err := os.Remove(filepath.Join(be.manifest, name)); err != nil {
		tb.Fatal(err)
	}
}

// waitNoPods waits until staticlet lists no pod and no container of it is
// left in containerd, so that the next iteration starts from nothing; as
// long as it takes the most pods a benchmark runs to go.
func (be *benchEnv) waitNoPods(tb testing.TB) {
	tb.Helper()
	ctx := harness.NSCtx(context.Background())
	harness.WaitFor(tb, waitFor(hundredsPods), "every pod and container removed", func() (bool, string) {
		list, err := be.status.Pods(ctx)
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) > 0 {
			return false, fmt.Sprintf("%d pods listed", len(list.Items))
		}
		cs, err := be.client.Containers(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(cs) == 0, fmt.Sprintf("%d containers left", len(cs))
	})
}

// waitSandboxUp waits until pod name reports its sandbox running.
func (be *benchEnv) waitSandboxUp(tb testing.TB, name string) {
	tb.Helper()
	harness.WaitFor(tb, benchWait, name+"'s sandbox running", func() (bool, string) {
		p, err := be.status.Pod(context.Background(), name)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReadyToStartContainers {
				return c.Status == v1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no PodReadyToStartContainers condition"
	})
}

// --- raw containerd side ---

func rawCtx(ctx context.Context) context.Context { return namespaces.WithNamespace(ctx, rawNS) }

// rawCtr is a container run straight through the containerd client.
type rawCtr struct {
	c    client.Container
	task client.Task
	exit <-chan client.ExitStatus
}

var rawSeq atomic.Int64

// rawStart does what a minimal runtime does for a hostNetwork container:
// new container with a snapshot of the image, a spec from the image config,
// a task, start.
func (be *benchEnv) rawStart(ctx context.Context, args []string) (*rawCtr, error) {
	return be.rawStartImage(ctx, be.rawImage, args)
}

// rawStartImage is rawStart with another image, and opts (mounts, for
// example) applied to the spec last.
func (be *benchEnv) rawStartImage(ctx context.Context, img client.Image, args []string, opts ...oci.SpecOpts) (*rawCtr, error) {
	id := fmt.Sprintf("raw-%d-%d", os.Getpid(), rawSeq.Add(1))
	opts = append([]oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs(args...),
		oci.WithHostNamespace(specs.NetworkNamespace)}, opts...)
	c, err := be.client.NewContainer(ctx, id,
		client.WithImage(img),
		client.WithSnapshotter(be.ctrd.Snapshotter),
		client.WithNewSnapshot(id, img),
		client.WithNewSpec(opts...))
	if err != nil {
		return nil, err
	}
	r := &rawCtr{c: c}
	if err := r.newTask(ctx); err != nil {
		_ = c.Delete(ctx, client.WithSnapshotCleanup)
		return nil, err
	}
	return r, nil
}

func (r *rawCtr) newTask(ctx context.Context) error {
	t, err := r.c.NewTask(ctx, cio.NullIO)
	if err != nil {
		return err
	}
	if err := t.Start(ctx); err != nil {
		_, _ = t.Delete(ctx, client.WithProcessKill)
		return err
	}
	r.task = t
	return nil
}

// watchExit subscribes to the task's exit; call it before making it exit.
func (r *rawCtr) watchExit(ctx context.Context) error {
	ch, err := r.task.Wait(ctx)
	r.exit = ch
	return err
}

// stop ends the task with SIGTERM (SIGKILL after 10s) and deletes it.
func (r *rawCtr) stop(ctx context.Context) error {
	if r.exit == nil {
		if err := r.watchExit(ctx); err != nil {
			return err
		}
	}
	// NotFound: the process has exited already.
	if err := r.task.Kill(ctx, syscall.SIGTERM); err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	select {
	case <-r.exit:
	case <-time.After(10 * time.Second):
		_ = r.task.Kill(ctx, syscall.SIGKILL)
		<-r.exit
	}
	_, err := r.task.Delete(ctx)
	r.exit = nil
	return err
}

// remove stops the task and deletes the container and its snapshot.
func (r *rawCtr) remove(ctx context.Context) error {
	return errors.Join(r.stop(ctx), r.c.Delete(ctx, client.WithSnapshotCleanup))
}

// --- /proc ---

func listPIDs() map[int]bool {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	out := make(map[int]bool, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out[pid] = true
		}
	}
	return out
}

// waitGone waits for process pid to leave /proc or become a zombie.
func waitGone(tb testing.TB, pid int) time.Time {
	tb.Helper()
	deadline := time.Now().Add(benchWait)
	for harness.ProcessRunning(pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("process %d still runs after %s", pid, benchWait)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

// goneAsync reports when process pid leaves /proc or becomes a zombie,
// polling every millisecond.
func goneAsync(pid int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		for harness.ProcessRunning(pid) {
			time.Sleep(time.Millisecond)
		}
		ch <- time.Now()
	}()
	return ch
}

// procCPU returns utime+stime of pid.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// After ")": state is field 3, utime 14, stime 15.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * clockTick, nil
}

// procRSS returns the resident set size of pid in bytes.
func procRSS(pid int) (int64, error) { return procKB(pid, "status", "VmRSS:") }

// procKB returns, in bytes, the figure in kB on the line of
// /proc/<pid>/<file> that begins with field.
func procKB(pid int, file, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/%s", field, pid, file)
}

// containerdPID finds the private containerd by its config path.
func (be *benchEnv) containerdPID() int {
	cfg := filepath.Join(be.ctrd.Dir, "config.toml")
	for pid := range listPIDs() {
		if slices.Contains(harness.Cmdline(pid), cfg) {
			return pid
		}
	}
	return 0
}

// --- statistics ---

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtMS(d time.Duration) string {
	return strconv.FormatFloat(ms(d), 'f', 1, 64) + "ms"
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// --- 1. manifest → process running ---

// benchStart: from the atomic rename of a new manifest into the directory to
// the container's process running its command; raw containerd creating and
// starting the same container alongside.
func (be *benchEnv) benchStart(b *testing.B) {
	var sl, raw []time.Duration
	for b.Loop() {
		// staticlet
		marker := newMarker()
		watch := watchProcs(b)
		t0 := time.Now()
		be.write(b, "start.yaml", harness.BenchPod("start", marker))
		_, at := watch.waitMarker(b, marker)
		sl = append(sl, at.Sub(t0))
		trace(b, b.Name()+" sl", t0, sl[len(sl)-1])
		be.remove(b, "start.yaml")
		be.waitNoPods(b)

		// raw containerd
		ctx, cancel := context.WithTimeout(rawCtx(context.Background()), benchWait)
		marker = newMarker()
		watch = watchProcs(b)
		t0 = time.Now()
		r, err := be.rawStart(ctx, benchArgs(marker))
		if err != nil {
			b.Fatal(err)
		}
		_, at = watch.waitMarker(b, marker)
		raw = append(raw, at.Sub(t0))
		trace(b, b.Name()+" raw", t0, raw[len(raw)-1])
		if err := r.remove(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	s, r := reportMedians(b, sl, raw)
	b.ReportMetric(ratio(s, r), "ratio")
	be.report(b, fmt.Sprintf("manifest→running:  staticlet median %s, raw containerd %s, ratio %.2f (target ≤ 1.5; n=%d)",
		fmtMS(s), fmtMS(r), ratio(s, r), len(sl)))
}

// reportMedians reports the medians of staticlet's and raw containerd's
// samples, staticlet's as the benchmark's ns/op, and returns them.
func reportMedians(b *testing.B, sl, raw []time.Duration) (s, r time.Duration) {
	s, r = median(sl), median(raw)
	b.ReportMetric(float64(s), "ns/op")
	b.ReportMetric(ms(s), "staticlet-ms")
	b.ReportMetric(ms(r), "raw-ms")
	return s, r
}

// --- 2. changed manifest → new container running ---

// benchChange: rewriting a running pod's manifest with new arguments, to the
// new process running. Alongside: when the old process was gone, and raw
// containerd doing the same replacement (SIGTERM, wait, delete, create,
// start), whose kill→gone part is the old container's own stop time.
func (be *benchEnv) benchChange(b *testing.B) {
	marker := newMarker()
	watch := watchProcs(b)
	be.write(b, "change.yaml", harness.BenchPod("change", marker))
	pid, _ := watch.waitMarker(b, marker)

	ctx, cancel := context.WithTimeout(rawCtx(context.Background()), 10*time.Minute)
	defer cancel()
	rmarker := newMarker()
	watch = watchProcs(b)
	r, err := be.rawStart(ctx, benchArgs(rmarker))
	if err != nil {
		b.Fatal(err)
	}
	rpid, _ := watch.waitMarker(b, rmarker)

	var sl, slGone, raw, rawStop []time.Duration
	for b.Loop() {
		// staticlet
		marker := newMarker()
		watch := watchProcs(b)
		t0 := time.Now()
		be.write(b, "change.yaml", harness.BenchPod("change", marker))
		gone := goneAsync(pid)
		npid, at := watch.waitMarker(b, marker)
		sl = append(sl, at.Sub(t0))
		trace(b, b.Name()+" sl", t0, sl[len(sl)-1])
		slGone = append(slGone, (<-gone).Sub(t0))
		trace(b, b.Name()+" slGone", t0, slGone[len(slGone)-1])
		pid = npid

		// raw containerd: replace the container the way staticlet must.
		rmarker := newMarker()
		watch = watchProcs(b)
		if err := r.watchExit(ctx); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		if err := r.task.Kill(ctx, syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		gone = goneAsync(rpid)
		<-r.exit
		r.exit = nil
		if _, err := r.task.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		if err := r.c.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			b.Fatal(err)
		}
		if r, err = be.rawStart(ctx, benchArgs(rmarker)); err != nil {
			b.Fatal(err)
		}
		npid, at = watch.waitMarker(b, rmarker)
		raw = append(raw, at.Sub(t0))
		trace(b, b.Name()+" raw", t0, raw[len(raw)-1])
		rawStop = append(rawStop, (<-gone).Sub(t0))
		trace(b, b.Name()+" rawStop", t0, rawStop[len(rawStop)-1])
		rpid = npid
	}
	if err := r.remove(ctx); err != nil {
		b.Fatal(err)
	}
	be.remove(b, "change.yaml")
	be.waitNoPods(b)

	s, rw := reportMedians(b, sl, raw)
	sg, st := median(slGone), median(rawStop)
	b.ReportMetric(ms(sg), "staticlet-old-gone-ms")
	b.ReportMetric(ms(st), "stop-ms")
	b.ReportMetric(ratio(s, rw), "ratio")
	be.report(b, fmt.Sprintf("changed→running:   staticlet median %s (old process gone at %s), raw containerd replace %s, ratio %.2f; old container's own stop %s (target < 500ms + stop; n=%d)",
		fmtMS(s), fmtMS(sg), fmtMS(rw), ratio(s, rw), fmtMS(st), len(sl)))
}

// --- 3. removed manifest → process gone ---

// benchRemove: from unlinking a running pod's manifest to its process being
// gone; alongside, raw containerd's SIGTERM to the same container's task
// until gone, which is the container's own exit time.
func (be *benchEnv) benchRemove(b *testing.B) {
	var sl, raw []time.Duration
	for b.Loop() {
		marker := newMarker()
		watch := watchProcs(b)
		be.write(b, "remove.yaml", harness.BenchPod("remove", marker))
		pid, _ := watch.waitMarker(b, marker)
		t0 := time.Now()
		be.remove(b, "remove.yaml")
		sl = append(sl, waitGone(b, pid).Sub(t0))
		trace(b, b.Name()+" sl", t0, sl[len(sl)-1])
		be.waitNoPods(b)

		ctx, cancel := context.WithTimeout(rawCtx(context.Background()), benchWait)
		marker = newMarker()
		watch = watchProcs(b)
		r, err := be.rawStart(ctx, benchArgs(marker))
		if err != nil {
			b.Fatal(err)
		}
		pid, _ = watch.waitMarker(b, marker)
		if err := r.watchExit(ctx); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		if err := r.task.Kill(ctx, syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		raw = append(raw, waitGone(b, pid).Sub(t0))
		trace(b, b.Name()+" raw", t0, raw[len(raw)-1])
		if err := r.remove(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	s, r := reportMedians(b, sl, raw)
	b.ReportMetric(ms(s-r), "overhead-ms")
	be.report(b, fmt.Sprintf("removed→gone:      staticlet median %s, raw containerd SIGTERM→gone %s, overhead %s (target < 100ms; n=%d)",
		fmtMS(s), fmtMS(r), fmtMS(s-r), len(sl)))
}

// --- 4. container exit → first restart ---

// benchRestart: a restartPolicy Always pod whose process is SIGKILLed by PID;
// from the kill to the restarted process running. Each iteration is a new
// pod, so each restart is the first of its streak (no backoff). Alongside,
// raw containerd after the same kill: wait for the exit, delete the task,
// create and start a new one.
func (be *benchEnv) benchRestart(b *testing.B) {
	var sl, raw []time.Duration
	for b.Loop() {
		marker := newMarker()
		watch := watchProcs(b)
		be.write(b, "restart.yaml", harness.BenchPod("restart", marker))
		pid, _ := watch.waitMarker(b, marker)
		// Measure a pod at rest, not one whose sandbox is still starting.
		be.waitSandboxUp(b, "restart-"+harness.TestNode)
		watch = watchProcs(b)
		t0 := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		_, at := watch.waitMarker(b, marker)
		sl = append(sl, at.Sub(t0))
		trace(b, b.Name()+" sl", t0, sl[len(sl)-1])
		be.remove(b, "restart.yaml")
		be.waitNoPods(b)

		ctx, cancel := context.WithTimeout(rawCtx(context.Background()), benchWait)
		marker = newMarker()
		watch = watchProcs(b)
		r, err := be.rawStart(ctx, benchArgs(marker))
		if err != nil {
			b.Fatal(err)
		}
		pid, _ = watch.waitMarker(b, marker)
		if err := r.watchExit(ctx); err != nil {
			b.Fatal(err)
		}
		watch = watchProcs(b)
		t0 = time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		<-r.exit
		r.exit = nil
		if _, err := r.task.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		if err := r.newTask(ctx); err != nil {
			b.Fatal(err)
		}
		_, at = watch.waitMarker(b, marker)
		raw = append(raw, at.Sub(t0))
		trace(b, b.Name()+" raw", t0, raw[len(raw)-1])
		if err := r.remove(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	s, r := reportMedians(b, sl, raw)
	b.ReportMetric(ratio(s, r), "ratio")
	be.report(b, fmt.Sprintf("exit→restarted:    staticlet median %s, raw containerd new task %s, ratio %.2f (target < 50ms; n=%d)",
		fmtMS(s), fmtMS(r), ratio(s, r), len(sl)))
}

// --- 5. memory and CPU ---

// benchPods is how many pods the resource figures run.
const benchPods = 30

// idleWindow is how long idle CPU is measured over: STATICLET_BENCH_IDLE,
// 60s by default. A shorter one is for trying the benchmarks out.
func idleWindow(b *testing.B) time.Duration {
	v := os.Getenv("STATICLET_BENCH_IDLE")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("STATICLET_BENCH_IDLE: %v", err)
	}
	return d
}

// benchResources measures once, whatever b.N: staticlet's RSS with no pod
// and with benchPods running pods, and its CPU over an idle window
// (STATICLET_BENCH_IDLE, default 60s) with those pods; containerd's CPU over
// the same window for comparison.
func (be *benchEnv) benchResources(b *testing.B) {
	idle := idleWindow(b)
	pid := be.cmd.Process.Pid
	be.waitNoPods(b)
	time.Sleep(time.Second)
	rss0, err := procRSS(pid)
	if err != nil {
		b.Fatal(err)
	}

	for i := range benchPods {
		name := fmt.Sprintf("idle%02d", i)
		be.write(b, name+".yaml", harness.BenchPod(name, newMarker()))
	}
	ctx := context.Background()
	harness.WaitFor(b, 5*time.Minute, fmt.Sprintf("%d pods running", benchPods), func() (bool, string) {
		list, err := be.status.Pods(ctx)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for i := range list.Items {
			if harness.Running(&list.Items[i]) {
				n++
			}
		}
		return n == benchPods, fmt.Sprintf("%d of %d running", n, benchPods)
	})
	time.Sleep(2 * time.Second) // let the start-up garbage go

	rss1, err := procRSS(pid)
	if err != nil {
		b.Fatal(err)
	}
	cpid := be.containerdPID()
	cpu0, err := procCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	ccpu0, _ := procCPU(cpid)
	w0 := time.Now()
	time.Sleep(idle)
	cpu1, err := procCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	ccpu1, _ := procCPU(cpid)
	window := time.Since(w0)
	rss2, err := procRSS(pid)
	if err != nil {
		b.Fatal(err)
	}
	cpuPct := 100 * float64(cpu1-cpu0) / float64(window)
	ccpuPct := 100 * float64(ccpu1-ccpu0) / float64(window)

	for i := range benchPods {
		be.remove(b, fmt.Sprintf("idle%02d.yaml", i))
	}
	be.waitNoPods(b)

	for b.Loop() {
	}
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mb(rss0), "rss0-MB")
	b.ReportMetric(mb(max(rss1, rss2)), "rss30-MB")
	b.ReportMetric(cpuPct, "cpu-%")
	b.ReportMetric(ccpuPct, "containerd-cpu-%")
	be.report(b,
		fmt.Sprintf("memory:            staticlet RSS %.1f MB with 0 pods, %.1f MB with %d pods (%.1f after the idle window) (target < 40 MB)",
			mb(rss0), mb(rss1), benchPods, mb(rss2)),
		fmt.Sprintf("idle CPU:          staticlet %.2f%% of one core over %s with %d pods (target < 1%%); containerd %.2f%%",
			cpuPct, window.Round(time.Second), benchPods, ccpuPct))
}
