package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// manyRuns is how many times each count of pods is started at once.
const manyRuns = 3

// benchMany: manyCounts pods written at once, from the first write to the
// last of their processes running, and from the first unlink to the last
// gone; raw containerd creating and starting as many containers at once
// (each in a shim of its own, containerd's default), and sending each
// SIGTERM, alongside; and until staticlet lists none of the pods and
// containerd holds none of their containers (polled every 50 ms). The
// medians of manyRuns runs.
func (be *benchEnv) benchMany(b *testing.B) {
	for b.Loop() { // once: the figures are not per iteration
	}
	var lines []string
	for _, n := range []int{10, benchPods} {
		var up, down, clean, rawUp, rawDown, cpu, rawCPU []time.Duration
		for range manyRuns {
			c0 := machineCPU(b)
			u, d, c := be.manyStaticlet(b, n)
			cpu = append(cpu, machineCPU(b)-c0)
			up, down, clean = append(up, u), append(down, d), append(clean, c)
			c0 = machineCPU(b)
			u, d = be.manyRaw(b, n)
			rawCPU = append(rawCPU, machineCPU(b)-c0)
			rawUp, rawDown = append(rawUp, u), append(rawDown, d)
		}
		target := map[int]string{10: "0.5s", benchPods: "1.5s"}[n]
		su, sd, ru, rd := median(up), median(down), median(rawUp), median(rawDown)
		b.ReportMetric(ms(su), fmt.Sprintf("%d-running-ms", n))
		b.ReportMetric(ms(sd), fmt.Sprintf("%d-gone-ms", n))
		b.ReportMetric(ms(ru), fmt.Sprintf("%d-raw-running-ms", n))
		b.ReportMetric(ms(median(clean)), fmt.Sprintf("%d-unlisted-ms", n))
		lines = append(lines, fmt.Sprintf("%d pods at once:   all running %s after the first write (raw containerd %s, ratio %.2f), all processes gone %s after the first unlink (raw SIGTERM→gone %s; every pod unlisted %s) (target ≤ %s each; median of %d)",
			n, fmtMS(su), fmtMS(ru), ratio(su, ru), fmtMS(sd), fmtMS(rd), fmtMS(median(clean)), target, manyRuns),
			fmt.Sprintf("%d pods CPU:       the machine's CPU (all of it: run on an idle machine) from the first write until every pod was gone %s, %.1f ms a pod (raw containerd, no pod cgroup, files, /sys/fs/cgroup mount or logs: %s, %.1f ms a container; ratio %.2f)",
				n, fmtMS(median(cpu)), ms(median(cpu))/float64(n), fmtMS(median(rawCPU)), ms(median(rawCPU))/float64(n), ratio(median(cpu), median(rawCPU))))
	}
	be.report(b, lines...)
	b.ReportMetric(0, "ns/op")
}

// machineCPU is the CPU time every processor of the machine has spent
// busy since boot (everything but idle and iowait in /proc/stat).
func machineCPU(tb testing.TB) time.Duration {
	tb.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat begins %q", line)
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("/proc/stat: %v", err)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick // /proc/stat counts in USER_HZ too
}

// manyStaticlet writes n pods at once and removes them, and returns how
// long until all their processes ran and, after the unlinks, were gone,
// and staticlet listed none of the pods.
func (be *benchEnv) manyStaticlet(b *testing.B, n int) (up, down, clean time.Duration) {
	be.waitNoPods(b)
	markers := make([]string, n)
	for i := range markers {
		markers[i] = newMarker()
	}
	watch := watchProcs(b)
	t0 := time.Now()
	for i, m := range markers {
		be.write(b, fmt.Sprintf("many%02d.yaml", i), harness.BenchPod(fmt.Sprintf("many%02d", i), m))
	}
	pids, at := watch.waitMarkers(b, markers)
	up = at.Sub(t0)
	exits := watchProcs(b)
	t1 := time.Now()
	for i := range markers {
		be.remove(b, fmt.Sprintf("many%02d.yaml", i))
	}
	down = exits.waitGone(b, pids).Sub(t1)
	be.waitNoPods(b)
	return up, down, time.Since(t1)
}

// manyRaw starts n containers at once through the containerd client, then
// sends each SIGTERM at once, and returns how long until all ran and were
// gone; it removes them.
func (be *benchEnv) manyRaw(b *testing.B, n int) (up, down time.Duration) {
	// Creating, starting, stopping and removing them all.
	ctx, cancel := context.WithTimeout(rawCtx(context.Background()), 4*waitFor(n))
	defer cancel()
	markers := make([]string, n)
	for i := range markers {
		markers[i] = newMarker()
	}
	ctrs := make([]*rawCtr, n)
	errs := make([]error, n)
	watch := watchProcs(b)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, m := range markers {
		wg.Go(func() { ctrs[i], errs[i] = be.rawStart(ctx, benchArgs(m)) })
	}
	pids, at := watch.waitMarkers(b, markers)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	up = at.Sub(t0)
	for _, r := range ctrs {
		if err := r.watchExit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	exits := watchProcs(b)
	t1 := time.Now()
	for i, r := range ctrs {
		wg.Go(func() { errs[i] = r.task.Kill(ctx, syscall.SIGTERM) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	down = exits.waitGone(b, pids).Sub(t1)
	for _, r := range ctrs {
		wg.Go(func() {
			if err := r.remove(ctx); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	return up, down
}
