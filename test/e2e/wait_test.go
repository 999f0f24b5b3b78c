package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// cliRun is a staticlet client command running as a process.
type cliRun struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
}

// startCLI starts the staticlet binary with args; it is killed when the
// test ends, if it still runs.
func startCLI(t *testing.T, args ...string) *cliRun {
	t.Helper()
	r := &cliRun{cmd: exec.Command(harness.Binary(t), args...), done: make(chan struct{})}
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// check waits for the command to end and fails the test unless it exits
// with code, printing stdout and stderr.
func (r *cliRun) check(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%q did not end within 90s", r.cmd.Args)
	}
	if got := r.cmd.ProcessState.ExitCode(); got != code || r.out.String() != stdout || r.err.String() != stderr {
		t.Errorf("%q exited %d, printed %q and %q; want %d, %q and %q",
			r.cmd.Args[1:], got, r.out.String(), r.err.String(), code, stdout, stderr)
	}
}

// TestWaitBinary runs `staticlet wait` as a bootstrap script would: started
// before staticlet, it waits for staticlet to come up and the pod to be
// Ready; then the timeout of a condition never met, and a wait for the
// pod to be gone after its manifest is removed.
func TestWaitBinary(t *testing.T) {
	e := harness.NewEnv(t)
	socket := filepath.Join(e.Dir, "status.sock") // where e.start puts it
	met := "pod/web-" + harness.TestNode + " condition met\n"
	ready := startCLI(t, "wait", "--for=condition=Ready", "pod/web", "--timeout", "60s", "--status-socket", socket)
	phase := startCLI(t, "wait", "--for=jsonpath={.status.phase}=Running", "pod/web-"+harness.TestNode, "--timeout=60s", "--status-socket", socket)

	e.Write("web.yaml", harness.SleeperPod("web", "first", true))
	d := e.Start()
	ready.check(t, 0, met, "")
	phase.check(t, 0, met, "")

	out, err := d.CLI("wait", "--for=condition=Ready=false", "pod/web", "--timeout", "1s")
	if code := harness.ExitCodeOf(err); code != 1 || out != "error: timed out waiting for the condition on pods/web\n" {
		t.Errorf("wait for Ready=false = %q, exit %d; want kubectl's timeout, exit 1", out, code)
	}

	gone := startCLI(t, "wait", "--for=delete", "pod/web", "--timeout=60s", "--status-socket", socket)
	d.WaitPod("web-"+harness.TestNode, 10*time.Second, "the pod still there", harness.Running)
	e.Remove("web.yaml")
	gone.check(t, 0, met, "")
	if _, err := d.Pod("web-" + harness.TestNode); !errors.Is(err, status.ErrNotFound) {
		t.Errorf("after wait --for=delete, getting the pod = %v, want not found", err)
	}
}
