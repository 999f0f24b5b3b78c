package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const crasher = `apiVersion: v1
kind: Pod
metadata:
  name: crasher
  labels: {app: crasher}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "sleep 1; exit 1"]
`

// watcher is a `staticlet get ... -w` child process whose stdout the test
// reads line by line.
type watcher struct {
	t     *testing.T
	what  string
	lines chan string
	seen  []string // every line read so far, for failure messages
}

// watch starts the client command args against d and reads its output
// until the test ends, when the process is killed.
func watch(d *harness.Daemon, t *testing.T, args ...string) *watcher {
	t.Helper()
	cmd := exec.Command(harness.Binary(t), append(args, "--status-socket", d.Socket)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr harness.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watcher{t: t, what: strings.Join(args, " "), lines: make(chan string, 1000)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.String() != "" {
			t.Logf("%s stderr:\n%s", w.what, stderr.String())
		}
	})
	return w
}

// waitLine reads lines until one matches the regular expression re, and
// returns it; it fails the test when none comes within timeout or the
// command ends.
func (w *watcher) waitLine(timeout time.Duration, re string) string {
	w.t.Helper()
	match := regexp.MustCompile(re)
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				w.t.Fatalf("%s ended before a line matching %q; lines:\n%s", w.what, re, strings.Join(w.seen, "\n"))
			}
			w.seen = append(w.seen, line)
			if match.MatchString(line) {
				return line
			}
		case <-deadline:
			w.t.Fatalf("timed out after %s waiting for a line of %s matching %q; lines:\n%s",
				timeout, w.what, re, strings.Join(w.seen, "\n"))
		}
	}
}

// TestWatch follows a pod that crash-loops and is then removed with
// `get pods -w` and `get events -w`: the rows show the pod appear, run,
// fail and restart, terminate and go; the events its starts, back-offs and the
// stopping.
func TestWatch(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	name := "crasher-" + harness.TestNode
	pods := watch(d, t, "get", "pods", "-w", "--output-watch-events", "-l", "app=crasher")
	pods.waitLine(10*time.Second, `^EVENT\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$`)
	events := watch(d, t, "get", "events", "-w", "--for", "pod/"+name)
	events.waitLine(10*time.Second, `^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$`)
	others := watch(d, t, "get", "pods", "--watch-only", "-l", "app=other")
	objects := watch(d, t, "get", "pods", "-w", "-o", "yaml")

	e.Write("crasher.yaml", crasher)
	row := func(event, rest string) string { return fmt.Sprintf(`^%s\s+%s\s+%s`, event, name, rest) }
	// The pod may run already when it is first reported.
	if added := pods.waitLine(30*time.Second, row("ADDED", "")); !strings.Contains(strings.Join(strings.Fields(added), " "), "1/1 Running") {
		pods.waitLine(30*time.Second, row("MODIFIED", `1/1\s+Running\s`))
	}
	pods.waitLine(30*time.Second, row("MODIFIED", `0/1\s+(Error|CrashLoopBackOff)\s`))
	pods.waitLine(60*time.Second, row("MODIFIED", `\S+\s+\S+\s+([2-9]|\d\d+) \(`)) // restarted twice

	started := `^\S+( \(x\d+ over \S+\))?\s+Normal\s+Started\s+pod/` + name + `\s+Started container main`
	events.waitLine(30*time.Second, started)
	events.waitLine(30*time.Second, started) // each start names its container's ID
	events.waitLine(60*time.Second, `Warning\s+BackOff\s+pod/`+name+`\s+Back-off restarting failed container main`)

	// Each pod's YAML at each change, documents separated by "---".
	objects.waitLine(30*time.Second, `^  name: `+name+`$`)
	objects.waitLine(30*time.Second, `^---$`)
	objects.waitLine(30*time.Second, `^\s+restartCount: [1-9]`)

	e.Remove("crasher.yaml")
	events.waitLine(30*time.Second, `Normal\s+Killing\s+pod/`+name)
	pods.waitLine(30*time.Second, row("MODIFIED", `\S+\s+Terminating\s`))
	pods.waitLine(60*time.Second, row("DELETED", ""))

	// A watch whose selector matches nothing printed nothing, not even the
	// header, all along.
	select {
	case line := <-others.lines:
		t.Errorf("get pods --watch-only -l app=other printed %q", line)
	default:
	}
	out, err := d.CLI("get", "events", "--for", "pod/"+name)
	if err != nil || !strings.Contains(out, "Killing") || strings.Index(out, "Started") > strings.Index(out, "Killing") {
		t.Errorf("get events = %v\n%s\nwant the pod's events oldest first, ending with Killing", err, out)
	}
}
