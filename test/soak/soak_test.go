package soak

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// DurationEnv is the environment variable that sets how long the soak
// runs once its pods run (a Go duration, at least soakMin); without it
// the test skips.
const DurationEnv = "SOAK_DURATION"

const (
	soakMin = 2 * time.Minute
	// sampleEvery is how often every series is sampled.
	sampleEvery = 10 * time.Second
	// editEvery is how often editsEach manifests are rewritten.
	editEvery = 30 * time.Second
	editsEach = 4
	// importEvery is how often the imported image is removed from
	// containerd and its archive dropped into the import directory again.
	importEvery = 2 * time.Minute
	// killEvery and restartEvery are how often, at most, staticlet is
	// killed with SIGKILL and started again, and containerd restarted;
	// shorter runs do each at least four and three times.
	killEvery    = 7 * time.Minute
	restartEvery = 11 * time.Minute
	// recoverWait is how long the steady pods have to run again after a
	// kill, a restart or an edit.
	recoverWait = 3 * time.Minute
)

// importRef is the image the churn imports through the import directory.
const importRef = "localhost/soak:import"

// The pods, 100 in all, by kind: idle hostNetwork pods and pod-network
// pods (the steady ones, edited in turn), pods that log a 4 kB line a
// second (rotated at 1 MiB), crash loops, pods whose liveness probe fails
// and pods that never become ready (an exec and an HTTP readiness probe).
var podKinds = []struct {
	prefix string
	n      int
	steady bool // runs, all its containers running, once started
}{
	{"idle", 80, true},
	{"net", 10, true},
	{"chatty", 2, true},
	{"crash", 3, false},
	{"liveness", 3, false},
	{"unready", 2, true},
}

// manifest is the manifest of pod name of kind prefix, the i-th
// version of it (an edit writes the next).
func manifest(prefix, name string, version int) string {
	marker := fmt.Sprintf("soak-%s-v%d", name, version)
	switch prefix {
	case "idle":
		return harness.BenchPod(name, marker)
	case "net":
		return harness.SleeperPod(name, marker, false)
	}
	script, probe := "trap 'exit 0' TERM; while true; do sleep 1; done", ""
	switch prefix {
	case "chatty":
		script = "trap 'exit 0' TERM; while true; do head -c 4000 /dev/zero | tr '\\0' x; echo; sleep 1; done"
	case "crash":
		script = "echo crashing; exit 1"
	case "liveness":
		probe = "    livenessProbe:\n      exec: {command: [\"false\"]}\n      initialDelaySeconds: 2\n      periodSeconds: 2\n      failureThreshold: 2\n"
	case "unready":
		probe = "    readinessProbe:\n      exec: {command: [\"false\"]}\n      periodSeconds: 3\n"
		if strings.HasSuffix(name, "1") {
			probe = "    readinessProbe:\n      httpGet: {host: 127.0.0.1, port: 1, path: /}\n      periodSeconds: 1\n"
		}
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q, %q]
%s`, name, testimage.DefaultRef, script, marker, probe)
}

// soak is one soak's world and its schedule.
type soak struct {
	t        *testing.T
	env      *harness.Env
	d        *harness.Daemon
	flags    []string
	s        *sampler
	steady   []string // the names of the steady pods, which edits rewrite
	versions map[string]int
	edits    int
	imports  int
	archives [2][]byte // the imported image as an OCI and a docker archive
	ts       []float64 // seconds since the soak began, per sample
	vs       [][]float64
	failed   int // samples that could not be read
	events   []string
}

func TestSoak(t *testing.T) {
	tier.Integration(t, "the built staticlet against a private containerd for a long time")
	raw := os.Getenv(DurationEnv)
	if raw == "" {
		t.Skipf("%s is not set: make soak runs this test", DurationEnv)
	}
	dur, err := time.ParseDuration(raw)
	if err != nil || dur < soakMin {
		t.Fatalf("%s=%q: want a duration of at least %s", DurationEnv, raw, soakMin)
	}
	if err := ctrdtest.Preflight(); err != nil {
		tier.Missing(t, err.Error())
	}
	k := newSoak(t)
	k.run(dur)
	k.report(dur)
}

// newSoak starts containerd and staticlet and writes the pods, and
// returns once the steady ones run.
func newSoak(t *testing.T) *soak {
	env := harness.NewEnv(t)
	// A namespace of the soak's own: its cgroups are under <ns> in each
	// cgroup hierarchy, which no other test's staticlet shares.
	ns := fmt.Sprintf("soak%d", os.Getpid())
	env.Ctrd.ImportImage(t, ns, testimage.DefaultRef)
	k := &soak{
		t: t, env: env, versions: map[string]int{},
		flags: []string{"--containerd-namespace", ns, "--file-check-frequency", "20s", "--log-level", "info",
			"--container-log-max-size", "1Mi", "--container-log-max-files", "2"},
		s: &sampler{
			ctrd: env.Client, address: env.Ctrd.Address, config: filepath.Join(env.Ctrd.Dir, "config.toml"), ns: ns, snapshotter: env.Ctrd.Snapshotter,
			mountDirs: []string{env.Dir, env.Ctrd.Dir}, cgroupDirs: cgroupDirs(ns),
			root: env.Root, logs: env.Logs,
		},
		archives: [2][]byte{harness.ImageArchive(t, importRef, false, "gzip"), harness.ImageArchive(t, importRef, true, "")},
	}
	k.d = env.Start(k.flags...)
	for _, kind := range podKinds {
		for i := range kind.n {
			name := fmt.Sprintf("%s%02d", kind.prefix, i)
			env.Write(name+".yaml", manifest(kind.prefix, name, 0))
			if kind.steady && kind.prefix != "chatty" && kind.prefix != "unready" {
				k.steady = append(k.steady, name)
			}
		}
	}
	if err := k.waitSteady(10 * time.Minute); err != nil {
		t.Fatal(err)
	}
	return k
}

// run churns and samples for dur.
func (k *soak) run(dur time.Duration) {
	ctx := k.t.Context()
	kill, restart := min(killEvery, dur/4), min(restartEvery, dur/3)
	start := time.Now()
	next := map[string]time.Duration{"sample": 0, "edit": editEvery, "import": importEvery / 2,
		"kill": kill, "restart": restart / 2}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		el := time.Since(start)
		if el >= dur {
			break
		}
		switch {
		case el >= next["sample"]:
			next["sample"] += sampleEvery
			k.sample(ctx, el)
		case el >= next["edit"]:
			next["edit"] += editEvery
			k.edit()
		case el >= next["import"]:
			next["import"] += importEvery
			k.churnImport(ctx)
		case el >= next["kill"]:
			next["kill"] += kill
			k.killStaticlet()
		case el >= next["restart"]:
			next["restart"] += restart
			k.restartContainerd(ctx)
		default:
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}
}

// note logs an event of the churn, with its time, and keeps it for the
// report.
func (k *soak) note(format string, args ...any) {
	line := fmt.Sprintf("%s %s", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	k.events = append(k.events, line)
	k.t.Log(line)
}

// sample reads every series once; a sample that cannot be read (during
// a restart of containerd, say) is counted and left out.
func (k *soak) sample(ctx context.Context, el time.Duration) {
	v, err := k.s.sample(ctx, k.d.Cmd.Process.Pid, k.d.Socket)
	if err != nil {
		k.failed++
		k.note("sample at %s left out: %v", el.Round(time.Second), err)
		return
	}
	k.ts = append(k.ts, el.Seconds())
	k.vs = append(k.vs, v)
}

// edit rewrites the next editsEach steady pods' manifests, as a new
// version, and every fifth time one crash loop's too, which starts its
// back-off again.
func (k *soak) edit() {
	var names []string
	for range editsEach {
		name := k.steady[k.edits%len(k.steady)]
		k.edits++
		k.versions[name]++
		k.env.Write(name+".yaml", manifest(strings.TrimRight(name, "0123456789"), name, k.versions[name]))
		names = append(names, name)
	}
	if k.edits%(5*editsEach) == 0 {
		name := fmt.Sprintf("crash%02d", (k.edits/(5*editsEach))%3)
		k.versions[name]++
		k.env.Write(name+".yaml", manifest("crash", name, k.versions[name]))
		names = append(names, name)
	}
	k.note("edited %s", strings.Join(names, " "))
}

// churnImport removes the imported image from containerd and drops its
// archive (an OCI and a docker one in turn) into the import directory
// under a new name, and waits until staticlet has imported it again.
func (k *soak) churnImport(ctx context.Context) {
	nsCtx := namespaces.WithNamespace(ctx, k.s.ns)
	dir := filepath.Join(k.env.Root, "images")
	if k.imports > 0 {
		if err := k.env.Client.ImageService().Delete(nsCtx, importRef, images.SynchronousDelete()); err != nil {
			k.t.Errorf("removing %s: %v", importRef, err)
		}
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("soak-%d.tar", k.imports-1)))
	}
	name := fmt.Sprintf("soak-%d.tar", k.imports)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, k.archives[k.imports%2], 0o644); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		k.t.Fatal(err)
	}
	k.imports++
	t0 := time.Now()
	err := poll(ctx, 2*time.Minute, func() bool {
		_, err := k.env.Client.ImageService().Get(nsCtx, importRef)
		return err == nil
	})
	if err != nil {
		k.t.Errorf("import %d of %s: not in containerd after 2 minutes", k.imports, importRef)
		return
	}
	k.note("imported %s from %s in %s", importRef, name, time.Since(t0).Round(time.Millisecond))
}

// killStaticlet kills staticlet with SIGKILL, starts it again and waits
// until the steady pods run.
func (k *soak) killStaticlet() {
	k.d.Kill()
	t0 := time.Now()
	k.d = k.env.Start(k.flags...)
	if err := k.waitSteady(recoverWait); err != nil {
		k.t.Errorf("after kill -9 of staticlet: %v", err)
	}
	k.note("killed staticlet (SIGKILL) and started it again: steady pods running after %s", time.Since(t0).Round(time.Millisecond))
}

// restartContainerd restarts containerd and waits until the steady pods
// run.
func (k *soak) restartContainerd(ctx context.Context) {
	t0 := time.Now()
	if err := k.env.Ctrd.Restart(ctx); err != nil {
		k.t.Fatal(err)
	}
	if err := k.waitSteady(recoverWait); err != nil {
		k.t.Errorf("after restarting containerd: %v", err)
	}
	k.note("restarted containerd: steady pods running after %s", time.Since(t0).Round(time.Millisecond))
}

// waitSteady waits until staticlet lists all 100 pods and every steady
// one runs.
func (k *soak) waitSteady(timeout time.Duration) error {
	var last string
	err := poll(k.t.Context(), timeout, func() bool {
		pods, err := k.d.Client().Pods(k.t.Context())
		if err != nil {
			last = err.Error()
			return false
		}
		ok, why := steady(pods.Items)
		last = why
		return ok
	})
	if err != nil {
		return fmt.Errorf("pods not steady after %s: %s", timeout, last)
	}
	return nil
}

// steady tells whether pods are all 100 pods of podKinds, every steady
// one running, and if not, why.
func steady(pods []v1.Pod) (bool, string) {
	byName := map[string]*v1.Pod{}
	for i := range pods {
		byName[strings.TrimSuffix(pods[i].Name, "-"+harness.TestNode)] = &pods[i]
	}
	var missing, notRunning []string
	for _, kind := range podKinds {
		for i := range kind.n {
			name := fmt.Sprintf("%s%02d", kind.prefix, i)
			p := byName[name]
			switch {
			case p == nil:
				missing = append(missing, name)
			case kind.steady && !harness.Running(p):
				notRunning = append(notRunning, harness.Describe(p))
			}
		}
	}
	if len(missing)+len(notRunning) == 0 {
		return true, ""
	}
	const most = 5
	return false, fmt.Sprintf("%d pods missing %v, %d not running %v", len(missing), missing[:min(most, len(missing))],
		len(notRunning), notRunning[:min(most, len(notRunning))])
}

// poll calls cond every half second until it holds, or fails when
// timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// report prints every series' fit over the second half of the run, and
// fails the test for each that grew beyond noise (fit.growth).
func (k *soak) report(dur time.Duration) {
	t := k.t
	span := dur.Seconds()
	var b strings.Builder
	fmt.Fprintf(&b, "soak of %s: %d samples (%d left out), %d edits, %d imports; fits over the second half:\n",
		dur, len(k.ts), k.failed, k.edits, k.imports)
	fmt.Fprintf(&b, "%-26s %12s %12s %12s %14s %14s %8s  %s\n", "series", "first half", "second half", "last", "slope per hour", "growth in run", "floor", "verdict")
	var grew []string
	for i, m := range metrics {
		y := make([]float64, len(k.vs))
		for j, v := range k.vs {
			y[j] = v[i]
		}
		f := secondHalf(k.ts, y, span)
		first := meanBefore(k.ts, y, span/2)
		g, bad := f.growth(span, m.floor)
		verdict := "flat"
		if bad {
			verdict = "GROWS"
			grew = append(grew, m.name)
		}
		name := m.name
		if m.unit != "" {
			name += " (" + m.unit + ")"
		}
		last := math.NaN()
		if len(y) > 0 {
			last = y[len(y)-1]
		}
		fmt.Fprintf(&b, "%-26s %12.1f %12.1f %12.1f %+8.2f ±%-5.2f %+14.2f %8g  %s\n",
			name, first, f.mean, last, f.slope*3600, f.stderr*3600, g, m.floor, verdict)
	}
	t.Log(b.String())
	k.writeCSV()
	if k.failed > len(k.ts)/10 {
		t.Errorf("%d of %d samples could not be read", k.failed, k.failed+len(k.ts))
	}
	if len(grew) > 0 {
		t.Errorf("grew beyond noise: %s", strings.Join(grew, ", "))
	}
}

// CSVEnv is the environment variable that names a file for the samples,
// as CSV: seconds since the soak began, then every series of metrics.
const CSVEnv = "SOAK_CSV"

// writeCSV writes the samples to the file CSVEnv names, if any.
func (k *soak) writeCSV() {
	path := os.Getenv(CSVEnv)
	if path == "" {
		return
	}
	var b strings.Builder
	b.WriteString("seconds")
	for _, m := range metrics {
		b.WriteString("," + m.name)
	}
	b.WriteString("\n")
	for i, v := range k.vs {
		fmt.Fprintf(&b, "%.0f", k.ts[i])
		for _, x := range v {
			fmt.Fprintf(&b, ",%g", x)
		}
		b.WriteString("\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		k.t.Errorf("writing the samples: %v", err)
	}
}

// meanBefore is the mean of the y whose t is before end.
func meanBefore(t, y []float64, end float64) float64 {
	var s float64
	var n int
	for i := range t {
		if t[i] < end {
			s += y[i]
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}
