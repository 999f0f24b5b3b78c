package status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// fakeExec is an ExecFunc whose commands say what to do: "echo ARGS..."
// (to stdout, "err" to stderr, exit 3), "cat" (stdin to stdout), "size"
// (prints the initial size and each resize, until stdin ends), "block"
// (until ctx ends: it reports that on cancelled).
type fakeExec struct {
	started   chan struct{} // nil, or told when "block" starts
	cancelled chan string
}

func (f *fakeExec) exec(ctx context.Context, id string, opts ExecOptions) (int, error) {
	switch opts.Command[0] {
	case "echo":
		fmt.Fprintf(opts.Stdout, "%s %s tty=%v %s\n", id, opts.Container, opts.TTY, strings.Join(opts.Command[1:], " "))
		if opts.Stderr != nil {
			fmt.Fprintln(opts.Stderr, "err")
		}
		return 3, nil
	case "cat":
		_, err := io.Copy(opts.Stdout, opts.Stdin)
		return 0, err
	case "size":
		fmt.Fprintf(opts.Stdout, "%dx%d\n", opts.Size.Cols, opts.Size.Rows)
		eof := make(chan struct{})
		go func() { io.Copy(io.Discard, opts.Stdin); close(eof) }()
		for {
			select {
			case s := <-opts.Resize:
				fmt.Fprintf(opts.Stdout, "%dx%d\n", s.Cols, s.Rows)
			case <-eof:
				return 0, nil
			}
		}
	case "block":
		if f.started != nil {
			f.started <- struct{}{}
		}
		<-ctx.Done()
		f.cancelled <- id
		return -1, ctx.Err()
	}
	return -1, fmt.Errorf("exec %q: executable file not found", opts.Command[0])
}

// execPod is a pod with containers a (running) and b (not).
func execPod() *v1.Pod {
	p := testPod("default", "web", v1.PodRunning, true)
	p.Spec.Containers = []v1.Container{{Name: "a"}, {Name: "b"}}
	p.Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "a", ContainerID: "containerd://id-a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		{Name: "b", ContainerID: "containerd://id-b", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}},
	}
	return p
}

func TestExec(t *testing.T) {
	store := NewStore()
	store.SetPod(execPod())
	one := testPod("default", "one", v1.PodRunning, true)
	one.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", ContainerID: "containerd://id-c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	store.SetPod(one)
	fake := &fakeExec{cancelled: make(chan string, 1)}
	c := startServer(t, ServerConfig{Store: store, Exec: fake.exec})
	ctx := context.Background()

	tests := []struct {
		name       string
		pod        string
		opts       ExecOptions
		wantCode   int
		wantOut    string
		wantErrOut string
		wantErr    string // a part of the error
	}{
		{name: "output and exit code", pod: "web", opts: ExecOptions{Container: "a", Command: []string{"echo", "x", "y"}},
			wantCode: 3, wantOut: "id-a a tty=false x y\n", wantErrOut: "err\n"},
		{name: "the only container", pod: "one", opts: ExecOptions{Command: []string{"echo"}},
			wantCode: 3, wantOut: "id-c c tty=false \n", wantErrOut: "err\n"},
		{name: "tty: one stream", pod: "one", opts: ExecOptions{Command: []string{"echo"}, TTY: true},
			wantCode: 3, wantOut: "id-c c tty=true \n"},
		{name: "stdin", pod: "one", opts: ExecOptions{Command: []string{"cat"}, Stdin: strings.NewReader(strings.Repeat("hi\n", 50000))},
			wantOut: strings.Repeat("hi\n", 50000)},
		{name: "exec fails", pod: "one", opts: ExecOptions{Command: []string{"nope"}},
			wantCode: -1, wantErr: `exec "nope": executable file not found`},
		{name: "several containers", pod: "web", opts: ExecOptions{Command: []string{"echo"}},
			wantCode: -1, wantErr: "choose one of: [a b]"},
		{name: "not running", pod: "web", opts: ExecOptions{Container: "b", Command: []string{"echo"}},
			wantCode: -1, wantErr: "container b is not running"},
		{name: "no such container", pod: "web", opts: ExecOptions{Container: "z", Command: []string{"echo"}},
			wantCode: -1, wantErr: `container "z" not found`},
		{name: "no such pod", pod: "nope", opts: ExecOptions{Command: []string{"echo"}},
			wantCode: -1, wantErr: `pod "nope" not found`},
		{name: "no command", pod: "one", wantCode: -1, wantErr: "exec needs a command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			tt.opts.Stdout, tt.opts.Stderr = &out, &errOut
			code, err := c.Exec(ctx, tt.pod, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Exec(%q, %q) error = %v, want one with %q", tt.pod, tt.opts.Command, err, tt.wantErr)
				}
			} else if err != nil {
				t.Errorf("Exec(%q, %q) error = %v", tt.pod, tt.opts.Command, err)
			}
			if code != tt.wantCode || out.String() != tt.wantOut || errOut.String() != tt.wantErrOut {
				t.Errorf("Exec(%q, %q) = %d, stdout %.60q, stderr %q; want %d, %.60q, %q",
					tt.pod, tt.opts.Command, code, out.String(), errOut.String(), tt.wantCode, tt.wantOut, tt.wantErrOut)
			}
		})
	}

	t.Run("resize", func(t *testing.T) {
		resize := make(chan TermSize)
		in, feed := io.Pipe()
		out := &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(ctx, "one", ExecOptions{Command: []string{"size"}, TTY: true, Size: TermSize{80, 24},
				Stdin: in, Stdout: out, Resize: resize})
			done <- err
		}()
		waitFor(t, 5*time.Second, "the initial size", func() bool { return out.String() == "80x24\n" })
		resize <- TermSize{Cols: 120, Rows: 40}
		waitFor(t, 5*time.Second, "the new size", func() bool { return out.String() == "80x24\n120x40\n" })
		feed.Close()
		if err := <-done; err != nil {
			t.Errorf("Exec() = %v", err)
		}
	})

	t.Run("client goes away", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(ctx, "one", ExecOptions{Command: []string{"block"}, Stdout: io.Discard})
			done <- err
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Exec() with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

func TestExecCancelsCommand(t *testing.T) {
	store := NewStore()
	one := testPod("default", "one", v1.PodRunning, true)
	one.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", ContainerID: "containerd://id-c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	store.SetPod(one)
	fake := &fakeExec{cancelled: make(chan string, 1)}
	c := startServer(t, ServerConfig{Store: store, Exec: fake.exec})

	// The client sends nothing and closes the connection once the command
	// runs: the command's context must end.
	conn, err := c.upgradeExec(context.Background(), "one", ExecOptions{Command: []string{"block"}})
	if err != nil {
		t.Fatalf("upgradeExec() = %v", err)
	}
	conn.Close()
	select {
	case id := <-fake.cancelled:
		if id != "id-c" {
			t.Errorf("cancelled exec in %q, want id-c", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command's context did not end after the client closed the connection")
	}
}

func TestExecServerStops(t *testing.T) {
	store := NewStore()
	store.SetPod(execPod())
	fake := &fakeExec{started: make(chan struct{}, 1), cancelled: make(chan string, 1)}
	socket := filepath.Join(shortDir(t), "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- NewServer(ServerConfig{Socket: socket, Store: store, Exec: fake.exec}).Run(ctx) }()
	c := NewClient(socket)
	waitFor(t, 5*time.Second, "the server to answer", func() bool { return c.Health(context.Background()) == nil })

	execErr := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), "web", ExecOptions{Container: "a", Command: []string{"block"}, Stdout: io.Discard})
		execErr <- err
	}()
	<-fake.started
	// A stopping server ends the sessions under way, and waits for them.
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	select {
	case <-fake.cancelled:
	default:
		t.Error("Run returned before the command's context ended")
	}
	if err := <-execErr; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Exec() while the server stops = %v, want the command's error", err)
	}
}

func TestExecNeedsUpgrade(t *testing.T) {
	store := NewStore()
	store.SetPod(execPod())
	tests := []struct {
		name string
		cfg  ServerConfig
		want int
	}{
		{"no upgrade", ServerConfig{Store: store, Exec: (&fakeExec{}).exec}, http.StatusUpgradeRequired},
		{"no exec", ServerConfig{Store: store}, http.StatusNotImplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startServer(t, tt.cfg)
			req, err := http.NewRequest(http.MethodPost, "http://staticlet/pods/web/exec?container=a&command=echo", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("POST exec without an upgrade = %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}
