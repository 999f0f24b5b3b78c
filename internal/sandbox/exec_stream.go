package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// ConsoleSize is the size of a terminal in characters.
type ConsoleSize struct {
	Width, Height uint16
}

// ExecStreams are the streams of a command run by ExecStream.
type ExecStreams struct {
	// Stdin is copied to the command's standard input, which is closed
	// when Stdin returns io.EOF; nil gives the command no input. A Read
	// of Stdin can block for good, so ExecStream does not wait for one
	// under way when it returns: what it reads is dropped, and Stdin is
	// not read again.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output (nil drops it). With
	// TTY both go to Stdout, as a terminal has one output, and Stderr is
	// not used.
	Stdout, Stderr io.Writer
	// TTY runs the command on a terminal of Size (if not zero), resized to
	// each size Resize delivers.
	TTY    bool
	Size   ConsoleSize
	Resize <-chan ConsoleSize
}

// ExecStream runs cmd in container id's running task, as its main process
// runs (as Exec does), with its input and output streamed through s, and
// returns its exit code once it has exited and its output has been
// copied. A cancelled ctx kills the command and ExecStream returns ctx's
// error. With TTY the command also gets TERM=xterm, as the CRI's exec does.
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, s ExecStreams) (int, error) {
	if len(cmd) == 0 {
		return -1, fmt.Errorf("exec in container %s: no command", id)
	}
	// The shim opens every stream it is given, and both outputs without a
	// terminal: one nobody reads is dropped here.
	if s.Stdout == nil {
		s.Stdout = io.Discard
	}
	if s.Stderr == nil && !s.TTY {
		s.Stderr = io.Discard
	}
	// The process reads its input through a pipe fed once it has started,
	// so that its input is closed only after the last byte went in.
	var stdin *io.PipeReader
	var feed *io.PipeWriter
	opts := []cio.Opt{cio.WithFIFODir(filepath.Join(r.cfg.RootDir, "fifo"))}
	if s.Stdin != nil {
		stdin, feed = io.Pipe()
		defer stdin.Close()
		opts = append(opts, cio.WithStreams(stdin, s.Stdout, s.Stderr))
	} else {
		opts = append(opts, cio.WithStreams(nil, s.Stdout, s.Stderr))
	}
	if s.TTY {
		opts = append(opts, cio.WithTerminal)
	}
	ep, err := r.startExec(ctx, id, cmd, func(ps *specs.Process) {
		ps.Terminal = s.TTY
		ps.ConsoleSize = nil
		if s.TTY {
			// In place of the container's own TERM, as the CRI's does.
			ps.Env = append(slices.DeleteFunc(slices.Clone(ps.Env), func(e string) bool {
				return strings.HasPrefix(e, "TERM=")
			}), "TERM=xterm")
			if s.Size != (ConsoleSize{}) {
				ps.ConsoleSize = &specs.Box{Width: uint(s.Size.Width), Height: uint(s.Size.Height)}
			}
		}
	}, cio.NewCreator(opts...), true)
	if err != nil {
		return -1, err
	}
	defer ep.delete(ctx)

	// done ends the helpers below; wg waits for them.
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	if feed != nil {
		go ep.feed(ctx, s.Stdin, feed)
	}
	if s.TTY {
		if s.Size != (ConsoleSize{}) {
			ep.resize(ctx, s.Size)
		}
		wg.Go(func() {
			for {
				select {
				case size := <-s.Resize:
					ep.resize(ctx, size)
				case <-done:
					return
				}
			}
		})
	}

	select {
	case st := <-ep.exited:
		code, _, err := st.Result()
		if err != nil {
			return -1, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, err)
		}
		if feed != nil {
			// Unblock a feed still writing input nobody reads.
			stdin.CloseWithError(errExited)
		}
		drain(ep.p.IO())
		return int(code), nil
	case <-ctx.Done():
		ep.kill(ctx)
		if feed != nil {
			stdin.CloseWithError(errExited)
		}
		return -1, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), id, ctx.Err())
	}
}

// errExited ends the copy of the input of a command that has exited.
var errExited = errors.New("the command has exited")

// feed copies in to the process's input through w, then closes the input:
// the pipe, so that its copy to the FIFO ends, and the process's side,
// which the shim holds open until told.
func (ep *execProcess) feed(ctx context.Context, in io.Reader, w *io.PipeWriter) {
	_, err := io.Copy(w, in)
	w.CloseWithError(err)
	if errors.Is(err, errExited) {
		return
	}
	cctx, cancel := ep.r.call(context.WithoutCancel(ctx))
	defer cancel()
	if err := ep.p.CloseIO(cctx, client.WithStdinCloser); err != nil && !errdefs.IsNotFound(err) {
		ep.r.cfg.Logger.Debug("closing the input of an exec'd process", "container", ep.id, "exec", ep.execID, "err", err)
	}
}

// resize sets the size of the process's terminal.
func (ep *execProcess) resize(ctx context.Context, size ConsoleSize) {
	cctx, cancel := ep.r.call(ctx)
	defer cancel()
	if err := ep.p.Resize(cctx, uint32(size.Width), uint32(size.Height)); err != nil && !errdefs.IsNotFound(err) {
		ep.r.cfg.Logger.Debug("resizing the terminal of an exec'd process", "container", ep.id, "exec", ep.execID, "err", err)
	}
}
