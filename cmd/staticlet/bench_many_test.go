package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
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
		var up, down, clean, rawUp, rawDown []time.Duration
		for range manyRuns {
			u, d, c := be.manyStaticlet(b, n)
			up, down, clean = append(up, u), append(down, d), append(clean, c)
			u, d = be.manyRaw(b, n)
			rawUp, rawDown = append(rawUp, u), append(rawDown, d)
		}
		target := map[int]string{10: "0.5s", benchPods: "1.5s"}[n]
		su, sd, ru, rd := median(up), median(down), median(rawUp), median(rawDown)
		b.ReportMetric(ms(su), fmt.Sprintf("%d-running-ms", n))
		b.ReportMetric(ms(sd), fmt.Sprintf("%d-gone-ms", n))
		b.ReportMetric(ms(ru), fmt.Sprintf("%d-raw-running-ms", n))
		b.ReportMetric(ms(median(clean)), fmt.Sprintf("%d-unlisted-ms", n))
		lines = append(lines, fmt.Sprintf("%d pods at once:   all running %s after the first write (raw containerd %s, ratio %.2f), all processes gone %s after the first unlink (raw SIGTERM→gone %s; every pod unlisted %s) (target ≤ %s each; median of %d)",
			n, fmtMS(su), fmtMS(ru), ratio(su, ru), fmtMS(sd), fmtMS(rd), fmtMS(median(clean)), target, manyRuns))
	}
	be.report(b, lines...)
	b.ReportMetric(0, "ns/op")
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
	old := listPIDs()
	t0 := time.Now()
	for i, m := range markers {
		be.write(b, fmt.Sprintf("many%02d.yaml", i), benchPod(fmt.Sprintf("many%02d", i), m))
	}
	pids, at := waitMarkers(b, markers, old)
	up = at.Sub(t0)
	t1 := time.Now()
	for i := range markers {
		be.remove(b, fmt.Sprintf("many%02d.yaml", i))
	}
	down = waitAllGone(b, pids).Sub(t1)
	be.waitNoPods(b)
	return up, down, time.Since(t1)
}

// manyRaw starts n containers at once through the containerd client, then
// sends each SIGTERM at once, and returns how long until all ran and were
// gone; it removes them.
func (be *benchEnv) manyRaw(b *testing.B, n int) (up, down time.Duration) {
	ctx, cancel := context.WithTimeout(rawCtx(context.Background()), benchWait)
	defer cancel()
	markers := make([]string, n)
	for i := range markers {
		markers[i] = newMarker()
	}
	ctrs := make([]*rawCtr, n)
	errs := make([]error, n)
	old := listPIDs()
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, m := range markers {
		wg.Go(func() { ctrs[i], errs[i] = be.rawStart(ctx, benchArgs(m)) })
	}
	pids, at := waitMarkers(b, markers, old)
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
	down = waitAllGone(b, pids).Sub(t1)
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

// waitMarkers waits until, for each marker, a process outside old has it
// among its arguments, polling /proc every millisecond; it returns them
// and when the last was seen.
func waitMarkers(tb testing.TB, markers []string, old map[int]bool) ([]int, time.Time) {
	tb.Helper()
	deadline := time.Now().Add(benchWait)
	found := map[string]int{}
	matched := map[int]bool{}
	for {
		for pid := range listPIDs() {
			// A process is read again until it matched: runc's init
			// becomes the container's process by exec.
			if old[pid] || matched[pid] {
				continue
			}
			args := cmdline(pid)
			for _, m := range markers {
				if _, ok := found[m]; !ok && slices.Contains(args, m) {
					found[m], matched[pid] = pid, true
				}
			}
		}
		if len(found) == len(markers) {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d processes running after %s", len(found), len(markers), benchWait)
		}
		time.Sleep(time.Millisecond)
	}
	at := time.Now()
	pids := make([]int, 0, len(found))
	for _, pid := range found {
		pids = append(pids, pid)
	}
	return pids, at
}

// waitAllGone waits until every process of pids has left /proc or is a
// zombie, and returns when.
func waitAllGone(tb testing.TB, pids []int) time.Time {
	tb.Helper()
	for _, pid := range pids {
		waitGone(tb, pid)
	}
	return time.Now()
}
