package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// Exec runs opts.Command in a container of a pod ("name" or
// "namespace/name"; opts.Container may be empty for a pod with one
// container), streams its input and output through opts, and returns its
// exit code. An error says the command could not be run, or the
// connection broke before it exited (then it wraps ErrNotRunning); a
// cancelled ctx closes the connection, which kills the command.
func (c *Client) Exec(ctx context.Context, podName string, opts ExecOptions) (int, error) {
	conn, err := c.upgradeExec(ctx, podName, opts)
	if err != nil {
		return -1, fmt.Errorf("exec in pod %q: %w", podName, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	fw := newFrameWriter(conn)
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	if opts.Resize != nil {
		wg.Go(func() {
			for {
				select {
				case size := <-opts.Resize:
					if fw.send(frameResize, resizePayload(size)) != nil {
						return
					}
				case <-done:
					return
				}
			}
		})
	}
	if opts.Stdin != nil {
		// Not waited for: a read of stdin may block for good. Once conn
		// is closed its next send fails and it returns.
		go sendStdin(fw, opts.Stdin)
	}
	code, err := receiveOutput(conn, opts)
	if ctx.Err() != nil {
		return -1, fmt.Errorf("exec in pod %q: %w", podName, ctx.Err())
	}
	if err != nil {
		return -1, fmt.Errorf("exec in pod %q: %w", podName, err)
	}
	return code, nil
}

// upgradeExec asks for the exec and returns the connection switched to
// the exec protocol.
func (c *Client) upgradeExec(ctx context.Context, podName string, opts ExecOptions) (io.ReadWriteCloser, error) {
	q := url.Values{"command": opts.Command}
	if opts.Container != "" {
		q.Set("container", opts.Container)
	}
	if opts.Stdin != nil {
		q.Set("stdin", "true")
	}
	if opts.TTY {
		q.Set("tty", "true")
		if opts.Size != (TermSize{}) {
			q.Set("cols", strconv.Itoa(int(opts.Size.Cols)))
			q.Set("rows", strconv.Itoa(int(opts.Size.Rows)))
		}
	}
	// The handshake is bounded; the connection, once switched, is the
	// caller's and outlives the request's context.
	hctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost,
		"http://staticlet/pods/"+url.PathEscape(podName)+"/exec?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ExecProtocol)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, errors.New("the server switched protocols but the connection is not writable")
	}
	return conn, nil
}

// sendStdin sends what in gives as stdin frames, then a stdin-close frame.
func sendStdin(fw *frameWriter, in io.Reader) {
	buf := make([]byte, maxFramePayload)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if fw.send(frameStdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			// A failed read ends the input as its end does.
			_ = fw.send(frameStdinClose, nil)
			return
		}
	}
}

// receiveOutput writes the server's output frames to opts' writers until
// the exit frame, and returns the exit code or the error it carries.
func receiveOutput(conn io.Reader, opts ExecOptions) (int, error) {
	buf := make([]byte, maxFramePayload)
	for {
		f, err := readFrame(conn, buf)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return -1, &kindError{msg: "the connection to staticlet closed before the command's exit status came", kind: ErrNotRunning, err: err}
		}
		if err != nil {
			return -1, fmt.Errorf("reading the command's output: %w", err)
		}
		var out io.Writer
		switch f.typ {
		case frameStdout:
			out = opts.Stdout
		case frameStderr:
			out = opts.Stderr
		case frameExit:
			code, msg, err := parseExit(f.payload)
			if err != nil {
				return -1, err
			}
			if msg != "" {
				return -1, errors.New(msg)
			}
			return code, nil
		default:
			return -1, fmt.Errorf("exec protocol: unexpected frame type %d from the server", f.typ)
		}
		if out == nil {
			continue
		}
		if _, err := out.Write(f.payload); err != nil {
			return -1, fmt.Errorf("writing the command's output: %w", err)
		}
	}
}
