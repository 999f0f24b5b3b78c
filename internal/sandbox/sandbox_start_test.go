package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pause"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// sleeperManifest is a pod name whose container "c" sleeps.
func sleeperManifest(name string) string { return sleeper(name, "") }

// sandboxRecord returns the record of p's only sandbox as PodContainers
// lists it.
func (h *harness) sandboxRecord(p *pod.Pod) pod.Record {
	h.t.Helper()
	recs, err := h.rt.PodContainers(h.ctx(), p.Key())
	if err != nil {
		h.t.Fatalf("PodContainers(%s): %v", p.Key(), err)
	}
	for _, r := range recs {
		if r.Kind == pod.KindSandbox {
			return r
		}
	}
	h.t.Fatalf("no sandbox of %s in %+v", p.Key(), recs)
	return pod.Record{}
}

// TestStartSandboxAgain: a pause process that died is started again in
// place: the same sandbox, a new process in the same pinned namespaces,
// while the pod's container runs on untouched. The old exit, recorded
// late, does not end the new process.
func TestStartSandboxAgain(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/again.yaml", sleeperManifest("again"))
	sb := h.pauseSandbox(p)
	if !sb.Pinned && !h.sandboxRecord(p).Pinned {
		t.Errorf("sandbox %s not marked pinned", sb.ID)
	}
	c := h.start(p, sb, "c", 0)
	exits := h.runExits()
	nsDir := h.rt.sandboxDir(sb.ID)

	if err := syscall.Kill(int(sb.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exit := nextExit(t, exits)
	if exit.ContainerID != sb.ID || exit.ExitCode != 137 {
		t.Fatalf("TaskExit = %+v, want sandbox %s with 137", exit, sb.ID)
	}
	waitFor(t, 10*time.Second, "the exit recorded", func() (bool, string) {
		r := h.sandboxRecord(p)
		return r.State == pod.TaskExited && r.ExitCode == 137, fmt.Sprintf("%+v", r)
	})

	rec, err := h.rt.StartSandbox(h.ctx(), h.sandboxRecord(p))
	if err != nil {
		t.Fatalf("StartSandbox(%s) again: %v", sb.ID, err)
	}
	if rec.ID != sb.ID || rec.State != pod.TaskRunning || rec.Pid == 0 || rec.Pid == sb.Pid {
		t.Fatalf("StartSandbox again = %+v, want %s running with a new pid", rec, sb.ID)
	}
	if net, pin := nsLink(t, rec.Pid, "net"), pinInode(t, nsDir, netns.Net); net != pin {
		t.Errorf("new pause process in %s, want the pinned %s", net, pin)
	}
	if gone(c.Pid) {
		t.Errorf("container process %d gone after its sandbox was started again", c.Pid)
	}
	listed := h.sandboxRecord(p)
	if listed.State != pod.TaskRunning || listed.Pid != rec.Pid || !listed.StartedAt.After(exit.ExitedAt) {
		t.Errorf("sandbox listed as %+v, want running as pid %d, started after %s", listed, rec.Pid, exit.ExitedAt)
	}
	// containerd's event handled late, after the new start: it is of
	// another process, and changes nothing.
	ctr, err := h.client.LoadContainer(h.nsCtx(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.rt.settleExit(h.ctx(), ctr, exit, sb.Pid); err != nil {
		t.Errorf("settleExit of the old exit: %v", err)
	}
	if r := h.sandboxRecord(p); r.State != pod.TaskRunning || r.Pid != rec.Pid {
		t.Errorf("after the old exit was settled late, sandbox = %+v, want running as pid %d", r, rec.Pid)
	}
	// Starting a running sandbox changes nothing.
	if again, err := h.rt.StartSandbox(h.ctx(), listed); err != nil || again.Pid != rec.Pid {
		t.Errorf("StartSandbox of a running sandbox = %+v, %v; want pid %d", again, err, rec.Pid)
	}
}

// TestStartSandboxPauseFails: a pause program that exits at once makes
// StartSandbox fail with its exit code and output, which the sandbox's
// record keeps; starting it again fails the same way, in place.
func TestStartSandboxPauseFails(t *testing.T) {
	boom := boomProgram(t)
	h := newHarnessWith(t, func(c *Config) {
		c.Pause = pause.Config{Binary: boom, Args: []string{"x"}}
		// The output goes through the log driver, staticlet, as in the
		// daemon.
		c.Logs.Driver = pauseBinary(t)
		c.Logs.DriverArgs = func(path string) map[string]string {
			return logs.DriverConfig{Path: path, MaxSize: 1 << 20, MaxFiles: 2}.Args()
		}
	})
	p := h.decode("/m/boom.yaml", sleeper("boom", sharedPID))
	sb := h.createSandbox(p)
	for i := 1; i <= 2; i++ {
		_, err := h.rt.StartSandbox(h.ctx(), h.sandboxRecord(p))
		if err == nil || !strings.Contains(err.Error(), "exited with code 3: boom: x") {
			t.Errorf("StartSandbox #%d = %v, want the pause's exit code 3 and its output", i, err)
		}
		r := h.sandboxRecord(p)
		if r.ID != sb.ID || r.State != pod.TaskExited || r.ExitCode != 3 || r.Message != "boom: x" {
			t.Errorf("after StartSandbox #%d, sandbox = %+v, want %s exited with 3 and message %q", i, r, sb.ID, "boom: x")
		}
	}
}

// boomProgram builds a static program that writes "boom: " and its first
// argument to stderr and exits 3.
func boomProgram(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"os\"\n\nfunc main() {\n\tos.Stderr.WriteString(\"boom: \" + os.Args[1] + \"\\n\")\n\tos.Exit(3)\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module boom\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", "boom", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the boom program: %v\n%s", err, out)
	}
	return filepath.Join(dir, "boom")
}

// sharedPID is the spec line of a pod whose containers share a PID
// namespace: its sandbox has a pause process.
const sharedPID = "  shareProcessNamespace: true\n"

// TestSandboxPinsGone: a sandbox with a pause process (an earlier
// build's) whose pause exited is pinned, to be started again in place,
// only while its namespaces are pinned; once one is not (a reboot took
// them), it reads as not pinned, to be re-created.
func TestSandboxPinsGone(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/pins.yaml", sleeperManifest("pins"))
	sb := h.pauseSandbox(p)
	if err := syscall.Kill(int(sb.Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// No exit handler runs: the stopped task tells the exit.
	waitFor(t, 10*time.Second, "the exit seen", func() (bool, string) {
		r := h.sandboxRecord(p)
		return r.State == pod.TaskExited, fmt.Sprintf("%+v", r)
	})
	if r := h.sandboxRecord(p); !r.Pinned {
		t.Errorf("exited sandbox with its pins = %+v, want pinned", r)
	}
	if err := syscall.Unmount(netns.Path(h.rt.sandboxDir(sb.ID), netns.Net), syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if r := h.sandboxRecord(p); r.Pinned || r.State != pod.TaskExited {
		t.Errorf("exited sandbox whose network pin is gone = %+v, want exited, not pinned", r)
	}
}
