package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// testExecStream runs TestExec's container's commands through
// ExecStream: output, input, a terminal, resizes, cancellation.
func testExecStream(t *testing.T, h *harness, id string) {
	tests := []struct {
		name             string
		cmd              []string
		streams          ExecStreams
		wantCode         int
		wantOut, wantErr string
	}{
		{name: "two streams and the exit code", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			wantCode: 3, wantOut: "out\n", wantErr: "err\n"},
		{name: "input to its end", cmd: []string{"sh", "-c", "cat; echo done"},
			streams: ExecStreams{Stdin: strings.NewReader("a\nb\n")}, wantOut: "a\nb\ndone\n"},
		{name: "no input", cmd: []string{"sh", "-c", "cat; echo done"}, wantOut: "done\n"},
		{name: "terminal: one stream, its size", cmd: []string{"sh", "-c", "test -t 0 && test -t 1 && echo tty $TERM >&2; stty size"},
			streams: ExecStreams{TTY: true, Size: ConsoleSize{Width: 100, Height: 30}}, wantOut: "tty xterm\r\n30 100\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			s := tt.streams
			s.Stdout, s.Stderr = &out, &errOut
			code, err := h.rt.ExecStream(h.ctx(), id, tt.cmd, s)
			if err != nil || code != tt.wantCode || out.String() != tt.wantOut || errOut.String() != tt.wantErr {
				t.Errorf("ExecStream(%q) = %d, %v, stdout %q, stderr %q; want %d, nil, %q, %q",
					tt.cmd, code, err, out.String(), errOut.String(), tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}

	t.Run("resize", func(t *testing.T) {
		in, typed := io.Pipe()
		resize := make(chan ConsoleSize)
		var out bytes.Buffer
		done := make(chan error, 1)
		go func() {
			_, err := h.rt.ExecStream(h.ctx(), id, []string{"sh", "-c", "read x; stty size"},
				ExecStreams{Stdin: in, Stdout: &out, TTY: true, Size: ConsoleSize{Width: 80, Height: 24}, Resize: resize})
			done <- err
		}()
		// The second send is taken once the first size has been set.
		resize <- ConsoleSize{Width: 120, Height: 40}
		resize <- ConsoleSize{Width: 120, Height: 40}
		io.WriteString(typed, "go\r")
		if err := <-done; err != nil || !strings.HasSuffix(out.String(), "\r\n40 120\r\n") {
			t.Errorf("ExecStream after a resize = %v, output %q; want it to end in 40 120", err, out.String())
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(h.ctx())
		defer cancel()
		// The command is killed once it has started: its output says so.
		// It writes only once it has read a line, which ExecStream feeds it
		// once the shim's start returned.
		started := &onWrite{do: cancel}
		_, err := h.rt.ExecStream(ctx, id, []string{"sh", "-c", "read x; echo started; exec sleep 4321"},
			ExecStreams{Stdin: strings.NewReader("go\n"), Stdout: started})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ExecStream with a cancelled context = %v, want context.Canceled", err)
		}
		h.waitNoExec(id, "sleep 4321")

		// Cancelled as the process writes, which may come before the
		// shim's start returned: the start runs to its end, then the
		// process is killed.
		ctx, cancel = context.WithCancel(h.ctx())
		defer cancel()
		started = &onWrite{do: cancel}
		_, err = h.rt.ExecStream(ctx, id, []string{"sh", "-c", "echo started; exec sleep 4322"}, ExecStreams{Stdout: started})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ExecStream cancelled during its start = %v, want context.Canceled", err)
		}
		h.waitNoExec(id, "sleep 4322")
	})
}

// onWrite is a writer that calls do on its first write.
type onWrite struct {
	once sync.Once
	do   func()
}

func (w *onWrite) Write(b []byte) (int, error) {
	w.once.Do(w.do)
	return len(b), nil
}
