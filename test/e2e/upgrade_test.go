package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// previousBuild is the commit of the build before pauses became a
// built-in program, containers logged through the node's log daemon and
// ordinary pods shared a runc shim: every pod's pause and log drivers were
// copies of staticlet, and every pod had a shim of its own.
const previousBuild = "31f3b06"

// counterManifest is a pod whose container writes a numbered line every
// 0.2 s, so that its log keeps growing. Its shell is named
// dupcheck-<name>-main, the name leftovers looks for among processes.
func counterManifest(t *testing.T, name string, hostNetwork bool) string {
	t.Helper()
	sleeper := `["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done", "x"]`
	counter := fmt.Sprintf(`["sh", "-c", "trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo %s line $i; sleep 0.2; done", "dupcheck-%s-main"]`, name, name)
	m := harness.SleeperPod(name, "x", hostNetwork)
	if !strings.Contains(m, sleeper) {
		t.Fatalf("no command %s in the sleeper pod to replace:\n%s", sleeper, m)
	}
	return strings.Replace(m, sleeper, counter, 1)
}

// previousBinary returns staticlet as built at previousBuild, built once
// per test binary from this repository's history. Without the commit (a
// shallow clone, an export without .git) the test is skipped; without git
// itself too, except on CI, where that is a broken machine.
func previousBinary(t *testing.T) string {
	t.Helper()
	previousOnce.Do(func() { previousPath, previousErr = buildPrevious() })
	var missing *missingHistory
	switch {
	case previousErr == nil:
		return previousPath
	case errors.As(previousErr, &missing) && !(missing.noGit && os.Getenv("CI") == "true"):
		t.Skip(previousErr)
	}
	t.Fatal(previousErr)
	return ""
}

var (
	previousOnce sync.Once
	previousPath string
	previousErr  error
)

// missingHistory is why the previous build cannot be made here: no git,
// or no commit previousBuild in the repository.
type missingHistory struct {
	noGit bool
	err   error
}

func (m *missingHistory) Error() string {
	if m.noGit {
		return fmt.Sprintf("no git to extract the previous build (%s) with: %v", previousBuild, m.err)
	}
	return fmt.Sprintf("commit %s, the previous build, is not in this repository (a shallow clone?): %v", previousBuild, m.err)
}

// buildPrevious extracts previousBuild into a temporary directory and
// builds its staticlet there, statically as make does.
func buildPrevious() (string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", &missingHistory{noGit: true, err: err}
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", &missingHistory{err: fmt.Errorf("git rev-parse --show-toplevel: %w", err)}
	}
	repo := strings.TrimSpace(string(top))
	if out, err := exec.Command("git", "-C", repo, "cat-file", "-e", previousBuild+"^{commit}").CombinedOutput(); err != nil {
		return "", &missingHistory{err: fmt.Errorf("git cat-file: %w %s", err, out)}
	}
	dir, err := os.MkdirTemp("", "staticlet-previous")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	// The archive is a few MB: held in memory, either command's failure
	// is its own.
	tarball, err := exec.Command("git", "-C", repo, "archive", previousBuild).Output()
	if err != nil {
		return "", fmt.Errorf("git archive %s: %w", previousBuild, err)
	}
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin = bytes.NewReader(tarball)
	if out, err := untar.CombinedOutput(); err != nil {
		return "", fmt.Errorf("extracting %s into %s: %v\n%s", previousBuild, src, err, out)
	}
	bin := filepath.Join(dir, "staticlet-old")
	build := exec.Command("go", "build", "-o", bin, "./cmd/staticlet")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building staticlet at %s: %v\n%s", previousBuild, err, out)
	}
	return bin, nil
}

// upgradePod is what the test recorded of one pod.
type upgradePod struct {
	name, uid        string
	container        string // the app's container ID
	sandbox          string
	pause, shim, app int    // processes (pause 0: none)
	drivers          []int  // its log drivers' processes (its pause's and its container's)
	logFile          string // its container's log
}

// TestUpgradeFromPreviousBuild: pods started by the previous build (a copy
// of staticlet as pause and as each container's log driver, a shim per
// pod) keep running while no staticlet runs and after the current build
// takes over, which adopts them as they are: same containers and
// sandboxes, no restart, the old pause, log drivers and shims still
// serving them, their logs still growing. A new pod meanwhile gets the
// current helpers (no pause process, a log forwarder and the daemon).
// Removing the
// manifests then leaves nothing of any of them.
func TestUpgradeFromPreviousBuild(t *testing.T) {
	old := previousBinary(t)
	oldInfo, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}
	e := harness.NewEnv(t)
	e.Bin, e.Earlier = old, true
	d := e.Start()
	pods := []*upgradePod{{name: "host"}, {name: "net"}}
	for i, p := range pods {
		e.Write(p.name+".yaml", counterManifest(t, p.name, i == 0))
	}
	pauseCopy := filepath.Join(e.Root, "pause", "rootfs", "pause")
	for _, p := range pods {
		st := d.WaitPod(p.name+"-"+harness.TestNode, 60*time.Second, p.name+" running under the previous build", harness.Running)
		record(e, t, p, st)
		if p.shim == pods[0].shim && p != pods[0] {
			t.Errorf("pods %s and %s share shim %d under the previous build, want one each", pods[0].name, p.name, p.shim)
		}
	}
	// The previous build's helpers: the pause and every log driver are
	// the copy of the old staticlet in the pause root.
	copyInfo, err := os.Stat(pauseCopy)
	if err != nil {
		t.Fatal(err)
	}
	if copyInfo.Size() != oldInfo.Size() {
		t.Fatalf("%s is %d bytes, want a copy of the previous build (%d bytes)", pauseCopy, copyInfo.Size(), oldInfo.Size())
	}
	harness.WaitFor(t, 30*time.Second, "the previous build's log drivers of both pods' pause and container", func() (bool, string) {
		for _, p := range pods {
			p.drivers = driversOf(e.Dir, pauseCopy, p.logFile, pauseLog(e, p))
		}
		return len(pods[0].drivers) == 2 && len(pods[1].drivers) == 2, fmt.Sprintf("drivers %v", logDriverProcs(e.Dir))
	})
	for _, p := range pods {
		t.Logf("%s under the previous build: %+v", p.name, *p)
		if args := harness.Cmdline(p.pause); len(args) == 0 || args[len(args)-1] != "pause" {
			t.Errorf("pause process %d of %s runs %q, want the pause program", p.pause, p.name, args)
		}
		for _, pid := range append([]int{p.pause}, p.drivers...) {
			if !runsFile(pid, copyInfo) {
				t.Errorf("process %d of %s (%q) does not run %s, the previous build's copy", pid, p.name, harness.Cmdline(pid), pauseCopy)
			}
		}
	}

	// With no staticlet running, the pods run on and the old drivers keep
	// writing their logs.
	d.Stop()
	for _, p := range pods {
		logGrows(e, t, p, "with no staticlet running")
	}

	// The current build takes over.
	e.Bin, e.Earlier = "", false
	d = e.Start()
	for _, p := range pods {
		name := p.name + "-" + harness.TestNode
		st := d.WaitPod(name, 60*time.Second, p.name+" running under the current build", harness.Running)
		cs := st.Status.ContainerStatuses[0]
		if got := strings.TrimPrefix(cs.ContainerID, "containerd://"); got != p.container || cs.RestartCount != 0 {
			t.Errorf("%s adopted with container %s, %d restarts; want %s, 0 restarts", p.name, got, cs.RestartCount, p.container)
		}
		if sb := sandboxOf(e, t, p.uid); sb != p.sandbox {
			t.Errorf("%s adopted with sandbox %s, want %s", p.name, sb, p.sandbox)
		}
	}
	// The current build replaced the copy with its built-in pause, by a
	// rename: the old processes keep the file they run.
	if now, err := os.Stat(pauseCopy); err != nil || os.SameFile(now, copyInfo) {
		t.Errorf("%s after the upgrade: %v; want the current build's pause in place of the copy", pauseCopy, err)
	}
	// Two passes over each pod after adoption find nothing to change.
	for _, p := range pods {
		name := "default/" + p.name + "-" + harness.TestNode
		passes := syncs(d, name)
		harness.WaitFor(t, 30*time.Second, "two more passes over "+name, func() (bool, string) {
			n := syncs(d, name)
			return n >= passes+2, fmt.Sprintf("%d passes", n-passes)
		})
		evs := waitEvents(d, t, name, time.Second, "the events of "+name, func([]podEvent) bool { return true })
		for _, bad := range []string{"SandboxChanged", "SandboxExited", "Killing", "Started"} {
			if n := countReason(evs, bad); n > 0 {
				t.Errorf("%d %s events of %s after the upgrade, want none: %v", n, bad, p.name, evs)
			}
		}
	}
	for _, p := range pods {
		if sb := sandboxPid(e, t, p.sandbox); sb != p.pause {
			t.Errorf("%s's pause is process %d after the upgrade, want the previous build's %d", p.name, sb, p.pause)
		}
		for _, pid := range append([]int{p.pause, p.shim, p.app}, p.drivers...) {
			if !harness.ProcessRunning(pid) {
				t.Errorf("process %d of %s stopped after the upgrade, want it running", pid, p.name)
			}
		}
		for _, pid := range append([]int{p.pause}, p.drivers...) {
			if !runsFile(pid, copyInfo) {
				t.Errorf("process %d of %s (%q) no longer runs the previous build's copy", pid, p.name, harness.Cmdline(pid))
			}
		}
		logGrows(e, t, p, "under the current build, through the previous build's drivers")
		if got := driversOf(e.Dir, pauseCopy, p.logFile, pauseLog(e, p)); !slices.Equal(got, p.drivers) {
			t.Errorf("log drivers of %s = %v, want the previous build's %v", p.name, got, p.drivers)
		}
		if out, err := d.CLI("logs", p.name+"-"+harness.TestNode); err != nil || !strings.Contains(out, p.name+" line 1\n") {
			t.Errorf("staticlet logs %s = %q, %v; want its lines from line 1", p.name, out, err)
		}
	}

	// A new pod gets the current build's helpers.
	fresh := &upgradePod{name: "fresh"}
	e.Write("fresh.yaml", counterManifest(t, "fresh", false))
	st := d.WaitPod("fresh-"+harness.TestNode, 60*time.Second, "fresh running under the current build", harness.Running)
	record(e, t, fresh, st)
	forwarder := filepath.Join(e.Root, "bin", "log-forwarder")
	harness.WaitFor(t, 30*time.Second, "fresh's container logging through "+forwarder, func() (bool, string) {
		fresh.drivers = driversOf(e.Dir, forwarder, fresh.logFile)
		return len(fresh.drivers) == 1, fmt.Sprintf("drivers %v", logDriverProcs(e.Dir))
	})
	t.Logf("fresh under the current build: %+v", *fresh)
	if slices.Contains([]int{pods[0].shim, pods[1].shim}, fresh.shim) {
		t.Errorf("fresh joined shim %d of a pod of the previous build, want a shim of its QoS class", fresh.shim)
	}
	if fresh.pause != 0 {
		t.Errorf("fresh has pause process %d, want none: its containers share no PID namespace", fresh.pause)
	}
	if pid := logd.DaemonPID(logd.Dir(e.Root)); pid == 0 || !harness.ProcessRunning(pid) {
		t.Errorf("log daemon process %d of %s not running, want it serving fresh's forwarder", pid, logd.Dir(e.Root))
	}
	harness.WaitFor(t, 30*time.Second, "fresh's lines in staticlet logs", func() (bool, string) {
		out, err := d.CLI("logs", "fresh-"+harness.TestNode)
		return err == nil && strings.Contains(out, "fresh line 3\n"), fmt.Sprintf("%q, %v", out, err)
	})
	for _, p := range pods {
		if got := driversOf(e.Dir, pauseCopy, p.logFile, pauseLog(e, p)); !slices.Equal(got, p.drivers) {
			t.Errorf("log drivers of %s = %v after fresh started, want the previous build's %v", p.name, got, p.drivers)
		}
	}

	// Removal leaves nothing of any of them.
	all := append(pods, fresh)
	for _, p := range all {
		e.Remove(p.name + ".yaml")
	}
	waitNothingLeft(e, t, d, []string{pods[0].uid, pods[1].uid, fresh.uid})
	// Among them, every process the test saw serve a pod.
	for _, p := range all {
		for _, pid := range append([]int{p.pause, p.shim, p.app}, p.drivers...) {
			if harness.ProcessRunning(pid) {
				t.Errorf("process %d of %s (%q) runs on with the pod removed, want it gone", pid, p.name, harness.Cmdline(pid))
			}
		}
	}
	d.Stop()
}

// record fills in p from its running status st: its IDs, processes and
// log file.
func record(e *harness.Env, t *testing.T, p *upgradePod, st *v1.Pod) {
	t.Helper()
	cs := st.Status.ContainerStatuses[0]
	p.uid = string(st.UID)
	p.container = strings.TrimPrefix(cs.ContainerID, "containerd://")
	p.sandbox = sandboxOf(e, t, p.uid)
	p.pause = pauseOf(e, t, p.sandbox)
	app, err := e.PidOf(cs)
	if err != nil {
		t.Fatalf("the process of %s's container: %v", p.name, err)
	}
	p.app = app
	// The shim is the parent of the processes it started.
	first := p.pause
	if first == 0 {
		first = app
	}
	proc, err := procfs.Read(first)
	if err != nil {
		t.Fatalf("process %d of %s: %v", first, p.name, err)
	}
	p.shim = proc.PPID
	if args := harness.Cmdline(p.shim); len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		t.Fatalf("the parent %d of %s's process %d runs %q, want a containerd shim", p.shim, p.name, first, args)
	}
	if c, err := procfs.Read(app); err != nil || c.PPID != p.shim {
		t.Errorf("%s's container process %d: %+v, %v; want it a child of the pod's shim %d", p.name, app, c, err, p.shim)
	}
	files, _ := filepath.Glob(filepath.Join(e.Logs, "*_"+st.Name+"_"+p.uid, "main", "0.log"))
	if len(files) != 1 {
		t.Fatalf("log files of %s's container: %v, want one", p.name, files)
	}
	p.logFile = files[0]
}

// pauseOf returns the pause process of sandbox id, 0 when it has none.
func pauseOf(e *harness.Env, t *testing.T, id string) int {
	t.Helper()
	ctx := harness.NSCtx(t.Context())
	c, err := e.Client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("the task of sandbox %s: %v", id, err)
	}
	return int(task.Pid())
}

// sandboxOf returns the ID of the sandbox of pod uid.
func sandboxOf(e *harness.Env, t *testing.T, uid string) string {
	t.Helper()
	cs, err := e.Client.Containers(harness.NSCtx(t.Context()), `labels."io.staticlet.kind"==sandbox,labels."io.staticlet.pod.uid"==`+uid)
	if err != nil || len(cs) != 1 {
		t.Fatalf("sandboxes of pod %s: %v, %v; want 1", uid, harness.IDs(cs), err)
	}
	return cs[0].ID()
}

// pauseLog is where the previous build's log driver wrote the output of
// p's pause.
func pauseLog(e *harness.Env, p *upgradePod) string {
	return filepath.Join(e.Root, "sandboxes", p.sandbox, "pause.log")
}

// logGrows waits until p's log has grown by a few lines.
func logGrows(e *harness.Env, t *testing.T, p *upgradePod, when string) {
	t.Helper()
	size := func() int64 {
		st, err := os.Stat(p.logFile)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	start := size()
	harness.WaitFor(t, 10*time.Second, fmt.Sprintf("%s's log growing %s", p.name, when), func() (bool, string) {
		now := size()
		// Each line is a record of about 60 bytes: three of them.
		return start >= 0 && now > start+150, fmt.Sprintf("%s: %d bytes, from %d", p.logFile, now, start)
	})
}

// driversOf lists, in order, the log driver processes writing any of
// files under dir that run program.
func driversOf(dir, program string, files ...string) []int {
	var out []int
	for pid, args := range logDriverProcs(dir) {
		if args[0] == program && slices.ContainsFunc(args, func(a string) bool { return slices.Contains(files, a) }) {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// runsFile tells whether process pid runs the file st describes, replaced
// since or not.
func runsFile(pid int, st os.FileInfo) bool {
	exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && os.SameFile(exe, st)
}
