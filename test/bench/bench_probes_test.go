package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// probeBenchPods is how many pods the probe CPU figure probes.
const probeBenchPods = 50

// probeBenchManifest is a hostNetwork pod serving WWW with busybox httpd
// on 127.0.0.1:PORT, probed by httpGet every PERIOD seconds once its
// startup probe found it serving (httpd binds its port a moment after the
// container starts, longer on a busy machine, and a liveness probe before
// that fails: with failureThreshold 1, a restart); it exits at once on
// SIGTERM.
const probeBenchManifest = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  containers:
  - name: web
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; httpd -f -p 127.0.0.1:PORT -h WWW & wait"]
    startupProbe:
      httpGet: {path: /healthz, port: PORT}
      periodSeconds: 1
      failureThreshold: 60
    livenessProbe:
      httpGet: {path: /healthz, port: PORT}
      initialDelaySeconds: 1
      periodSeconds: PERIOD
      failureThreshold: 1
      terminationGracePeriodSeconds: 1
    volumeMounts: [{name: www, mountPath: WWW}]
  volumes:
  - name: www
    hostPath: {path: WWW}
`

// probeBenchPod writes pod name, probed every period seconds, serving a
// new directory with a healthz file, and returns the directory and the
// port it serves on.
func (be *benchEnv) probeBenchPod(b *testing.B, name string, period int) (string, int) {
	www, err := os.MkdirTemp("", "slprobe")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(www) })
	if err := os.Chmod(www, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(www, "healthz"), []byte("ok\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	port := be.probePort(b)
	be.write(b, name+".yaml", strings.NewReplacer("PERIOD", strconv.Itoa(period), "NAME", name, "PORT", strconv.Itoa(port), "WWW", www).Replace(probeBenchManifest))
	return www, port
}

// Ports for the probed pods' servers: below the kernel's ephemeral range
// (32768 and up by default), so that neither another pod's port nor a
// probe connection's own end takes one between its choice and the
// server's bind. (Ports bound and let go to be chosen, 100 of them, came
// twice once in a while, and the second server crashed at every start.)
const (
	probePortFirst = 20000
	probePortLast  = 32000
)

// probePort returns a port on 127.0.0.1 no pod of the bench was given,
// free now.
func (be *benchEnv) probePort(b *testing.B) int {
	for range probePortLast - probePortFirst {
		be.lastPort++
		if be.lastPort < probePortFirst || be.lastPort > probePortLast {
			be.lastPort = probePortFirst
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(be.lastPort))
		if err != nil {
			continue
		}
		ln.Close()
		return be.lastPort
	}
	b.Fatalf("no free port in %d-%d", probePortFirst, probePortLast)
	return 0
}

// benchProbeCPU measures once, whatever b.N: staticlet's CPU per httpGet
// probe with probeBenchPods pods probed every second, over a window of
// STATICLET_BENCH_PROBE_WINDOW (default 30s). The total includes
// staticlet's idle work with those pods (resyncs, heartbeats); so that
// the probes' own share shows too, the same pods probed every hour (once
// as they start, before the window) are measured first, over a window as
// long: the marginal figure is the difference, per probe. While those
// pods run, the raw prober (rawProberCPU) probes them as staticlet would,
// over a window as long again: the floor staticlet's figure is compared
// with, as a probe's wake-ups cost more on some machines than others.
func (be *benchEnv) benchProbeCPU(b *testing.B) {
	window := 30 * time.Second
	if v := os.Getenv("STATICLET_BENCH_PROBE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("STATICLET_BENCH_PROBE_WINDOW: %v", err)
		}
		window = d
	}
	var floor, floorElapsed time.Duration
	idle, idleElapsed := be.probePodsCPU(b, 3600, window, func(ports []int) {
		floor, floorElapsed = rawProberCPU(b, ports, window)
	})
	total, elapsed := be.probePodsCPU(b, 1, window, nil)
	for b.Loop() {
	}
	probes := float64(probeBenchPods) * elapsed.Seconds()
	perProbe := time.Duration(float64(total) / probes)
	// The idle rate over the probed window's length, per probe.
	idleShare := time.Duration(float64(idle) / idleElapsed.Seconds() * elapsed.Seconds() / probes)
	marginal := perProbe - idleShare
	floorPerProbe := time.Duration(float64(floor) / (float64(probeBenchPods) * floorElapsed.Seconds()))
	ratio := float64(perProbe) / float64(floorPerProbe)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(perProbe)/float64(time.Microsecond), "cpu-µs/probe")
	b.ReportMetric(float64(marginal)/float64(time.Microsecond), "marginal-cpu-µs/probe")
	b.ReportMetric(float64(floorPerProbe)/float64(time.Microsecond), "floor-cpu-µs/probe")
	b.ReportMetric(ratio, "×floor")
	be.report(b,
		fmt.Sprintf("probe CPU:         staticlet %s of CPU per httpGet probe, total (idle work included), %d pods probed every second for %s (%.1f%% of one core) (target < 50µs)",
			perProbe.Round(100*time.Nanosecond), probeBenchPods, elapsed.Round(time.Second), 100*float64(total)/float64(elapsed)),
		fmt.Sprintf("probe CPU idle:    staticlet %s per probe of the above is idle work: the same %d pods probed every hour used %.1f%% of one core over %s",
			idleShare.Round(100*time.Nanosecond), probeBenchPods, 100*float64(idle)/float64(idleElapsed), idleElapsed.Round(time.Second)),
		fmt.Sprintf("probe CPU probes:  staticlet %s of CPU per httpGet probe, marginal (total less idle) (target < 50µs)",
			marginal.Round(100*time.Nanosecond)),
		fmt.Sprintf("probe CPU floor:   raw prober %s per probe (one thread, epoll, raw sockets, same pods and schedule, a process of its own, %s); staticlet is %.2f× the floor",
			floorPerProbe.Round(100*time.Nanosecond), floorElapsed.Round(time.Second), ratio))
}

// probePodsCPU runs probeBenchPods pods probed every period seconds and
// returns staticlet's CPU over a window once they all run, and the
// window's length; the pods are gone when it returns. It fails b if a
// pod was restarted: every probe must have succeeded. after, when not
// nil, runs after the window, the pods still running, with their ports.
func (be *benchEnv) probePodsCPU(b *testing.B, period int, window time.Duration, after func(ports []int)) (time.Duration, time.Duration) {
	be.waitNoPods(b)
	var ports []int
	for i := range probeBenchPods {
		_, port := be.probeBenchPod(b, fmt.Sprintf("probed%02d", i), period)
		ports = append(ports, port)
	}
	ctx := context.Background()
	harness.WaitFor(b, 5*time.Minute, fmt.Sprintf("%d pods running", probeBenchPods), func() (bool, string) {
		_, n, err := be.countPods(ctx)
		if err != nil {
			return false, err.Error()
		}
		return n == probeBenchPods, fmt.Sprintf("%d of %d running", n, probeBenchPods)
	})
	time.Sleep(3 * time.Second) // past the first probes and the start-up garbage
	cpu, elapsed, err := cpuOver(be.cmd.Process.Pid, window)
	if err != nil {
		b.Fatal(err)
	}
	if after != nil {
		after(ports)
	}
	list, err := be.status.Pods(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				b.Errorf("%s restarted during the probe window: %s; its warnings: %s", p.Name, harness.Describe(&p), be.warnings(ctx, p.Namespace+"/"+p.Name))
			}
		}
	}
	for i := range probeBenchPods {
		be.remove(b, fmt.Sprintf("probed%02d.yaml", i))
	}
	be.waitNoPods(b)
	return cpu, elapsed
}

// warnings returns the Warning events of pod podName (a failed probe's
// Unhealthy says why it failed), one a line.
func (be *benchEnv) warnings(ctx context.Context, podName string) string {
	events, err := be.status.Events(ctx, podName)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range events {
		if e.Type == pod.EventWarning {
			out = append(out, e.Time.Format(time.StampMilli)+" "+e.Reason+": "+e.Message)
		}
	}
	return strings.Join(out, "\n")
}

// cpuOver returns the CPU process pid used over the next window, and the
// window's actual length.
func cpuOver(pid int, window time.Duration) (cpu, elapsed time.Duration, err error) {
	cpu0, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	w0 := time.Now()
	time.Sleep(window)
	cpu1, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	return cpu1 - cpu0, time.Since(w0), nil
}

// benchLiveness measures the time from a liveness probe failing for good
// (failureThreshold 1: the failed run's Unhealthy event) to the new
// container started (its Started event), both as staticlet records them.
// The container exits at SIGTERM, so the probe's grace (1s) is not used.
func (be *benchEnv) benchLiveness(b *testing.B) {
	var ds []time.Duration
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n++
		name := fmt.Sprintf("liveness%d", n)
		full := name + "-" + harness.TestNode
		www, _ := be.probeBenchPod(b, name, 1)
		harness.WaitFor(b, benchWait, full+" running, its startup probe passed", func() (bool, string) {
			p, err := be.status.Pod(ctx, full)
			if err != nil {
				return false, err.Error()
			}
			cs := p.Status.ContainerStatuses
			return harness.Running(p) && len(cs) == 1 && cs[0].Started != nil && *cs[0].Started, harness.Describe(p)
		})
		if err := os.Remove(filepath.Join(www, "healthz")); err != nil {
			b.Fatal(err)
		}
		var p *v1.Pod
		harness.WaitFor(b, benchWait, full+" restarted", func() (bool, string) {
			var err error
			if p, err = be.status.Pod(ctx, full); err != nil {
				return false, err.Error()
			}
			// The served file stays gone, so the new container fails its
			// probe too and may already be down again: the restart count
			// says it came; the events give the times.
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount >= 1, harness.Describe(p)
		})
		events, err := be.status.Events(ctx, "default/"+full)
		if err != nil {
			b.Fatal(err)
		}
		var failed, started time.Time
		for _, e := range events {
			switch {
			case e.Reason == "Unhealthy" && failed.IsZero():
				failed = e.Time
			case e.Reason == "Started" && !failed.IsZero() && started.IsZero():
				started = e.Time
			}
		}
		if failed.IsZero() || started.IsZero() {
			b.Fatalf("events of %s: %+v; want Unhealthy, then Started", full, events)
		}
		ds = append(ds, started.Sub(failed))
		trace(b, b.Name(), failed, ds[len(ds)-1])
		be.remove(b, name+".yaml")
		be.waitNoPods(b)
	}
	m := median(ds)
	b.ReportMetric(float64(m), "ns/op")
	b.ReportMetric(ms(m), "staticlet-ms")
	be.report(b, fmt.Sprintf("liveness→restarted: staticlet median %s from the failed probe to the new container started (grace 1s unused: the process exits at SIGTERM) (target < 100ms + grace; n=%d)",
		fmtMS(m), len(ds)))
}

// countPods returns how many pods staticlet lists, and how many of them
// run.
func (be *benchEnv) countPods(ctx context.Context) (listed, up int, err error) {
	list, err := be.status.Pods(ctx)
	if err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		if harness.Running(&list.Items[i]) {
			up++
		}
	}
	return len(list.Items), up, nil
}
