package bench

// The Footprint sub-benchmark: memory as a node sees it, the proportional
// set size (PSS, /proc/<pid>/smaps_rollup) of every process staticlet adds
// beside the workload, for benchPods idle pods and for one pod of each
// shape. PSS rather than RSS because the helpers are many copies of a few
// binaries: RSS would count their shared pages once per process.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// footprintSettle is how long the pods idle, once every one is running,
// before their helpers are measured: the Go helpers (pause, log drivers)
// and the shims free their start-up garbage and fault in what an idle
// process touches. There is no condition to wait on for "memory is
// stable", hence a delay, and the figures are reported, never asserted.
const footprintSettle = 10 * time.Second

// footprint is the PSS, in bytes, of what staticlet adds, by group, and
// how many processes each group holds.
type footprint struct {
	shims, pause, loggers, other     int64
	nShims, nPause, nLoggers, nOther int
	staticlet, containerd            int64
}

// minus is f less g, group by group.
func (f footprint) minus(g footprint) footprint {
	return footprint{
		shims: f.shims - g.shims, pause: f.pause - g.pause, loggers: f.loggers - g.loggers, other: f.other - g.other,
		nShims: f.nShims - g.nShims, nPause: f.nPause - g.nPause, nLoggers: f.nLoggers - g.nLoggers, nOther: f.nOther - g.nOther,
		staticlet: f.staticlet - g.staticlet, containerd: f.containerd - g.containerd,
	}
}

// helpers is the PSS of every process staticlet adds besides its own.
func (f footprint) helpers() int64 { return f.shims + f.pause + f.loggers + f.other }

// mib is n bytes in MiB.
func mib(n int64) float64 { return float64(n) / (1 << 20) }

// footprintPod is a manifest of an idle pod with n containers.
func footprintPod(name string, hostNetwork bool, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  hostNetwork: %t\n  terminationGracePeriodSeconds: 10\n  containers:\n", name, hostNetwork)
	for i := range n {
		fmt.Fprintf(&b, "  - name: c%d\n    image: localhost/busybox:test\n    command: [\"sh\", \"-c\", %q, %q]\n", i, harness.BenchScript, newMarker())
	}
	return b.String()
}

// benchFootprint measures once, whatever b.N: with benchPods idle
// one-container hostNetwork pods, the PSS of staticlet's helpers by group,
// containerd's growth over no pod and staticlet's own PSS; then the
// helpers of a single pod of each shape (hostNetwork, pod network, three
// containers), added to those pods and alone on the node. The task counts
// waited for are the containers of the pods: their sandboxes have no pause
// process (they share no PID namespace).
func (be *benchEnv) benchFootprint(b *testing.B) {
	for b.Loop() { // once: the figures are not per iteration
	}
	ctx := context.Background()
	be.waitNoPods(b)
	cpid := be.containerdPID()
	if cpid == 0 {
		b.Fatal("containerd's process not found")
	}
	c0, err := pss(cpid)
	if err != nil {
		b.Fatal(err)
	}

	var names []string
	for i := range benchPods {
		name := fmt.Sprintf("fp%02d", i)
		names = append(names, name)
		be.write(b, name+".yaml", footprintPod(name, true, 1))
	}
	f := be.steadyFootprint(b, ctx, benchPods, benchPods)
	growth := f.containerd - c0
	all := f.helpers() + growth + f.staticlet
	lines := []string{fmt.Sprintf("footprint:         %d pods: shims %.1f MiB (%d), pause %.1f MiB (%d), loggers %.1f MiB (%d), other %.1f MiB (%d), containerd %+.1f MiB, staticlet %.1f MiB; helpers per pod %.2f MiB (target ≤ 1 MiB), everything per pod %.2f MiB",
		benchPods, mib(f.shims), f.nShims, mib(f.pause), f.nPause, mib(f.loggers), f.nLoggers, mib(f.other), f.nOther,
		mib(growth), mib(f.staticlet), mib(f.helpers())/benchPods, mib(all)/benchPods),
		// The same, as the side-by-side table of node agents has it.
		"footprint table:   | agent | runtime daemon growth | per-pod helpers | total | per pod |",
		fmt.Sprintf("                   | %.1f MiB | %+.1f MiB | shims %.1f + pause %.1f + loggers %.1f + other %.1f MiB | %.1f MiB | %.2f MiB |",
			mib(f.staticlet), mib(growth), mib(f.shims), mib(f.pause), mib(f.loggers), mib(f.other), mib(all), mib(all)/benchPods)}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib(f.shims), "shims-MiB")
	b.ReportMetric(mib(f.pause), "pause-MiB")
	b.ReportMetric(mib(f.loggers), "loggers-MiB")
	b.ReportMetric(mib(f.other), "other-MiB")
	b.ReportMetric(mib(growth), "containerd-growth-MiB")
	b.ReportMetric(mib(f.staticlet), "staticlet-MiB")
	b.ReportMetric(mib(f.helpers())/benchPods, "helpers-per-pod-MiB")

	// Each shape twice. Added to the benchPods pods, the growth of the
	// helpers' total PSS is what one more pod of that shape costs (PSS
	// sums to the memory in use, so the pages it shares with the others
	// are counted once, in the difference). Alone on the node, its helpers
	// share their binaries' pages with nothing but staticlet: the cost of
	// a node's first pod.
	//
	// Except for the shims: their total moves between two measurements a
	// few seconds apart by more than one pod adds to it (adding or
	// removing one pod makes staticlet's resyncs ask every shim for its
	// tasks' state, and each shim's Go heap grows and is given back on its
	// own schedule), so the pod added counts for the shims' mean PSS per
	// pod measured with it: a whole shim when each pod has its own, its
	// share of the shared ones otherwise.
	shapes := []struct {
		name, metric string
		hostNetwork  bool
		containers   int
	}{
		{"hostNetwork", "hostnet", true, 1},
		{"pod network", "podnet", false, 1},
		{"3 containers", "3ctr", true, 3},
	}
	added := make([]footprint, len(shapes))
	for i, s := range shapes {
		base, err := be.measureFootprint(ctx)
		if err != nil {
			b.Fatal(err)
		}
		be.write(b, "shape.yaml", footprintPod("shape", s.hostNetwork, s.containers))
		g := be.steadyFootprint(b, ctx, benchPods+1, benchPods+s.containers)
		added[i] = g.minus(base)
		added[i].shims = g.shims / (benchPods + 1) // see above: the shims' mean per pod
		be.remove(b, "shape.yaml")
		be.waitCounts(b, ctx, benchPods, benchPods)
	}
	be.removeAll(b, names)
	var parts []string
	for i, s := range shapes {
		be.write(b, "shape.yaml", footprintPod("shape", s.hostNetwork, s.containers))
		f := be.steadyFootprint(b, ctx, 1, s.containers)
		be.removeAll(b, []string{"shape"})
		a := added[i]
		b.ReportMetric(mib(a.helpers()), s.metric+"-added-MiB")
		b.ReportMetric(mib(f.helpers()), s.metric+"-alone-MiB")
		parts = append(parts, fmt.Sprintf("%s %.2f MiB (shims %.2f (mean per pod), pause %.1f, loggers %.1f, other %.1f) added, %.1f MiB alone",
			s.name, mib(a.helpers()), mib(a.shims), mib(a.pause), mib(a.loggers), mib(a.other), mib(f.helpers())))
	}
	lines = append(lines, fmt.Sprintf("footprint, 1 pod:  helpers added to the %d pods, and alone on the node: ", benchPods)+strings.Join(parts, "; "))
	be.report(b, lines...)
}

// removeAll removes the manifests of names and waits until nothing is
// left of their pods.
func (be *benchEnv) removeAll(b *testing.B, names []string) {
	for _, n := range names {
		be.remove(b, n+".yaml")
	}
	be.waitNoPods(b)
}

// steadyFootprint waits until pods pods run, with tasks tasks in
// staticlet's namespace, waits footprintSettle, and measures.
func (be *benchEnv) steadyFootprint(b *testing.B, ctx context.Context, pods, tasks int) footprint {
	b.Helper()
	be.waitCounts(b, ctx, pods, tasks)
	time.Sleep(footprintSettle)
	f, err := be.measureFootprint(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// waitCounts waits until staticlet lists pods pods, every one running, and
// containerd runs tasks tasks in staticlet's namespace.
func (be *benchEnv) waitCounts(b *testing.B, ctx context.Context, pods, tasks int) {
	b.Helper()
	harness.WaitFor(b, 5*time.Minute, fmt.Sprintf("%d pods running", pods), func() (bool, string) {
		listed, n, err := be.countPods(ctx)
		if err != nil {
			return false, err.Error()
		}
		return n == pods && listed == pods, fmt.Sprintf("%d listed, %d running, want %d", listed, n, pods)
	})
	harness.WaitFor(b, waitFor(tasks), fmt.Sprintf("%d tasks running", tasks), func() (bool, string) {
		pause, work, err := be.taskPIDs(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(pause)+len(work) == tasks, fmt.Sprintf("%d pause and %d container tasks", len(pause), len(work))
	})
}

// taskPIDs returns the PIDs of the running tasks in staticlet's namespace:
// the pause processes (kind sandbox) and the containers' init processes.
func (be *benchEnv) taskPIDs(ctx context.Context) (pause, work map[int]bool, err error) {
	ctx = harness.NSCtx(ctx)
	cs, err := be.client.Containers(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing containers: %w", err)
	}
	pause, work = map[int]bool{}, map[int]bool{}
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue // removed since the listing
		}
		t, err := c.Task(ctx, nil)
		if err != nil {
			continue // no task: not running
		}
		st, err := t.Status(ctx)
		if err != nil || st.Status != client.Running {
			continue
		}
		if labels[sandbox.LabelKind] == string(pod.KindSandbox) {
			pause[int(t.Pid())] = true
		} else {
			work[int(t.Pid())] = true
		}
	}
	return pause, work, nil
}

// helperProcs are the processes staticlet adds, by group.
type helperProcs struct {
	shims, pause, loggers, other []int
}

// helperProcs finds the processes staticlet adds in the process table,
// rather than assuming them: the roots are staticlet and the runc shims of
// its namespace on this containerd (containerd-shim-runc-v2 with
// -namespace testNS and -address the test's socket; a shim leaves its
// starter and is re-parented to init, so it is nobody's child here);
// every descendant of a root is staticlet's, grouped as a pause (a sandbox
// task's PID from containerd), a logger (a log driver or forwarder,
// logs.IsDriver on its arguments, or the log daemon) or other — except the workload: a container task's PID from
// containerd and everything below it, the processes the pod asked for,
// which are in no group. Staticlet itself is in none either.
func (be *benchEnv) helperProcs(ctx context.Context) (helperProcs, error) {
	pause, work, err := be.taskPIDs(ctx)
	if err != nil {
		return helperProcs{}, err
	}
	procs, err := procfs.List()
	if err != nil {
		return helperProcs{}, err
	}
	children := map[int][]procfs.Proc{}
	shims := map[int]bool{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p)
		if len(p.Args) > 0 && strings.HasPrefix(filepath.Base(p.Args[0]), "containerd-shim-runc-v2") &&
			procfs.ArgValue(p.Args, "namespace") == harness.TestNS && procfs.ArgValue(p.Args, "address") == be.ctrd.Address {
			shims[p.PID] = true
		}
	}
	var h helperProcs
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if seen[c.PID] || work[c.PID] {
				continue
			}
			seen[c.PID] = true
			switch {
			case shims[c.PID]:
				h.shims = append(h.shims, c.PID)
			case pause[c.PID]:
				h.pause = append(h.pause, c.PID)
			case len(c.Args) > 1 && (logs.IsDriver(c.Args[1:]) || c.Args[1] == "log-daemon"):
				h.loggers = append(h.loggers, c.PID)
			default:
				h.other = append(h.other, c.PID)
			}
			walk(c.PID)
		}
	}
	spid := be.cmd.Process.Pid
	seen[spid] = true
	walk(spid)
	for pid := range shims {
		if !seen[pid] {
			seen[pid] = true
			h.shims = append(h.shims, pid)
			walk(pid)
		}
	}
	return h, nil
}

// measureFootprint reads the PSS of staticlet, of containerd and of every
// process staticlet adds (helperProcs).
func (be *benchEnv) measureFootprint(ctx context.Context) (footprint, error) {
	h, err := be.helperProcs(ctx)
	if err != nil {
		return footprint{}, err
	}
	var f footprint
	add := func(sum *int64, n *int, pids []int) {
		for _, pid := range pids {
			if v, err := pss(pid); err == nil { // gone since the listing: nothing to count
				*sum += v
				*n++
			}
		}
	}
	add(&f.shims, &f.nShims, h.shims)
	add(&f.pause, &f.nPause, h.pause)
	add(&f.loggers, &f.nLoggers, h.loggers)
	add(&f.other, &f.nOther, h.other)
	if f.staticlet, err = pss(be.cmd.Process.Pid); err != nil {
		return footprint{}, err
	}
	if f.containerd, err = pss(be.containerdPID()); err != nil {
		return footprint{}, err
	}
	return f, nil
}

// pss returns the proportional set size of pid in bytes, from the Pss
// line of /proc/<pid>/smaps_rollup.
func pss(pid int) (int64, error) { return procKB(pid, "smaps_rollup", "Pss:") }
