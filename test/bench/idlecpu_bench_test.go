package bench

// The IdleCPU sub-benchmark: what idle pods cost in CPU, staticlet's and
// that of what it makes work (containerd, the shims, the pods' helpers),
// at two pod counts, so that the growth between them shows whether a
// resync's cost is linear in the pods.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// idleCPUPods are the pod counts IdleCPU measures, one after the other
// (the pods of the first stay for the second).
var idleCPUPods = []int{benchPods, 100}

// idleCPUSettle is how long the pods idle, once every one is running,
// before the window opens: the last starts' work (the shims' and
// containerd's bookkeeping, staticlet's status updates) is not idle cost.
const idleCPUSettle = 5 * time.Second

// idleCPU is the CPU time (utime+stime, children not included) each group
// of processes used over a window, and how many processes each group held.
type idleCPU struct {
	window                           time.Duration
	staticlet, containerd            time.Duration
	shims, pause, loggers, other     time.Duration
	nShims, nPause, nLoggers, nOther int
}

// perMin is d used over the window, scaled to one minute of it.
func (u idleCPU) perMin(d time.Duration) float64 {
	return ms(d) * float64(time.Minute) / float64(u.window)
}

// benchIdleCPU measures once, whatever b.N: for each count in idleCPUPods,
// that many idle one-container hostNetwork pods, the CPU staticlet,
// containerd, the shims and the pods' helpers (pause, log drivers, other)
// use over the idle window (STATICLET_BENCH_IDLE, default 60s), in ms per
// minute. staticlet runs with its default resync period, as users do.
// Figures are reported, never asserted.
func (be *benchEnv) benchIdleCPU(b *testing.B) {
	for b.Loop() { // once: the figures are not per iteration
	}
	ctx := context.Background()
	window := idleWindow(b)
	be.waitNoPods(b)
	b.ReportMetric(0, "ns/op")
	var names, lines []string
	var first idleCPU
	for i, n := range idleCPUPods {
		for j := len(names); j < n; j++ {
			name := fmt.Sprintf("cpu%03d", j)
			names = append(names, name)
			be.write(b, name+".yaml", footprintPod(name, true, 1))
		}
		be.waitCounts(b, ctx, n, n) // a task per pod: no pause process
		time.Sleep(idleCPUSettle)
		u, err := be.measureIdleCPU(ctx, window)
		if err != nil {
			b.Fatal(err)
		}
		daemons := u.staticlet + u.containerd + u.shims
		for _, m := range []struct {
			name string
			d    time.Duration
		}{
			{"staticlet", u.staticlet}, {"containerd", u.containerd}, {"shims", u.shims},
			{"pause", u.pause}, {"loggers", u.loggers}, {"other", u.other},
		} {
			b.ReportMetric(u.perMin(m.d), fmt.Sprintf("%s-ms/min-%dpods", m.name, n))
		}
		lines = append(lines,
			fmt.Sprintf("idle CPU, %3d pods: staticlet %.0f ms/min, containerd %.0f ms/min, shims %.0f ms/min (%d); the three %.0f ms/min, %.1f ms/min per pod (over %s)",
				n, u.perMin(u.staticlet), u.perMin(u.containerd), u.perMin(u.shims), u.nShims,
				u.perMin(daemons), u.perMin(daemons)/float64(n), u.window.Round(time.Second)),
			fmt.Sprintf("          helpers:  pause %.0f ms/min (%d), log drivers %.0f ms/min (%d), other %.0f ms/min (%d)",
				u.perMin(u.pause), u.nPause, u.perMin(u.loggers), u.nLoggers, u.perMin(u.other), u.nOther))
		if i == 0 {
			first = u
			continue
		}
		growth := func(a, b time.Duration) string {
			if first.perMin(a) == 0 {
				return "-"
			}
			return fmt.Sprintf("×%.1f", u.perMin(b)/first.perMin(a))
		}
		lines = append(lines, fmt.Sprintf("idle CPU growth:    %d → %d pods (×%.1f): staticlet %s, containerd %s, shims %s, the three %s (linear: the pods' ratio)",
			idleCPUPods[0], n, float64(n)/float64(idleCPUPods[0]),
			growth(first.staticlet, u.staticlet), growth(first.containerd, u.containerd), growth(first.shims, u.shims),
			growth(first.staticlet+first.containerd+first.shims, daemons)))
	}
	for _, n := range names {
		be.remove(b, n+".yaml")
	}
	harness.WaitFor(b, 5*time.Minute, "every pod removed", func() (bool, string) {
		listed, _, err := be.countPods(ctx)
		if err != nil {
			return false, err.Error()
		}
		return listed == 0, fmt.Sprintf("%d pods listed", listed)
	})
	be.waitNoPods(b)
	be.report(b, lines...)
}

// measureIdleCPU reads the CPU time of staticlet, containerd and the
// processes staticlet adds (helperProcs), sleeps window and reads it
// again. A process that is not there at both readings is not counted: none
// comes or goes while pods idle.
func (be *benchEnv) measureIdleCPU(ctx context.Context, window time.Duration) (idleCPU, error) {
	h, err := be.helperProcs(ctx)
	if err != nil {
		return idleCPU{}, err
	}
	spid, cpid := be.cmd.Process.Pid, be.containerdPID()
	if cpid == 0 {
		return idleCPU{}, fmt.Errorf("containerd's process not found")
	}
	pids := append([]int{spid, cpid}, h.shims...)
	pids = append(append(append(pids, h.pause...), h.loggers...), h.other...)
	read := func() map[int]time.Duration {
		cpu := make(map[int]time.Duration, len(pids))
		for _, pid := range pids {
			if d, err := procCPU(pid); err == nil {
				cpu[pid] = d
			}
		}
		return cpu
	}
	t0 := time.Now()
	cpu0 := read()
	time.Sleep(window)
	cpu1 := read()
	u := idleCPU{window: time.Since(t0)}
	used := func(pids ...int) (sum time.Duration, n int) {
		for _, pid := range pids {
			a, ok0 := cpu0[pid]
			b, ok1 := cpu1[pid]
			if ok0 && ok1 {
				sum += b - a
				n++
			}
		}
		return sum, n
	}
	var n int
	if u.staticlet, n = used(spid); n == 0 {
		return idleCPU{}, fmt.Errorf("staticlet (pid %d) did not last the window", spid)
	}
	if u.containerd, n = used(cpid); n == 0 {
		return idleCPU{}, fmt.Errorf("containerd (pid %d) did not last the window", cpid)
	}
	u.shims, u.nShims = used(h.shims...)
	u.pause, u.nPause = used(h.pause...)
	u.loggers, u.nLoggers = used(h.loggers...)
	u.other, u.nOther = used(h.other...)
	return u, nil
}
