package status

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TermSize is the size of a terminal in characters.
type TermSize struct {
	Cols, Rows uint16
}

// ExecOptions say what to run in a container and with which streams, for
// Client.Exec and for an ExecFunc.
type ExecOptions struct {
	// Container is the container's name; the client may leave it empty for
	// a pod with one container.
	Container string
	// Command is the command and its arguments; it must not be empty.
	Command []string
	// Stdin, when not nil, is sent to the command's input, which ends when
	// Stdin returns io.EOF. A Read of Stdin can block for good, so neither
	// Exec nor the server waits for one under way when they return.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; with TTY all of it
	// goes to Stdout.
	Stdout, Stderr io.Writer
	// TTY runs the command on a terminal, of Size if that is not zero,
	// resized to each size Resize delivers.
	TTY    bool
	Size   TermSize
	Resize <-chan TermSize
}

// ExecFunc runs opts.Command in the running container whose containerd ID
// is containerID, with opts' streams, and returns its exit code once it has
// exited and its output is written. A cancelled ctx (the client went away,
// the server stops) must kill the command.
type ExecFunc func(ctx context.Context, containerID string, opts ExecOptions) (int, error)

// execHandshakeTimeout bounds the write of the 101 response.
const execHandshakeTimeout = 10 * time.Second

// podExec serves POST /pods/{name}/exec: it checks the request, switches
// the connection to the exec protocol (see frame.go) and runs the command.
func (s *Server) podExec(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Exec == nil {
		s.writeError(w, r, http.StatusNotImplemented, "exec is not served by this staticlet")
		return
	}
	opts, stdin, err := parseExecOptions(r)
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	if !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", ExecProtocol) {
		s.writeError(w, r, http.StatusUpgradeRequired, "exec needs the connection upgraded to %s", ExecProtocol)
		return
	}
	p, key, container, ok := s.lookupOneContainer(w, r)
	if !ok {
		return
	}
	opts.Container = container
	id, ok := runningContainerID(p, opts.Container)
	if !ok {
		s.writeError(w, r, http.StatusConflict, "container %s is not running", opts.Container)
		return
	}
	// The session outlives the handler's part in the server: Run waits
	// for it. Add comes before the hijack, while Shutdown still counts
	// the connection as active.
	s.sessions.Add(1)
	defer s.sessions.Done()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.writeError(w, r, http.StatusInternalServerError, "exec: switching protocols: %v", err)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(execHandshakeTimeout))
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", ExecProtocol)
	if err := brw.Flush(); err != nil {
		return // the client went away
	}
	conn.SetDeadline(time.Time{})
	s.log.Info("exec in container", "pod", key, "container", opts.Container, "command", opts.Command, "tty", opts.TTY)
	s.execSession(r.Context(), conn, brw.Reader, id, stdin, opts)
}

// execSession runs the command with its streams framed on conn, reading
// the client's frames from br (the connection's buffered reader), with
// the client's input if stdin, and ends with the exit frame.
func (s *Server) execSession(ctx context.Context, conn net.Conn, br *bufio.Reader, id string, stdin bool, opts ExecOptions) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fw := newFrameWriter(conn)
	opts.Stdout = fw.stream(frameStdout)
	if !opts.TTY {
		opts.Stderr = fw.stream(frameStderr)
	}
	var in *io.PipeWriter
	if stdin {
		var pr *io.PipeReader
		pr, in = io.Pipe()
		defer pr.Close() // ends a write of the reader below
		opts.Stdin = pr
	}
	resize := make(chan TermSize, 1)
	opts.Resize = resize

	var wg sync.WaitGroup
	defer wg.Wait()
	defer conn.Close() // ends the reader below
	wg.Go(func() {
		// A client that closes the connection, or breaks the protocol,
		// ends the command.
		defer cancel()
		err := readClientFrames(br, in, resize)
		if in != nil {
			in.CloseWithError(err)
		}
	})

	code, err := s.cfg.Exec(ctx, id, opts)
	msg := ""
	if err != nil {
		code, msg = -1, err.Error()
		// The client reports it; most are its own mistakes.
		s.log.Debug("exec in container failed", "container", id, "command", opts.Command, "err", err)
	}
	// The client may be gone; the command has ended anyway.
	_ = fw.send(frameExit, exitPayload(code, msg))
}

// readClientFrames reads the client's frames until the connection ends,
// and returns why it ended: stdin frames go to stdin (dropped when it is
// nil), stdin-close closes it, resize frames go to resize, replacing a
// size not yet taken.
func readClientFrames(br *bufio.Reader, stdin *io.PipeWriter, resize chan TermSize) error {
	buf := make([]byte, maxFramePayload)
	for {
		f, err := readFrame(br, buf)
		if err != nil {
			return err
		}
		switch f.typ {
		case frameStdin:
			if stdin == nil {
				continue
			}
			if _, err := stdin.Write(f.payload); err != nil {
				// The command has exited or closed its input: later input
				// is dropped, but the connection is still read.
				stdin = nil
			}
		case frameStdinClose:
			if stdin != nil {
				stdin.Close()
				stdin = nil
			}
		case frameResize:
			size, err := parseResize(f.payload)
			if err != nil {
				return err
			}
			// The reader is the only sender: after taking a stale size
			// out, the send cannot block.
			select {
			case <-resize:
			default:
			}
			resize <- size
		default:
			return fmt.Errorf("exec protocol: unexpected frame type %d from the client", f.typ)
		}
	}
}

// parseExecOptions reads the query of an exec request: command (repeated),
// container, stdin (whether the client sends input), tty, cols and rows.
func parseExecOptions(r *http.Request) (opts ExecOptions, stdin bool, err error) {
	q := r.URL.Query()
	opts = ExecOptions{Container: q.Get("container"), Command: q["command"]}
	if len(opts.Command) == 0 {
		return opts, false, errors.New("exec needs a command: give one or more command parameters")
	}
	if stdin, err = queryBool(q, "stdin"); err != nil {
		return opts, false, err
	}
	if opts.TTY, err = queryBool(q, "tty"); err != nil {
		return opts, false, err
	}
	for _, d := range []struct {
		name string
		to   *uint16
	}{{"cols", &opts.Size.Cols}, {"rows", &opts.Size.Rows}} {
		if v := q.Get(d.name); v != "" {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return opts, false, fmt.Errorf("invalid %s %q: want an integer from 0 to 65535", d.name, v)
			}
			*d.to = uint16(n)
		}
	}
	return opts, stdin, nil
}

// queryBool reads boolean parameter name of q; absent is false.
func queryBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("invalid %s %q: want true or false", name, v)
	}
	return b, nil
}

// headerHas tells whether one of the comma-separated tokens of header name
// is token, ignoring case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// runningContainerID returns the containerd ID of container name of pod p
// (app or init) when its status says it runs.
func runningContainerID(p *v1.Pod, name string) (string, bool) {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name && cs.State.Running != nil && cs.ContainerID != "" {
				return strings.TrimPrefix(cs.ContainerID, "containerd://"), true
			}
		}
	}
	return "", false
}
