package bench

// The Hundreds sub-benchmark: the 30-pod figures again at 250 pods, so
// that the ratio between the two points shows whether each grows with
// the pods (×8.3) or faster.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// hundredsPods is the pod count of the Hundreds point, beyond the
// kubelet's default maxPods of 110.
const hundredsPods = 250

// scalePoint is what Hundreds measures at one pod count.
type scalePoint struct {
	n                  int
	up, down, unlisted time.Duration // staticlet: all running, all gone, none listed
	rawUp, rawDown     time.Duration // raw containerd: all running, all gone
	// The CPU time staticlet and containerd used to start and remove the
	// pods, and containerd's for raw containerd doing the same.
	cpu, ctrdCPU, rawCtrdCPU time.Duration
	rss                      int64     // staticlet's RSS with the pods running
	fp                       footprint // PSS with the pods running
	idle                     idleCPU   // over the idle window with the pods running
}

// benchHundreds measures once, whatever b.N: benchPods and then
// hundredsPods idle one-container hostNetwork pods written at once and,
// once they run and have idled, removed at once; raw containerd starting
// and stopping as many containers (each in a shim of its own) after each.
// At each point: how long until all ran and all were gone, the CPU
// staticlet and containerd spent on it, staticlet's RSS, the PSS of
// containerd and the shims, and their idle CPU over the idle window
// (STATICLET_BENCH_IDLE, default 60s). Each figure at hundredsPods is
// reported beside raw containerd's or, per pod, beside benchPods'.
func (be *benchEnv) benchHundreds(b *testing.B) {
	for b.Loop() { // once: the figures are not per iteration
	}
	b.ReportMetric(0, "ns/op")
	ctx := context.Background()
	window := idleWindow(b)
	be.waitNoPods(b)
	time.Sleep(time.Second)
	none, err := be.measureFootprint(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rss0, err := procRSS(be.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	small := be.scalePoint(b, ctx, benchPods, window)
	big := be.scalePoint(b, ctx, hundredsPods, window)
	for _, p := range []scalePoint{small, big} {
		b.ReportMetric(ms(p.up), fmt.Sprintf("%d-running-ms", p.n))
		b.ReportMetric(ms(p.down), fmt.Sprintf("%d-gone-ms", p.n))
		b.ReportMetric(mib(p.rss), fmt.Sprintf("%d-staticlet-RSS-MiB", p.n))
		b.ReportMetric(p.idle.perMin(p.idle.staticlet+p.idle.containerd+p.idle.shims), fmt.Sprintf("%d-idle-ms/min", p.n))
	}
	be.report(b, hundredsLines(small, big, none, rss0)...)
}

// scalePoint writes n pods at once, waits until they run, measures them
// idle, removes them at once, and then has raw containerd start and stop
// n containers.
func (be *benchEnv) scalePoint(b *testing.B, ctx context.Context, n int, window time.Duration) scalePoint {
	p := scalePoint{n: n}
	spid, cpid := be.cmd.Process.Pid, be.containerdPID()
	cpu := func() (s, c time.Duration) {
		s, err := procCPU(spid)
		if err != nil {
			b.Fatal(err)
		}
		if c, err = procCPU(cpid); err != nil {
			b.Fatal(err)
		}
		return s, c
	}
	names := make([]string, n)
	markers := make([]string, n)
	for i := range n {
		names[i], markers[i] = fmt.Sprintf("scale%03d", i), newMarker()
	}
	watch := watchProcs(b)
	s0, c0 := cpu()
	t0 := time.Now()
	for i, name := range names {
		be.write(b, name+".yaml", harness.BenchPod(name, markers[i]))
	}
	pids, at := watch.waitMarkers(b, markers)
	p.up = at.Sub(t0)
	be.waitCounts(b, ctx, n, n)
	s1, c1 := cpu()

	time.Sleep(idleCPUSettle)
	var err error
	if p.fp, err = be.measureFootprint(ctx); err != nil {
		b.Fatal(err)
	}
	if p.rss, err = procRSS(spid); err != nil {
		b.Fatal(err)
	}
	if p.idle, err = be.measureIdleCPU(ctx, window); err != nil {
		b.Fatal(err)
	}

	exits := watchProcs(b)
	s2, c2 := cpu()
	t1 := time.Now()
	for _, name := range names {
		be.remove(b, name+".yaml")
	}
	p.down = exits.waitGone(b, pids).Sub(t1)
	be.waitNoPods(b)
	p.unlisted = time.Since(t1)
	s3, c3 := cpu()
	p.cpu, p.ctrdCPU = s1-s0+s3-s2, c1-c0+c3-c2

	_, c4 := cpu()
	p.rawUp, p.rawDown = be.manyRaw(b, n)
	_, c5 := cpu()
	p.rawCtrdCPU = c5 - c4
	return p
}

// hundredsLines are the report of Hundreds: big's figures beside raw
// containerd's, and per pod beside small's; none is the footprint and
// rss0 staticlet's RSS with no pod.
func hundredsLines(small, big scalePoint, none footprint, rss0 int64) []string {
	pods := float64(big.n) / float64(small.n)
	grow := func(a, b float64) string {
		if a == 0 {
			return "-"
		}
		return fmt.Sprintf("×%.2f", b/a)
	}
	perPod := func(p scalePoint, d time.Duration) float64 { return ms(d) / float64(p.n) }
	daemons := func(p scalePoint) time.Duration { return p.idle.staticlet + p.idle.containerd + p.idle.shims }
	// Memory per pod: what the pods added to the figure with none.
	added := func(p scalePoint, v, v0 int64) float64 { return mib(v-v0) / float64(p.n) }
	return []string{
		fmt.Sprintf("%d pods at once:  all running %s after the first write (raw containerd %s, ratio %.2f), all processes gone %s after the first unlink (raw SIGTERM→gone %s, ratio %.2f; every pod unlisted %s)",
			big.n, fmtMS(big.up), fmtMS(big.rawUp), ratio(big.up, big.rawUp), fmtMS(big.down), fmtMS(big.rawDown), ratio(big.down, big.rawDown), fmtMS(big.unlisted)),
		fmt.Sprintf("   vs %d pods:     running %s, gone %s, unlisted %s: growth %s, %s, %s for ×%.1f the pods (linear: the pods' ratio; raw containerd %s, %s)",
			small.n, fmtMS(small.up), fmtMS(small.down), fmtMS(small.unlisted),
			grow(ms(small.up), ms(big.up)), grow(ms(small.down), ms(big.down)), grow(ms(small.unlisted), ms(big.unlisted)), pods,
			grow(ms(small.rawUp), ms(big.rawUp)), grow(ms(small.rawDown), ms(big.rawDown))),
		fmt.Sprintf("%d pods CPU:      to start and remove them, staticlet %.1f ms a pod (%d pods: %.1f, %s), containerd %.1f ms a pod (raw containerd %.1f ms a container, ratio %.2f; %d pods: %.1f, %s)",
			big.n, perPod(big, big.cpu), small.n, perPod(small, small.cpu), grow(perPod(small, small.cpu), perPod(big, big.cpu)),
			perPod(big, big.ctrdCPU), perPod(big, big.rawCtrdCPU), ratio(big.ctrdCPU, big.rawCtrdCPU), small.n, perPod(small, small.ctrdCPU), grow(perPod(small, small.ctrdCPU), perPod(big, big.ctrdCPU))),
		fmt.Sprintf("%d pods memory:   staticlet RSS %.1f MiB (%.1f with none, %.1f with %d: %.3f MiB a pod, %d pods %.3f, %s), containerd PSS %+.1f MiB over none (%.3f MiB a pod, %d pods %.3f, %s), shims %.1f MiB PSS (%d; %.3f MiB a pod, %d pods %.3f, %s)",
			big.n, mib(big.rss), mib(rss0), mib(small.rss), small.n,
			added(big, big.rss, rss0), small.n, added(small, small.rss, rss0), grow(added(small, small.rss, rss0), added(big, big.rss, rss0)),
			mib(big.fp.containerd-none.containerd), added(big, big.fp.containerd, none.containerd), small.n, added(small, small.fp.containerd, none.containerd),
			grow(added(small, small.fp.containerd, none.containerd), added(big, big.fp.containerd, none.containerd)),
			mib(big.fp.shims), big.fp.nShims, added(big, big.fp.shims, 0), small.n, added(small, small.fp.shims, 0), grow(added(small, small.fp.shims, 0), added(big, big.fp.shims, 0))),
		fmt.Sprintf("%d pods idle CPU: staticlet %.0f ms/min, containerd %.0f ms/min, shims %.0f ms/min (%d): the three %.0f ms/min, %.2f ms/min a pod (%d pods: %.0f ms/min, %.2f a pod); growth %s, %s, %s, the three %s for ×%.1f the pods (over %s)",
			big.n, big.idle.perMin(big.idle.staticlet), big.idle.perMin(big.idle.containerd), big.idle.perMin(big.idle.shims), big.idle.nShims,
			big.idle.perMin(daemons(big)), big.idle.perMin(daemons(big))/float64(big.n), small.n, small.idle.perMin(daemons(small)), small.idle.perMin(daemons(small))/float64(small.n),
			grow(small.idle.perMin(small.idle.staticlet), big.idle.perMin(big.idle.staticlet)),
			grow(small.idle.perMin(small.idle.containerd), big.idle.perMin(big.idle.containerd)),
			grow(small.idle.perMin(small.idle.shims), big.idle.perMin(big.idle.shims)),
			grow(small.idle.perMin(daemons(small)), big.idle.perMin(daemons(big))), pods, big.idle.window.Round(time.Second)),
	}
}
