package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pause"
	"github.com/staticlet/staticlet/internal/pod"
)

// LabelStartedAt is on a container whose task staticlet started, and on a
// sandbox whose pause process was started again after one exited: when
// (asked for). An exit in its labels from before then is an earlier
// process's, and does not end the sandbox.
const LabelStartedAt = labelPrefix + "start.time"

// StartSandbox starts the pause process of sandbox sb: the first one, for a
// sandbox CreateSandbox made, or a new one in place of one that exited or
// failed to start. A new one joins the same pinned namespaces, so the
// pod's containers, network and addresses are untouched; the exited task
// is deleted first. A sandbox whose pause runs is left as it is.
//
// The pause process's output goes to a log in the sandbox's directory. If
// it exits before it is ready, the error says with which exit code and
// what it wrote last, and the exit is kept in the sandbox's labels. On
// failure the sandbox is left, not running, for the caller to start again
// or replace.
func (r *Runtime) StartSandbox(ctx context.Context, sb pod.Record) (pod.Record, error) {
	if sb.NoPause {
		return r.noPauseStarted(ctx, sb)
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	clock := newPhaseClock()
	c, err := r.client.LoadContainer(ctx, sb.ID)
	if err != nil {
		return sb, fmt.Errorf("loading sandbox %s: %w", sb.ID, err)
	}
	if running, err := r.clearPauseTask(ctx, c); err != nil || running != 0 {
		if err == nil {
			sb.State, sb.Pid = pod.TaskRunning, running
		}
		return sb, err
	}
	logPath := r.pauseLog(sb.ID)
	if err := truncate(logPath); err != nil {
		return sb, fmt.Errorf("creating the log of sandbox %s: %w", sb.ID, err)
	}
	// The pod's containers start before its sandbox and share its shim:
	// when the only one exits at once (an init container running `true`),
	// or the last other pod of a shared shim goes (shimGroupOf), the shim
	// shuts down just as the sandbox joins it, and the new task fails in
	// one of several ways (connection closed or refused); once that shim
	// is gone, a new task starts a new one. A new task in place of one just
	// deleted can find containerd still removing the old
	// one's state ("file exists"). Both pass, and the pause program is
	// staticlet's, which no spec stops from starting: whatever the error,
	// try again for a while.
	clock.mark("load")
	t, err := r.newTask(ctx, c, r.pauseIO(logPath), func(error) bool { return true })
	if err != nil {
		return sb, fmt.Errorf("creating the task of sandbox %s: %w", sb.ID, err)
	}
	clock.mark("task")
	// Waiting is set up before the start, so that an exit at once is seen.
	wctx, wcancel := context.WithCancel(r.nsContext(ctx))
	defer wcancel()
	exited, err := t.Wait(wctx)
	// Until the pause process handles SIGTERM, a stop, which follows at
	// once when the pod's containers are already done, would not end it
	// cleanly: StartSandbox returns once it does.
	if err == nil {
		err = t.Start(ctx)
		clock.mark("start")
	}
	if err == nil {
		err = r.waitPauseReady(ctx, t.Pid(), exited)
		clock.mark("ready")
	}
	if err != nil {
		return sb, fmt.Errorf("starting sandbox %s: %w", sb.ID, r.pauseFailed(ctx, c, t, err))
	}
	r.cfg.Logger.Debug("started a sandbox", clock.attrs("id", sb.ID)...)
	sb.State = pod.TaskRunning
	sb.Pid = t.Pid()
	return sb, nil
}

// clearPauseTask makes way for a new pause process in sandbox c: an exited
// task is deleted, and the new process's start time recorded, so that the
// old exit, in the labels or still to be written there (containerd's event
// is handled concurrently, see settleExit), is known to be of an earlier
// process. It returns the pid of a pause process that runs already, or 0.
func (r *Runtime) clearPauseTask(ctx context.Context, c client.Container) (running uint32, err error) {
	restart := false
	t, err := r.loadTask(ctx, c)
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		return 0, fmt.Errorf("loading the task of sandbox %s: %w", c.ID(), err)
	default:
		// The exit handler may delete the task meanwhile (settleExit),
		// and its shim go away with it.
		st, err := t.Status(ctx)
		switch {
		case errdefs.IsNotFound(err):
		case err != nil && shimGone(err):
			if err := r.deleteTask(ctx, c); err != nil {
				return 0, err
			}
		case err != nil:
			return 0, fmt.Errorf("reading the state of sandbox %s: %w", c.ID(), err)
		case st.Status == client.Created:
			// Made and never started: staticlet stopped between
			// creating the task and starting it. It goes, and a new
			// one starts.
			if err := r.deleteTask(ctx, c, client.WithProcessKill); err != nil {
				return 0, err
			}
			return 0, nil
		case st.Status != client.Stopped:
			return t.Pid(), nil
		default:
			if err := r.deleteTask(ctx, c); err != nil {
				return 0, err
			}
		}
		restart = true
	}
	if !restart {
		labels, err := c.Labels(ctx)
		if err != nil {
			return 0, fmt.Errorf("reading the labels of sandbox %s: %w", c.ID(), err)
		}
		_, restart = labels[LabelExitCode]
	}
	if !restart {
		return 0, nil // the first pause process
	}
	// An empty value removes a label.
	if _, err := c.SetLabels(ctx, map[string]string{
		LabelExitCode:   "",
		LabelFinishedAt: "",
		LabelStartedAt:  time.Now().UTC().Format(time.RFC3339Nano),
	}); err != nil {
		return 0, fmt.Errorf("clearing the last exit of sandbox %s: %w", c.ID(), err)
	}
	return 0, nil
}

// pauseFailed cleans up after pause task t of sandbox c failed to start
// with err, and returns the error to report: when the process exited, its
// exit code and the end of its output, which are also kept in the
// sandbox's labels as any exit is.
func (r *Runtime) pauseFailed(ctx context.Context, c client.Container, t client.Task, err error) error {
	ctx, cancel := r.call(context.WithoutCancel(ctx))
	defer cancel()
	var exit *pauseExit
	if !errors.As(err, &exit) {
		if _, derr := t.Delete(ctx, client.WithProcessKill); derr != nil && !errdefs.IsNotFound(derr) {
			r.cfg.Logger.Warn("deleting a sandbox task that failed to start", "sandbox", c.ID(), "err", derr)
		}
		return err
	}
	// Deleting the task waits for the shim to have copied the process's
	// output to the log.
	st, derr := t.Delete(ctx)
	if derr != nil && !errdefs.IsNotFound(derr) {
		r.cfg.Logger.Warn("deleting a sandbox task that exited", "sandbox", c.ID(), "err", derr)
	}
	code, at := exit.code, exit.at
	if st != nil && st.ExitTime().After(at) {
		code, at = st.ExitCode(), st.ExitTime()
	}
	if _, lerr := c.SetLabels(ctx, map[string]string{
		LabelExitCode:   strconv.FormatUint(uint64(code), 10),
		LabelFinishedAt: at.UTC().Format(time.RFC3339Nano),
	}); lerr != nil && !errdefs.IsNotFound(lerr) {
		r.cfg.Logger.Warn("recording the exit of a sandbox's pause process", "sandbox", c.ID(), "err", lerr)
	}
	out := pauseOutputAt(r.pauseLog(c.ID()))
	if out == "" {
		out = "no output"
	}
	return fmt.Errorf("pause process %d exited with code %d: %s", exit.pid, code, out)
}

// pauseExit is a pause process that exited before it was ready.
type pauseExit struct {
	pid  uint32
	code uint32
	at   time.Time
}

func (e *pauseExit) Error() string {
	return fmt.Sprintf("pause process %d exited with code %d before handling SIGTERM", e.pid, e.code)
}

// pauseReadyWait bounds waitPauseReady: the pause takes a few milliseconds,
// and one that is late is only stopped less politely.
const pauseReadyWait = 2 * time.Second

// waitPauseReady waits until pause process pid has taken pause.ReadyName,
// which it does once it handles SIGTERM. One that exits first (exited
// tells) is a *pauseExit. One that is not there at all (gone already, or
// in a PID namespace staticlet does not see) and has not exited leaves
// nothing to wait for. Nor does one that is not ready within
// pauseReadyWait (the PID may name another process when staticlet runs in
// a PID namespace of its own): it is logged, and the sandbox runs.
func (r *Runtime) waitPauseReady(ctx context.Context, pid uint32, exited <-chan client.ExitStatus) error {
	wait, cancel := context.WithTimeout(ctx, pauseReadyWait)
	defer cancel()
	err := pollPauseReady(wait, pid, exited)
	if err != nil && ctx.Err() == nil && wait.Err() != nil {
		r.cfg.Logger.Warn("the pause process did not tell it handles SIGTERM; going on", "pid", pid, "err", err)
		return nil
	}
	return err
}

// pauseGoneWait is how long a pause process that is not in /proc may take
// to be reported exited: the shim reaps it, then tells.
const pauseGoneWait = 200 * time.Millisecond

func pollPauseReady(ctx context.Context, pid uint32, exited <-chan client.ExitStatus) error {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	exitErr := func(st client.ExitStatus) error {
		return &pauseExit{pid: pid, code: st.ExitCode(), at: st.ExitTime()}
	}
	for {
		// "pid (name) state ...": the name may hold spaces and parentheses.
		b, err := os.ReadFile(path)
		// A process that exits between the open and the read gives ESRCH.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			select {
			case st := <-exited:
				return exitErr(st)
			case <-time.After(pauseGoneWait):
				return nil
			case <-ctx.Done():
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("reading the state of pause process %d: %w", pid, err)
		}
		start, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if start < 0 || end < start || end+2 >= len(b) {
			return fmt.Errorf("reading the state of pause process %d: malformed %q", pid, b)
		}
		name, state := string(b[start+1:end]), b[end+2]
		if name == pause.ReadyName && state != 'Z' && state != 'X' {
			return nil
		}
		select {
		case st := <-exited:
			return exitErr(st)
		case <-ctx.Done():
			if state == 'Z' || state == 'X' {
				return fmt.Errorf("pause process %d exited before handling SIGTERM", pid)
			}
			return fmt.Errorf("waiting for pause process %d to handle SIGTERM: %w", pid, ctx.Err())
		case <-tick.C:
		}
	}
}

// pauseLog is where the output of sandbox id's pause process goes, for
// when it fails; it goes with the sandbox's directory.
func (r *Runtime) pauseLog(id string) string {
	return filepath.Join(r.sandboxDir(id), "pause.log")
}

// pauseIO sends a pause process's output to logPath. The built-in pause
// says nothing unless its set-up fails (its exit code 1 then tells), and
// its output goes nowhere: neither a log driver process nor a copy in the
// shim, which serves many pods. Another pause program's output goes
// through the log driver, as containers' output, when there is one: the
// shim's own copy can lose the output of a process that exits at once when
// the node is busy (containerd 1.6's shim then logs "error copying stderr"
// and the file stays empty).
func (r *Runtime) pauseIO(logPath string) cio.Creator {
	if r.pause.Builtin {
		return cio.NullIO
	}
	if r.cfg.Logs.DriverArgs != nil {
		return r.driverIO(logPath)
	}
	return cio.LogFile(logPath)
}

// The end of a pause process's output that is told: its last lines, and
// the end of those.
const (
	pauseOutputLines = 10
	pauseOutputBytes = 1024
)

// pauseOutput returns the end of what sandbox id's last pause process
// wrote, on one line; empty when it wrote nothing. Lines the log driver
// wrote (CRI records) are read as their content.
func (r *Runtime) pauseOutput(id string) string { return pauseOutputAt(r.pauseLog(id)) }

func pauseOutputAt(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > pauseOutputBytes {
		_, _ = f.Seek(st.Size()-pauseOutputBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, pauseOutputBytes))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > pauseOutputLines {
		lines = lines[len(lines)-pauseOutputLines:]
	}
	var kept []string
	for _, l := range lines {
		if rec, err := logs.ParseRecord([]byte(l)); err == nil {
			l = string(rec.Content)
		}
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "; ")
}

// truncate creates path, or empties it, with its directory.
func truncate(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
