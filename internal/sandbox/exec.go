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
	cctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(cctx, id)
	if err != nil {
		return ExecResult{}, fmt.Errorf("loading container %s: %w", id, err)
	}
	s, err := c.Spec(cctx)
	if err != nil {
		return ExecResult{}, fmt.Errorf("reading the spec of container %s: %w", id, err)
	}
	t, err := c.Task(cctx, nil)
	if err != nil {
		return ExecResult{}, fmt.Errorf("loading the task of container %s: %w", id, err)
	}
	ps := *s.Process
	ps.Args = cmd
	ps.Terminal = false
	ps.ConsoleSize = nil

	out := &capped{limit: ExecOutputLimit}
	execID := "exec-" + newID()[:16]
	p, err := t.Exec(cctx, execID, &ps, cio.NewCreator(
		cio.WithStreams(nil, out, out),
		cio.WithFIFODir(filepath.Join(r.cfg.RootDir, "fifo"))))
	if err != nil {
		return ExecResult{}, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
	}
	defer func() {
		// The process is gone or killed by now; Delete also closes its
		// output, and must run even when ctx has ended.
		dctx, dcancel := r.call(context.WithoutCancel(ctx))
		defer dcancel()
		if _, err := p.Delete(dctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			r.cfg.Logger.Warn("deleting an exec'd process", "container", id, "exec", execID, "err", err)
		}
	}()
	// The wait is long-lived: it must outlast the per-call deadline.
	wctx, wcancel := context.WithCancel(r.nsContext(ctx))
	defer wcancel()
	exited, err := p.Wait(wctx)
	if err != nil {
		return ExecResult{}, fmt.Errorf("waiting on exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
	}
	if err := p.Start(cctx); err != nil {
		return ExecResult{}, fmt.Errorf("starting exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
	}

	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	var stopped error
	select {
	case st := <-exited:
		code, _, err := st.Result()
		if err != nil {
			return ExecResult{}, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
		}
		drain(p.IO())
		return ExecResult{ExitCode: int(code), Output: out.bytes()}, nil
	case <-expired:
		stopped = fmt.Errorf("exec %q in container %s: timed out after %s: %w", strings.Join(cmd, " "), id, timeout, context.DeadlineExceeded)
	case <-ctx.Done():
		stopped = fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, ctx.Err())
	}
	kctx, kcancel := r.call(context.WithoutCancel(ctx))
	defer kcancel()
	if err := p.Kill(kctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
		r.cfg.Logger.Warn("killing an exec'd process", "container", id, "exec", execID, "err", err)
	}
	select {
	case <-exited:
	case <-time.After(killWait):
	}
	return ExecResult{ExitCode: -1, Output: out.bytes()}, stopped
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
