package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// faultKills is how many times TestFaultInjection kills staticlet; every
// faultCrashEvery-th kill point kills containerd instead (with staticlet
// running), and the staticlet kill follows.
const (
	faultKills      = 32
	faultCrashEvery = 8
)

// faultSeedEnv, when set, is the seed TestFaultInjection draws its faults
// from: the one a failure printed replays the same sequence of edits and
// kill points (not the same timings of the processes between them).
const faultSeedEnv = "STATICLET_FAULT_SEED"

// TestFaultInjection kills staticlet with SIGKILL at random points while
// pods are created, edited (containers restarted, pods replaced) and
// removed, and kills containerd now and then under running pods. Then it
// checks that staticlet brings every pod to its manifest's state, that no
// container ever ran twice at once and no restartPolicy Never container
// ran twice, and, once every manifest is removed, that nothing of the pods
// is left: containerd's containers, tasks, leases and active snapshots,
// shims and pause processes, mounts, veths, addresses, cgroups, and the
// files under --root-dir and --pod-logs-dir.
func TestFaultInjection(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(faultSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", faultSeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("fault injection seed %d (%s=%d replays it)", seed, faultSeedEnv, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with fault injection seed %d: rerun with %s=%d", seed, faultSeedEnv, seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	e := harness.NewEnv(t)
	f := &faultWorld{e: e, rng: rng, gens: map[string]*faultGen{}, state: filepath.Join(e.Dir, "state")}
	if err := os.MkdirAll(f.state, 0o755); err != nil {
		t.Fatal(err)
	}
	watch := startDupWatch(t)

	kills, crashes := 0, 0
	for kills < faultKills {
		d := e.Start()
		for range 1 + rng.IntN(3) {
			f.edit()
		}
		// The kill point: anywhere from at once to well after the
		// edits have been acted on.
		wait := time.Duration(rng.IntN(1500)) * time.Millisecond
		crash := (kills+1)%faultCrashEvery == 0
		time.Sleep(wait) // the fault's moment, drawn from the seed; not a wait for a condition
		if crash {
			if err := e.Ctrd.Crash(t.Context()); err != nil {
				t.Fatalf("kill %d: %v", kills+1, err)
			}
			crashes++
		}
		d.Kill()
		kills++
	}
	t.Logf("%d kills of staticlet, %d of containerd, %d edits", kills, crashes, f.edits)

	// Recovery: each pod as its manifest says.
	d := e.Start()
	for name, g := range f.gens {
		if !g.present {
			continue
		}
		full := name + "-" + harness.TestNode
		d.WaitPod(full, 90*time.Second, full+" as its manifest says", func(p *v1.Pod) bool { return f.converged(p, g) })
	}
	f.checkRunOnce(t)
	if dups := watch.stop(); len(dups) > 0 {
		t.Errorf("containers that ran twice at once: %s", strings.Join(dups, "; "))
	}

	// Removal: nothing of the pods is left.
	for name, g := range f.gens {
		if g.present {
			e.Remove(name + ".yaml")
			g.present = false
		}
	}
	waitNothingLeft(e, t, d, f.podUIDs(t))
	d.Stop()
}

// waitNothingLeft waits, once every manifest is removed, until d reports
// no pod and containerd holds no container, and then until nothing is left
// of the pods (see leftovers), uids being all of theirs.
func waitNothingLeft(e *harness.Env, t *testing.T, d *harness.Daemon, uids []string) {
	t.Helper()
	harness.WaitFor(t, 90*time.Second, "every pod gone", func() (bool, string) {
		pods, err := d.Client().Pods(t.Context())
		if err != nil {
			return false, err.Error()
		}
		cs := e.Containers(t.Context())
		return len(pods.Items) == 0 && len(cs) == 0, fmt.Sprintf("%d pods, containers %v", len(pods.Items), harness.IDs(cs))
	})
	harness.WaitFor(t, 60*time.Second, "nothing of the pods left", func() (bool, string) {
		left := leftovers(e, t, uids)
		return len(left) == 0, strings.Join(left, "; ")
	})
}

// faultGen is where one manifest stands: whether it is in the directory,
// its pod-level generation (a label: the pod is replaced when it changes)
// and its container-level one (an env var: the app is restarted).
type faultGen struct {
	present  bool
	pod, ctr int
	hostNet  bool
	withInit bool
	runsOnce bool // a restartPolicy Never pod whose only container exits 0
	twoApps  bool
}

// faultWorld is the manifests TestFaultInjection edits.
type faultWorld struct {
	e     *harness.Env
	rng   *rand.Rand
	gens  map[string]*faultGen
	state string // a hostPath every container writes its marks into
	edits int
}

// faultPods are the manifests, each a shape a fault may catch half made:
// the pod network with a Memory emptyDir (a tmpfs mount), the host's
// network, an init container, a pod that runs once, two containers.
var faultPods = map[string]faultGen{
	"net":   {},
	"host":  {hostNet: true},
	"init":  {withInit: true},
	"once":  {runsOnce: true, hostNet: true},
	"multi": {twoApps: true},
}

// edit makes one random change to the manifest directory.
func (f *faultWorld) edit() {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range faultPods {
			if !yield(n) {
				return
			}
		}
	})
	name := names[f.rng.IntN(len(names))]
	g, ok := f.gens[name]
	if !ok {
		shape := faultPods[name]
		g = &shape
		f.gens[name] = g
	}
	f.edits++
	switch r := f.rng.IntN(10); {
	case !g.present:
		// A new generation: the same manifest again would be the same
		// pod, UID and all, and its run-once container would rightly
		// run again.
		g.present = true
		g.pod++
	case r < 4:
		g.ctr++
	case r < 7:
		g.pod++
	default:
		f.e.Remove(name + ".yaml")
		g.present = false
		return
	}
	f.e.Write(name+".yaml", f.manifest(name, g))
}

// manifest is the pod of manifest name at generation g. Each long-running
// container's shell is named dupcheck-<pod>-<container> ($0), for the
// duplicate watch; the run-once container appends a line per run to a
// file named after its pod's UID.
func (f *faultWorld) manifest(name string, g *faultGen) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    generation: "%d"
spec:
  hostNetwork: %v
  terminationGracePeriodSeconds: 5
`, name, g.pod, g.hostNet)
	if g.runsOnce {
		b.WriteString("  restartPolicy: Never\n")
	}
	if g.withInit {
		fmt.Fprintf(&b, `  initContainers:
  - name: setup
    image: %s
    command: ["sh", "-c", "echo ready > /scratch/ready"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
`, testimage.DefaultRef)
	}
	b.WriteString("  containers:\n")
	apps := []string{"app"}
	if g.twoApps {
		apps = append(apps, "side")
	}
	for _, c := range apps {
		script := `touch /state/uid-$POD_UID; trap "exit 0" TERM; sleep 3600 & wait`
		if g.runsOnce {
			script = `touch /state/uid-$POD_UID; echo ran $(tail -1 /proc/self/cgroup) >> /state/once-$POD_UID`
		}
		fmt.Fprintf(&b, `  - name: %s
    image: %s
    command: ["sh", "-c", %q, "dupcheck-%s-%s"]
    env:
    - {name: GENERATION, value: "%d"}
    - name: POD_UID
      valueFrom: {fieldRef: {fieldPath: metadata.uid}}
    volumeMounts:
    - {name: state, mountPath: /state}
    - {name: scratch, mountPath: /scratch}
`, c, testimage.DefaultRef, script, name, c, g.ctr)
	}
	fmt.Fprintf(&b, `  volumes:
  - name: state
    hostPath: {path: %s, type: Directory}
  - name: scratch
    emptyDir: {medium: Memory}
`, f.state)
	return b.String()
}

// converged tells whether p is as generation g of its manifest says.
func (f *faultWorld) converged(p *v1.Pod, g *faultGen) bool {
	if p.Labels["generation"] != strconv.Itoa(g.pod) {
		return false
	}
	if g.runsOnce {
		// Or failed, its container's task lost with containerd before
		// its exit was recorded: it ran, how it ended no one knows.
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Terminated != nil && p.Status.ContainerStatuses[0].State.Terminated.Reason == "ContainerStatusUnknown"
	}
	return harness.Running(p) && podReady(p)
}

// checkRunOnce checks that no restartPolicy Never container ran twice in
// one pod: each of its pods' files has one line.
func (f *faultWorld) checkRunOnce(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(f.state, "once-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n != 1 {
			t.Errorf("restartPolicy Never container of pod UID %s ran %d times:\n%s", strings.TrimPrefix(filepath.Base(file), "once-"), n, b)
		}
	}
}

// dupWatch samples the process table for two live processes with the same
// dupcheck-<pod>-<container> name, neither the other's child: two copies of
// one container running at once. A pair counts when two samples in a row
// see it, which leaves out a shell's child between its fork and its exec
// (it bears the shell's name for that moment). Sampling can miss an
// overlap shorter than its period; a container started twice, which is
// what it is for, outlives many periods.
type dupWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	dups map[string]bool
	last map[string]bool // the pairs the previous sample saw
}

func startDupWatch(t *testing.T) *dupWatch {
	w := &dupWatch{done: make(chan struct{}), dups: map[string]bool{}, last: map[string]bool{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample()
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *dupWatch) sample() {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	type proc struct{ pid, ppid int }
	seen := map[string][]proc{}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		args := harness.Cmdline(pid)
		// The shell runs its script as `sh -c SCRIPT NAME`; its children
		// (sleep) do not carry the name once they exec.
		if len(args) < 4 || args[1] != "-c" || !strings.HasPrefix(args[3], "dupcheck-") || !harness.ProcessRunning(pid) {
			continue
		}
		ppid := 0
		if p, err := procfs.Read(pid); err == nil {
			ppid = p.PPID
		}
		seen[args[3]] = append(seen[args[3]], proc{pid, ppid})
	}
	now := map[string]bool{}
	for name, ps := range seen {
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				a, b := ps[i], ps[j]
				if a.ppid == b.pid || b.ppid == a.pid {
					continue
				}
				now[fmt.Sprintf("%s (pids %d and %d, containers %s and %s)", strings.TrimPrefix(name, "dupcheck-"), a.pid, b.pid, cgroupLeaf(a.pid), cgroupLeaf(b.pid))] = true
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for pair := range now {
		if w.last[pair] {
			w.dups[pair] = true
		}
	}
	w.last = now
}

// cgroupLeaf names the container process pid runs in: the last element
// of its cgroup path, which is the container's ID under either driver.
func cgroupLeaf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "?"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return filepath.Base(lines[len(lines)-1])
}

// stop ends the watch and returns what it saw; it may be called again.
func (w *dupWatch) stop() []string {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for d := range w.dups {
			if !yield(d) {
				return
			}
		}
	})
}

// podUIDs lists the UIDs of every pod whose containers ran: each left a
// file named after its UID in the state directory.
func (f *faultWorld) podUIDs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(f.state, "uid-*"))
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, file := range files {
		uids = append(uids, strings.TrimPrefix(filepath.Base(file), "uid-"))
	}
	return uids
}

// leftovers lists what staticlet left of its pods once every manifest is
// removed and it reports no pod; uids are the pods whose cgroups it looks
// for. Container processes are found by the dupcheck-<pod>-<container>
// name their shells carry.
func leftovers(e *harness.Env, t *testing.T, uids []string) []string {
	t.Helper()
	ctx := namespaces.WithNamespace(t.Context(), harness.TestNS)
	var left []string
	addf := func(format string, args ...any) { left = append(left, fmt.Sprintf(format, args...)) }

	if cs, err := e.Client.Containers(ctx); err != nil {
		addf("listing containers: %v", err)
	} else if len(cs) > 0 {
		addf("containers %v", harness.IDs(cs))
	}
	if tasks, err := e.Client.TaskService().List(ctx, nil); err != nil {
		addf("listing tasks: %v", err)
	} else if len(tasks.Tasks) > 0 {
		addf("%d tasks", len(tasks.Tasks))
	}
	if ls, err := e.Client.LeasesService().List(ctx); err != nil {
		addf("listing leases: %v", err)
	} else {
		for _, l := range ls {
			addf("lease %s (labels %v)", l.ID, l.Labels)
		}
	}
	sn := e.Client.SnapshotService(e.Ctrd.Snapshotter)
	if err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			addf("active snapshot %s", info.Name)
		}
		return nil
	}); err != nil {
		addf("listing snapshots: %v", err)
	}
	// Shims serve their tasks' namespace; pause processes rename
	// themselves; container processes carry the dupcheck name.
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || !harness.ProcessRunning(pid) {
			continue
		}
		args := harness.Cmdline(pid)
		line := strings.Join(args, " ")
		switch {
		case len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && strings.Contains(line, e.Ctrd.Address):
			addf("shim %d: %s", pid, line)
		case strings.Contains(line, "dupcheck-"):
			addf("container process %d: %s", pid, line)
		case len(args) > 1 && args[1] == "log-daemon":
			// The node's, not a pod's: it stays 30 s after its last container.
		case strings.Contains(line, filepath.Join(e.Root, "bin")+"/") || strings.Contains(line, filepath.Join(e.Root, "pause")+"/"):
			addf("log driver %d: %s", pid, line)
		default:
			if root, _ := os.Readlink(fmt.Sprintf("/proc/%d/root", pid)); root == filepath.Join(e.Root, "pause", "rootfs") {
				addf("pause %d: %s", pid, line)
			}
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && (strings.HasPrefix(fields[4], e.Dir+"/") || strings.HasPrefix(fields[4], e.Ctrd.Dir+"/")) {
			addf("mount %s", fields[4])
		}
	}
	if v := e.Net.Veths(t); len(v) > 0 {
		addf("veths %v", v)
	}
	if files, _ := filepath.Glob(filepath.Join(e.Root, "network", "ipam", "*", "*")); len(files) > 0 {
		for _, file := range files {
			if filepath.Base(file) != "last" {
				addf("address %s", filepath.Base(file))
			}
		}
	}
	for _, sub := range []string{"pods", "sandboxes"} {
		ents, _ := os.ReadDir(filepath.Join(e.Root, sub))
		for _, ent := range ents {
			addf("%s/%s under --root-dir", sub, ent.Name())
		}
	}
	if ents, _ := os.ReadDir(e.Logs); len(ents) > 0 {
		for _, ent := range ents {
			addf("log directory %s", ent.Name())
		}
	}
	for _, uid := range uids {
		for _, pattern := range []string{"/sys/fs/cgroup/staticlet", "/sys/fs/cgroup/*/staticlet"} {
			dirs, _ := filepath.Glob(pattern + "/pod" + uid)
			more, _ := filepath.Glob(pattern + "/*/pod" + uid)
			for _, d := range append(dirs, more...) {
				addf("cgroup %s", d)
			}
		}
	}
	return left
}
