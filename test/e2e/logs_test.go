package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logd"
	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const talker = `apiVersion: v1
kind: Pod
metadata:
  name: talker
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  volumes:
  - name: ctl
    hostPath: {path: CTL, type: DirectoryOrCreate}
  containers:
  - name: main
    image: localhost/busybox:test
    volumeMounts: [{name: ctl, mountPath: /ctl}]
    command:
    - sh
    - -c
    - |
      c=$(cat /ctl/count 2>/dev/null || echo 0); c=$((c+1)); echo $c > /ctl/count
      echo instance-$c; echo err-1 >&2; echo out-2; echo err-2 >&2; echo out-3
      i=0
      while :; do
        if [ -e /ctl/more ]; then rm /ctl/more; i=$((i+1)); echo more-$i; fi
        if [ -e /ctl/exit ]; then rm /ctl/exit; exit 1; fi
        sleep 0.05
      done
`

// criLine is one record of a CRI log file.
var criLine = regexp.MustCompile(`^(\S+) (stdout|stderr) (F|P) (.*)$`)

// TestContainerLogs checks the CRI file a container's output goes to and
// `staticlet logs` with its options, across a restart of the container.
func TestContainerLogs(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	ctl := filepath.Join(e.Dir, "ctl")
	e.Write("talker.yaml", strings.ReplaceAll(talker, "CTL", ctl))
	name := "talker-" + harness.TestNode
	d.WaitPod(name, 30*time.Second, "pod running", harness.Running)

	// The file: five records in the CRI format, each stream in order.
	live := containerLog(e, t, name, "main", 0)
	var recs []string
	harness.WaitFor(t, 10*time.Second, "five records in "+live, func() (bool, string) {
		b, _ := os.ReadFile(live)
		recs = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		return len(recs) >= 5, string(b)
	})
	perStream := map[string][]string{}
	for _, r := range recs {
		m := criLine.FindStringSubmatch(r)
		if m == nil || m[3] != "F" {
			t.Fatalf("record %q is not a full CRI record", r)
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
			t.Errorf("record %q: time: %v", r, err)
		}
		perStream[m[2]] = append(perStream[m[2]], m[4])
	}
	if want := []string{"instance-1", "out-2", "out-3"}; !slices.Equal(perStream["stdout"], want) {
		t.Errorf("stdout records %q, want %q", perStream["stdout"], want)
	}
	if want := []string{"err-1", "err-2"}; !slices.Equal(perStream["stderr"], want) {
		t.Errorf("stderr records %q, want %q", perStream["stderr"], want)
	}
	contents := func(recs []string) string {
		var b strings.Builder
		for _, r := range recs {
			b.WriteString(criLine.FindStringSubmatch(r)[4] + "\n")
		}
		return b.String()
	}

	out, err := d.CLI("logs", name)
	if err != nil || out != contents(recs) {
		t.Errorf("staticlet logs = %q, %v; want %q", out, err, contents(recs))
	}
	out, err = d.CLI("logs", name, "--tail", "2")
	if err != nil || out != contents(recs[3:]) {
		t.Errorf("staticlet logs --tail 2 = %q, %v; want %q", out, err, contents(recs[3:]))
	}
	out, err = d.CLI("logs", name, "-c", "main", "--timestamps")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if err != nil || len(lines) != 5 {
		t.Errorf("staticlet logs --timestamps = %q, %v; want 5 lines", out, err)
	}
	for _, l := range lines {
		ts, _, _ := strings.Cut(l, " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("staticlet logs --timestamps line %q: %v", l, err)
		}
	}
	if out, err := d.CLI("logs", name, "--previous"); err == nil {
		t.Errorf("staticlet logs --previous before any restart = %q, want an error", out)
	}

	// -f prints what is there, then new lines as they come, and ends when
	// the container is replaced.
	f := exec.Command(harness.Binary(t), "logs", "-f", name, "--status-socket", d.Socket)
	stdout, err := f.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	followed := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			followed <- sc.Text()
		}
		close(followed)
		exited <- f.Wait()
	}()
	t.Cleanup(func() { _ = f.Process.Kill() })
	next := func(want string) {
		t.Helper()
		select {
		case got := <-followed:
			if got != want {
				t.Fatalf("staticlet logs -f printed %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("staticlet logs -f printed nothing in 10s, want %q", want)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(contents(recs), "\n"), "\n") {
		next(l)
	}
	for _, more := range []string{"more-1", "more-2"} {
		touch(t, filepath.Join(ctl, "more"))
		next(more)
	}

	touch(t, filepath.Join(ctl, "exit"))
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("staticlet logs -f ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("staticlet logs -f still runs 15s after the container exited")
	}
	d.WaitPod(name, 30*time.Second, "restarted and running", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	out, err = d.CLI("logs", name, "--previous")
	// The order of stdout and stderr lines written back to back is not
	// kept (two pipes), that of each stream's lines is.
	if err != nil || !strings.Contains(out, "instance-1\n") || !strings.HasSuffix(out, "more-1\nmore-2\n") {
		t.Errorf("staticlet logs --previous = %q, %v; want instance-1's output", out, err)
	}
	harness.WaitFor(t, 10*time.Second, "the new instance's log", func() (bool, string) {
		out, err = d.CLI("logs", name)
		return err == nil && strings.Count(out, "\n") == 5, out
	})
	if !strings.Contains(out, "instance-2\n") || strings.Contains(out, "more-") {
		t.Errorf("staticlet logs after the restart = %q, want instance-2's output", out)
	}
	if _, err := os.Stat(containerLog(e, t, name, "main", 1)); err != nil {
		t.Error(err)
	}
}

// containerLog is the live log file of an instance of a container of a
// pod in the default namespace: <logs>/default_<pod>_<uid>/<c>/<n>.log.
func containerLog(e *harness.Env, t *testing.T, podName, container string, instance int) string {
	t.Helper()
	var path string
	harness.WaitFor(t, 10*time.Second, "log file of "+podName, func() (bool, string) {
		dirs, _ := filepath.Glob(filepath.Join(e.Logs, "default_"+podName+"_*"))
		if len(dirs) != 1 {
			return false, fmt.Sprintf("pod log directories %q", dirs)
		}
		path = filepath.Join(dirs[0], container, strconv.Itoa(instance)+".log")
		_, err := os.Stat(path)
		return err == nil, fmt.Sprint(err)
	})
	return path
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

const flood = `apiVersion: v1
kind: Pod
metadata:
  name: flood
spec:
  hostNetwork: true
  restartPolicy: Never
  volumes:
  - name: ctl
    hostPath: {path: CTL, type: DirectoryOrCreate}
  containers:
  - name: main
    image: localhost/busybox:test
    volumeMounts: [{name: ctl, mountPath: /ctl}]
    command:
    - awk
    - |
      BEGIN {
        pad = sprintf("%080d", 0)
        for (i = 1; i <= LINES; i++) {
          printf "%08d %s\n", i, pad
          if (i % EVERY == 0) {
            getline up < "/proc/uptime"; close("/proc/uptime")
            split(up, a, " ")
            print i, a[1] > "/ctl/progress"
            fflush("/ctl/progress")
            system("sleep 0.05")
          }
        }
      }
`

const (
	floodLines = 600000 // 90 bytes each: 54 MB, 51.5 MiB
	floodEvery = 5000   // lines between progress marks
)

// TestLogsSurviveStaticletKill has a container print 51 MiB of numbered
// lines while staticlet is killed and restarted: every line reaches the
// log files (live and rotated), in order, once; and the container kept
// writing while staticlet was away.
//
// The container records its progress (line number and the host's uptime,
// /proc/uptime, which containers share) every 5000 lines in a hostPath
// file, pausing 50 ms each time. The test kills staticlet, waits for at
// least 20 more marks while it is dead, then starts a new one: a container
// whose output waited on staticlet could not make those marks. No gap
// between marks may exceed 2 s (they come every ~60 ms), so the container
// did not stall across the restart and adoption either.
func TestLogsSurviveStaticletKill(t *testing.T) {
	e := harness.NewEnv(t)
	opts := []string{"--container-log-max-size", "5Mi", "--container-log-max-files", "30"}
	d := e.Start(opts...)
	ctl := filepath.Join(e.Dir, "ctl")
	progress := filepath.Join(ctl, "progress")
	e.Write("flood.yaml", strings.NewReplacer("CTL", ctl, "LINES", strconv.Itoa(floodLines), "EVERY", strconv.Itoa(floodEvery)).Replace(flood))
	name := "flood-" + harness.TestNode

	marks := func() []mark { return readMarks(t, progress) }
	harness.WaitFor(t, 30*time.Second, "10 progress marks", func() (bool, string) {
		return len(marks()) >= 10, fmt.Sprint(len(marks()))
	})
	d.Kill()
	killed := len(marks())
	if killed > floodLines/floodEvery-30 {
		t.Fatalf("the container was done with %d of %d marks before staticlet was killed: too fast to test", killed, floodLines/floodEvery)
	}
	harness.WaitFor(t, 20*time.Second, "20 progress marks while staticlet is dead", func() (bool, string) {
		n := len(marks())
		return n >= killed+20, fmt.Sprintf("%d marks at the kill, %d now", killed, n)
	})
	down := len(marks()) - killed
	d = e.Start(opts...)
	d.WaitPod(name, 60*time.Second, "flood pod Succeeded", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded
	})

	ms := marks()
	if len(ms) != floodLines/floodEvery {
		t.Errorf("%d progress marks, want %d", len(ms), floodLines/floodEvery)
	}
	maxGap := 0.0
	for i := 1; i < len(ms); i++ {
		gap := ms[i].uptime - ms[i-1].uptime
		if gap > 2 {
			t.Errorf("the container stalled: %.2fs between line %d and line %d", gap, ms[i-1].line, ms[i].line)
		}
		maxGap = max(maxGap, gap)
	}

	// Every line, in order, once, across the rotated files and the live one.
	live := containerLog(e, t, name, "main", 0)
	var files []string
	var last int
	harness.WaitFor(t, 10*time.Second, "the last line in the log", func() (bool, string) {
		rotated, err := logs.RotatedFiles(live)
		if err != nil {
			return false, err.Error()
		}
		files = append(rotated, live)
		last = lastLine(t, live)
		return last == floodLines, fmt.Sprintf("last line %d", last)
	})
	if len(files) < 5 {
		t.Errorf("%d log files (%q), want rotation at 5 MiB to have made 10 or more", len(files), files)
	}
	want := 1
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 5<<20 {
			t.Errorf("%s has %d bytes, more than --container-log-max-size 5Mi", f, fi.Size())
		}
		want = checkFlood(t, f, want)
	}
	if want != floodLines+1 {
		t.Errorf("the log files hold lines 1 to %d, want 1 to %d", want-1, floodLines)
	}
	t.Logf("staticlet killed at mark %d of %d; %d marks while it was dead; longest gap between marks %.2fs; %d log files",
		killed, len(ms), down, maxGap, len(files))
}

type mark struct {
	line   int
	uptime float64
}

// readMarks reads the flood container's progress file.
func readMarks(t *testing.T, path string) []mark {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var ms []mark
	for _, l := range strings.Split(string(b), "\n") {
		var m mark
		if _, err := fmt.Sscanf(l, "%d %f", &m.line, &m.uptime); err == nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// checkFlood checks that file holds the flood's lines from want on, each
// in one full stdout record, and returns the number of the next line.
func checkFlood(t *testing.T, file string, want int) int {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pad := strings.Repeat("0", 80)
	br := bufio.NewReaderSize(f, 64*1024)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				t.Fatalf("%s ends with an incomplete record %q", file, line)
			}
			return want
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := logs.ParseRecord(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil || r.Partial || r.Stream != logs.Stdout {
			t.Fatalf("%s: record %q: %v; want a full stdout record", file, line, err)
		}
		num, rest, _ := strings.Cut(string(r.Content), " ")
		if got, err := strconv.Atoi(num); err != nil || got != want || rest != pad {
			t.Fatalf("%s: line %q, want number %d (lines missing, repeated or out of order)", file, r.Content, want)
		}
		want++
	}
}

// lastLine returns the number of the last flood line in file, or 0.
func lastLine(t *testing.T, file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	r, err := logs.ParseRecord(b[bytes.LastIndexByte(b, '\n')+1:])
	if err != nil {
		return 0
	}
	num, _, _ := strings.Cut(string(r.Content), " ")
	n, _ := strconv.Atoi(num)
	return n
}

// TestLogDaemonGoesWithLastPod: the log daemon does not outlive the last
// container it serves, although staticlet runs on (its idle period cut to
// 1 s here, 30 s by default), and a pod that comes after starts it again
// and gets its output logged.
func TestLogDaemonGoesWithLastPod(t *testing.T) {
	if _, ok, _ := logd.Forwarder(runtime.GOARCH, "/s"); !ok {
		t.Skipf("no log forwarder for %s: no log daemon", runtime.GOARCH)
	}
	e := harness.NewEnv(t)
	e.ExtraEnv = append(e.ExtraEnv, logd.IdleEnv+"=1s")
	d := e.Start()
	dir := logd.Dir(e.Root)
	said := func(pod, words string) {
		t.Helper()
		e.Write(pod+".yaml", terminationPod(pod, "Always", "trap 'exit 0' TERM; echo "+words+"; sleep 3600 & wait", ""))
		name := pod + "-" + harness.TestNode
		d.WaitPod(name, 30*time.Second, name+" running", harness.Running)
		harness.WaitFor(t, 10*time.Second, name+"'s output logged", func() (bool, string) {
			out, err := d.CLI("logs", name)
			return err == nil && out == words+"\n", fmt.Sprintf("%q, %v", out, err)
		})
	}
	said("first", "one")
	pid := logd.DaemonPID(dir)
	if pid == 0 {
		t.Fatal("no log daemon while a container logs")
	}
	e.Remove("first.yaml")
	harness.WaitFor(t, 30*time.Second, "the log daemon to exit after the last pod went", func() (bool, string) {
		return !harness.ProcessRunning(pid) && logd.DaemonPID(dir) == 0, fmt.Sprintf("daemon %d running", logd.DaemonPID(dir))
	})
	if !d.Running() {
		t.Fatal("staticlet exited")
	}
	said("second", "two")
	if logd.DaemonPID(dir) == 0 {
		t.Error("no log daemon while the second pod's container logs")
	}
}
