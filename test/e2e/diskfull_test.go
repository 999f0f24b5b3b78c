package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/metricstest"
)

// mountTmpfs mounts a tmpfs of size (a mount option: 4m) on dir, made if
// missing, and unmounts it when the test ends.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mounting a %s tmpfs on %s: %v", size, dir, err)
	}
	// Detached: a log daemon or a pinned namespace may hold it still.
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fill writes a file at path until the filesystem refuses more.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64*1024)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			return
		}
	}
}

// waitNode waits until `staticlet get node` shows a STATUS that does (or
// does not) name DiskPressure.
func waitNode(t *testing.T, d *harness.Daemon, pressure bool) {
	t.Helper()
	harness.WaitFor(t, 60*time.Second, fmt.Sprintf("get node with DiskPressure %v", pressure), func() (bool, string) {
		out, err := d.CLI("get", "node")
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		return strings.Contains(out, "DiskPressure") == pressure && strings.Contains(out, harness.TestNode), out
	})
}

// chattyPod writes output as fast as it can, for ever, and every 1000
// lines records in /tmp/count how many it wrote: a container whose writes
// blocked on its log would stop counting.
const chattyPod = `apiVersion: v1
kind: Pod
metadata:
  name: chatty
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo \"chatty $i ....................................................................................................\"; [ $((i % 1000)) = 0 ] && echo $i > /tmp/count; done"]
`

// tickerPod writes a numbered line five times a second.
const tickerPod = `apiVersion: v1
kind: Pod
metadata:
  name: ticker
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"]
`

// TestLogDirFull puts the pod logs directory on a 2 MiB filesystem that
// a chatty pod fills: the chatty pod is not blocked, another pod keeps
// running, DiskPressure shows, and once space returns the other pod's
// logging resumes, whole lines only, the daemon telling of the gap.
func TestLogDirFull(t *testing.T) {
	e := harness.NewEnv(t)
	mountTmpfs(t, e.Logs, "2m")
	d := e.Start()
	e.Write("ticker.yaml", tickerPod)
	ticker := "ticker-" + harness.TestNode
	p := d.WaitPod(ticker, 30*time.Second, "ticker running", harness.Running)
	tickerLog := waitLogLine(t, e.Logs, "ticker", "tick 3")

	e.Write("chatty.yaml", chattyPod)
	chatty := "chatty-" + harness.TestNode
	d.WaitPod(chatty, 30*time.Second, "chatty running", harness.Running)
	waitNode(t, d, true)
	// The log directory is full, and chatty goes on writing.
	count := func() int {
		out, _ := execCommand(d, chatty, "--", "cat", "/tmp/count").CombinedOutput()
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n
	}
	full := count()
	harness.WaitFor(t, 30*time.Second, "chatty to go on writing on a full disk", func() (bool, string) {
		n := count()
		return n > full+10000, fmt.Sprintf("%d lines, %d when the disk was full", n, full)
	})

	for _, name := range []string{ticker, chatty} {
		q, err := d.Pod(name)
		if err != nil {
			t.Fatal(err)
		}
		if !harness.Running(q) || q.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("pod %s with the log directory full: %s, want running, never restarted", name, harness.Describe(q))
		}
	}
	if p2, _ := d.Pod(ticker); p2 != nil && p2.Status.ContainerStatuses[0].ContainerID != p.Status.ContainerStatuses[0].ContainerID {
		t.Errorf("ticker's container changed while the disk was full")
	}

	// The ticker's output is dropped too, once its file needs another
	// page (tmpfs fills its last one first).
	daemonLog := filepath.Join(e.Root, "logd", "daemon.log")
	harness.WaitFor(t, 60*time.Second, "the daemon to drop ticker's output", func() (bool, string) {
		b, _ := os.ReadFile(daemonLog)
		return bytes.Contains(b, []byte("dropping a container's output until its log can be written\" path="+tickerLog)), string(b)
	})

	// Whole records only, though the disk took part of some writes.
	chattyLogs, _ := filepath.Glob(filepath.Join(e.Logs, "default_chatty-*", "main", "0.log"))
	for _, f := range chattyLogs {
		wantRecords(t, f, " F chatty ")
	}

	// Space returns: chatty goes, and so do its logs.
	last := lastTick(t, tickerLog)
	e.Remove("chatty.yaml")
	harness.WaitFor(t, 30*time.Second, "chatty gone", func() (bool, string) {
		_, err := d.Pod(chatty)
		return errors.Is(err, status.ErrNotFound), fmt.Sprint(err)
	})
	chattyDirs, err := filepath.Glob(filepath.Join(e.Logs, "default_chatty-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range chattyDirs {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	harness.WaitFor(t, 30*time.Second, "ticker's log to resume", func() (bool, string) {
		n := lastTick(t, tickerLog)
		return n > last+5, fmt.Sprintf("last tick %d, %d before space returned", n, last)
	})
	gapEnd := []byte("writing a container's log again; output was dropped meanwhile\" path=" + tickerLog)
	harness.WaitFor(t, 30*time.Second, "the daemon to tell of the gap", func() (bool, string) {
		b, _ := os.ReadFile(daemonLog)
		return bytes.Contains(b, gapEnd), string(b)
	})
	b, _ := os.ReadFile(daemonLog)
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, gapEnd) {
			t.Logf("the log daemon: %s", line)
		}
	}
	wantRecords(t, tickerLog, " F tick ")
	waitNode(t, d, false)
}

// wantRecords checks that every line of the log at path is a whole
// record holding marker: no line was cut by the full disk.
func wantRecords(t *testing.T, path, marker string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s ends in the middle of a line: %q", path, b[max(0, len(b)-200):])
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if _, err := logs.ParseRecord(line); err != nil || !bytes.Contains(line, []byte(marker)) {
			t.Errorf("%s line %d = %q (%v), want a whole record", path, i+1, line, err)
			return
		}
	}
}

// waitLogLine waits until the log of pod name's container main under
// podLogs holds want, and returns the log's path.
func waitLogLine(t *testing.T, podLogs, name, want string) string {
	t.Helper()
	var path string
	harness.WaitFor(t, 30*time.Second, name+"'s log to hold "+want, func() (bool, string) {
		m, _ := filepath.Glob(filepath.Join(podLogs, "default_"+name+"-*", "main", "0.log"))
		if len(m) != 1 {
			return false, fmt.Sprintf("log files %q", m)
		}
		path = m[0]
		b, err := os.ReadFile(path)
		return err == nil && bytes.Contains(b, []byte(want+"\n")), fmt.Sprintf("%d bytes, %v", len(b), err)
	})
	return path
}

// lastTick is the number of the last "tick N" line in the log at path.
func lastTick(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if i := strings.LastIndex(sc.Text(), " tick "); i >= 0 {
			fmt.Sscanf(sc.Text()[i+len(" tick "):], "%d", &n)
		}
	}
	return n
}

// gatedPod is ready once /tmp/ready exists in its container.
const gatedPod = `apiVersion: v1
kind: Pod
metadata:
  name: gated
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/ready"]}
      periodSeconds: 1
`

// TestRootDirFull fills the filesystem of --root-dir: staticlet keeps
// serving get pods, keeps probing (a readiness probe sees its gate open)
// and shows DiskPressure in get node, sd_notify's STATUS and the metrics;
// killed with SIGKILL while the disk is full, it starts and adopts the
// pods as they are; once space returns, a staticlet killed with SIGKILL
// and started again adopts every pod without restarting any.
func TestRootDirFull(t *testing.T) {
	e := harness.NewEnv(t)
	mountTmpfs(t, e.Root, "64m")
	d := e.Start()
	names := []string{"one", "two", "three"}
	for i, n := range names {
		e.Write(n+".yaml", harness.SleeperPod(n, "x", i == 0))
	}
	before := podStates(t, e, d, names, "running")
	e.Write("gated.yaml", gatedPod)
	gated := "gated-" + harness.TestNode
	d.WaitPod(gated, 30*time.Second, "gated running, not ready", func(p *v1.Pod) bool {
		return harness.Running(p) && !p.Status.ContainerStatuses[0].Ready
	})

	filler := filepath.Join(e.Root, "filler")
	fill(t, filler)
	waitNode(t, d, true)
	// Probes go on: the gate opens, and the readiness probe sees it.
	if out, err := execCommand(d, gated, "--", "touch", "/tmp/ready").CombinedOutput(); err != nil {
		t.Fatalf("exec with --root-dir full: %v: %s", err, out)
	}
	d.WaitPod(gated, 30*time.Second, "gated ready with --root-dir full", func(p *v1.Pod) bool {
		return p.Status.ContainerStatuses[0].Ready
	})
	out, err := d.CLI("get", "pods")
	if err != nil {
		t.Fatalf("get pods with --root-dir full: %v: %s", err, out)
	}
	for _, n := range names {
		if !strings.Contains(out, n+"-"+harness.TestNode) || strings.Count(out, "Running") != len(names)+1 {
			t.Errorf("get pods with --root-dir full = %q, want %s and every pod running", out, n)
		}
	}
	harness.WaitFor(t, 10*time.Second, "STATUS= naming DiskPressure", func() (bool, string) {
		line, _ := d.Notify.Has("STATUS=")
		return strings.HasSuffix(line, "; DiskPressure"), line
	})
	if out, err := d.CLI("describe", "node"); err != nil || !strings.Contains(out, "KubeletHasDiskPressure") || !strings.Contains(out, e.Root) {
		t.Errorf("describe node = %q, %v; want the DiskPressure reason naming %s", out, err, e.Root)
	}
	socket := metricstest.SocketClient(d.Socket)
	samples, err := metricstest.Scrape(t.Context(), socket, "http://staticlet/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := metricstest.Find(samples, "staticlet_node_status_condition", "condition=DiskPressure", "status=true"); !ok || s.Value != 1 {
		t.Errorf("staticlet_node_status_condition{DiskPressure,true} = %v (found %v), want 1", s.Value, ok)
	}
	if !d.Running() {
		t.Fatal("staticlet exited with --root-dir full")
	}

	// Killed while the disk is full, staticlet starts again and adopts
	// the pods as they are.
	d.Kill()
	d = e.Start()
	if full := podStates(t, e, d, names, "adopted on a full disk"); fmt.Sprint(full) != fmt.Sprint(before) {
		t.Errorf("pods adopted on a full disk = %+v, want %+v (unchanged)", full, before)
	}
	waitNode(t, d, true)

	// Space returns; staticlet is killed and started again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.Kill()
	d2 := e.Start()
	after := podStates(t, e, d2, names, "adopted")
	for _, n := range names {
		if after[n] != before[n] {
			t.Errorf("pod %s after the full disk and a restart = %+v, want %+v (unchanged)", n, after[n], before[n])
		}
	}
	wantNoStarts(t, d2)
	waitNode(t, d2, false)
	harness.WaitFor(t, 10*time.Second, "STATUS= without DiskPressure", func() (bool, string) {
		line, ok := d2.Notify.Has("STATUS=")
		return ok && !strings.Contains(line, "DiskPressure"), line
	})
}

// burstPod writes about 3 MB of output, then sleeps.
const burstPod = `apiVersion: v1
kind: Pod
metadata:
  name: burst
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; i=0; while [ $i -lt 25000 ]; do i=$((i+1)); echo \"burst $i ....................................................................................................\"; done; echo burst done; while true; do sleep 1; done"]
`

// TestPodLogsMaxTotal: with --pod-logs-max-total, the rotated files of a
// pod that wrote more than the cap are removed, oldest first, until the
// logs fit it; the live file stays.
func TestPodLogsMaxTotal(t *testing.T) {
	e := harness.NewEnv(t)
	const maxTotal = 512 << 10
	d := e.Start("--container-log-max-size", "256Ki", "--container-log-max-files", "5", "--pod-logs-max-total", "512Ki")
	e.Write("burst.yaml", burstPod)
	d.WaitPod("burst-"+harness.TestNode, 30*time.Second, "burst running", harness.Running)
	live := waitLogLine(t, e.Logs, "burst", "burst done")
	harness.WaitFor(t, 30*time.Second, "the logs within --pod-logs-max-total", func() (bool, string) {
		files, err := logs.ScanLogFiles(e.Logs)
		if err != nil {
			return false, err.Error()
		}
		var total int64
		var rotated int
		for _, f := range files {
			total += f.Size
			if f.Kind == logs.Rotated {
				rotated++
			}
		}
		return total <= maxTotal && rotated > 0, fmt.Sprintf("%d bytes in %d files, %d rotated", total, len(files), rotated)
	})
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live log: %v", err)
	}
	if out := d.Out.String(); !strings.Contains(out, "removed the oldest container log files over --pod-logs-max-total") {
		t.Errorf("staticlet's log does not tell of the removal:\n%s", out)
	}
}

// TestEvictionHard: a threshold of --eviction-hard, or of the config
// file's evictionHard, above the size of --root-dir's small filesystem
// reports DiskPressure, the message naming the threshold as given and
// the space available in its units; the signals staticlet does not
// watch are named once in the log.
func TestEvictionHard(t *testing.T) {
	e := harness.NewEnv(t)
	mountTmpfs(t, e.Root, "16m")
	d := e.Start("--eviction-hard", "nodefs.available<1Gi")
	waitNode(t, d, true)
	wantPressure(t, d, e.Root+": nodefs.available ", "Mi < 1Gi")
	d.Stop()

	file := filepath.Join(e.Dir, "kubelet-config.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  nodefs.available: 2Gi
  memory.available: 100Mi
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Not e.Start, whose --eviction-hard would win over the file.
	d = startFlags(e, append([]string{"run", "--config", file,
		"--manifest-dir", e.Manifest, "--containerd-address", e.Ctrd.Address,
		"--root-dir", e.Root, "--pod-logs-dir", e.Logs, "--node-name", harness.TestNode,
	}, e.Net.Flags()...))
	waitNode(t, d, true)
	wantPressure(t, d, e.Root+": nodefs.available ", "Mi < 2Gi")
	harness.WaitFor(t, 10*time.Second, "the signals without effect logged", func() (bool, string) {
		out := d.Out.String()
		return strings.Count(out, "memory.available") == 1 && strings.Contains(out, "have no effect"), out
	})
}

// wantPressure checks describe node's DiskPressure message holds each of
// parts, in order.
func wantPressure(t *testing.T, d *harness.Daemon, parts ...string) {
	t.Helper()
	out, err := d.CLI("describe", "node")
	rest, ok := out, err == nil
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			ok = false
			break
		}
		rest = rest[i+len(p):]
	}
	if !ok || !strings.Contains(out, "KubeletHasDiskPressure") {
		t.Errorf("describe node = %q, %v; want the DiskPressure message with %q", out, err, parts)
	}
}
