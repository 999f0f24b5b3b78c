package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// ExecOutputLimit is how much of an exec'd command's output Exec keeps, as
// the kubelet keeps of an exec probe's.
const ExecOutputLimit = 10 << 10

// execDrain bounds the wait for a command's output once it has exited: a
// child it left behind may hold the output open.
const execDrain = 2 * time.Second

// ExecResult is how a command run in a container ended.
type ExecResult struct {
	ExitCode int
	// Output is the command's stdout and stderr as they came, cut at
	// ExecOutputLimit.
	Output []byte
}

// Exec runs cmd in container id's running task, as its main process runs
// (same user, groups, environment, working directory, capabilities), and
// returns its exit code and output. With timeout > 0 the command is killed
// after timeout and the error wraps context.DeadlineExceeded; a cancelled
// ctx kills it too.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (_ ExecResult, err error) {
	defer func() {
		// A call cut short by ctx says so, whatever containerd made of it.
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", err, ctx.Err())
		}
	}()
	if len(cmd) == 0 {
		return ExecResult{}, fmt.Errorf("exec in container %s: no command", id)
	}
	out := &capped{limit: ExecOutputLimit}
	ep, err := r.startExec(ctx, id, cmd, func(ps *specs.Process) {
		ps.Terminal = false
		ps.ConsoleSize = nil
	}, cio.NewCreator(
		cio.WithStreams(nil, out, out),
		cio.WithFIFODir(filepath.Join(r.cfg.RootDir, "fifo"))), false)
	if err != nil {
		return ExecResult{}, err
	}
	defer ep.delete(ctx)

	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	var stopped error
	select {
	case st := <-ep.exited:
		code, _, err := st.Result()
		if err != nil {
			return ExecResult{}, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
		}
		drain(ep.p.IO())
		return ExecResult{ExitCode: int(code), Output: out.bytes()}, nil
	case <-expired:
		stopped = fmt.Errorf("exec %q in container %s: timed out after %s: %w", strings.Join(cmd, " "), id, timeout, context.DeadlineExceeded)
	case <-ctx.Done():
		stopped = fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, ctx.Err())
	}
	ep.kill(ctx)
	return ExecResult{ExitCode: -1, Output: out.bytes()}, stopped
}

// execProcess is a process started in a container's task by startExec.
type execProcess struct {
	r      *Runtime
	id     string // the container's
	execID string
	p      client.Process
	// exited receives the process's exit status; the wait behind it ends
	// with delete.
	exited <-chan client.ExitStatus
	stop   context.CancelFunc
}

// startExec starts cmd in container id's running task with the process
// spec of the container's main process as adjust changes it, and its IO
// from ioc; see below for finishStart. The caller must call delete on the
// process returned.
func (r *Runtime) startExec(ctx context.Context, id string, cmd []string, adjust func(*specs.Process), ioc cio.Creator, finishStart bool) (_ *execProcess, err error) {
	cctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(cctx, id)
	if err != nil {
		return nil, fmt.Errorf("loading container %s: %w", id, err)
	}
	s, err := c.Spec(cctx)
	if err != nil {
		return nil, fmt.Errorf("reading the spec of container %s: %w", id, err)
	}
	t, err := c.Task(cctx, nil)
	if err != nil {
		return nil, fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	ps := *s.Process
	ps.Args = cmd
	adjust(&ps)

	execID := "exec-" + newID()[:16]
	p, err := t.Exec(cctx, execID, &ps, ioc)
	if err != nil {
		return nil, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
	}
	// The wait is long-lived: it must outlast the per-call deadline, and
	// ctx too, so that an exit status is never ctx's end; delete ends it.
	wctx, wcancel := context.WithCancel(r.nsContext(context.WithoutCancel(ctx)))
	ep := &execProcess{r: r, id: id, execID: execID, p: p, stop: wcancel}
	defer func() {
		if err != nil {
			ep.delete(ctx)
		}
	}()
	if ep.exited, err = p.Wait(wctx); err != nil {
		return nil, fmt.Errorf("waiting on exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
	}
	// A start cut short can leave a process that the shim starts all the
	// same, and that nothing kills. With finishStart the start runs to its
	// end whatever ctx does, and the caller, seeing ctx's end, kills the
	// process: for a command someone runs. An exec probe's start ends with
	// its ctx, which ends when its container is stopped: a start carried
	// on into a container being killed left the shim stuck (its next kill
	// of the container timed out), while a process cut short there goes
	// with its container.
	sctx := cctx
	if finishStart {
		var scancel context.CancelFunc
		sctx, scancel = r.call(context.WithoutCancel(ctx))
		defer scancel()
	}
	if err := p.Start(sctx); err != nil {
		return nil, fmt.Errorf("starting exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
	}
	return ep, nil
}

// kill ends the process with SIGKILL and waits a little for it to go.
func (ep *execProcess) kill(ctx context.Context) {
	kctx, kcancel := ep.r.call(context.WithoutCancel(ctx))
	defer kcancel()
	if err := ep.p.Kill(kctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
		ep.r.cfg.Logger.Warn("killing an exec'd process", "container", ep.id, "exec", ep.execID, "err", err)
	}
	select {
	case <-ep.exited:
	case <-time.After(killWait):
	}
}

// delete removes the process, killing it if it still runs; it also closes
// its IO. It runs even when ctx has ended.
func (ep *execProcess) delete(ctx context.Context) {
	defer ep.stop()
	dctx, dcancel := ep.r.call(context.WithoutCancel(ctx))
	defer dcancel()
	if _, err := ep.p.Delete(dctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
		ep.r.cfg.Logger.Warn("deleting an exec'd process", "container", ep.id, "exec", ep.execID, "err", err)
	}
}

// drain waits a little for the output of an exited process to be copied.
func drain(io cio.IO) {
	if io == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(execDrain):
	}
}

// capped is a writer that keeps the first limit bytes written to it and
// drops the rest without blocking the writer. It is safe for concurrent
// use, as stdout and stderr are copied by goroutines of their own.
type capped struct {
	limit int

	mu  sync.Mutex
	buf []byte // guarded by mu
}

func (c *capped) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}
