package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientremote "k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"github.com/staticlet/staticlet/internal/status"
)

// runningPod is a running pod whose containers, named names, run with
// containerd IDs "id-NAME".
func runningPod(ns, name string, names ...string) *v1.Pod {
	p := testPod(ns, name, "Running")
	p.Spec.Containers = nil
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: n, ContainerID: "containerd://id-" + n,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		})
	}
	return p
}

// fakeExec runs the commands of the tests: "io" copies stdin to stdout
// and says "err" on stderr; "exit N" exits with N; "size" prints the
// first terminal size it is given. It records the container's ID.
type fakeExec struct {
	mu  sync.Mutex
	ids []string
}

func (f *fakeExec) exec(ctx context.Context, id string, opts status.ExecOptions) (int, error) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	switch opts.Command[0] {
	case "io":
		if opts.Stdin == nil || opts.Stdout == nil || opts.Stderr == nil {
			return 0, fmt.Errorf("io wants stdin, stdout and stderr, got %v %v %v", opts.Stdin, opts.Stdout, opts.Stderr)
		}
		if _, err := io.Copy(opts.Stdout, opts.Stdin); err != nil {
			return 0, err
		}
		fmt.Fprint(opts.Stderr, "err")
		return 0, nil
	case "exit":
		return strconv.Atoi(opts.Command[1])
	case "size":
		if !opts.TTY || opts.Stderr != nil {
			return 0, fmt.Errorf("size wants a TTY and no stderr: tty %v, stderr %v", opts.TTY, opts.Stderr)
		}
		select {
		case s := <-opts.Resize:
			fmt.Fprintf(opts.Stdout, "%dx%d", s.Cols, s.Rows)
			return 0, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return 0, fmt.Errorf("fake: unknown command %q", opts.Command)
}

// sizes is a TerminalSizeQueue of one size.
type sizes struct{ once sync.Once }

func (s *sizes) Next() *clientremote.TerminalSize {
	var next *clientremote.TerminalSize
	s.once.Do(func() { next = &clientremote.TerminalSize{Width: 132, Height: 43} })
	return next
}

// transports are the ways a client reaches exec and attach: kubectl's
// first choice (WebSocket, v5), the WebSocket protocol before it (v4,
// served by cri-streaming) and SPDY, kubectl's fallback.
var transports = []struct {
	name string
	new  func(cfg *rest.Config, u *url.URL) (clientremote.Executor, error)
}{
	{"websocket v5", func(cfg *rest.Config, u *url.URL) (clientremote.Executor, error) {
		return clientremote.NewWebSocketExecutorForProtocols(cfg, "GET", u.String(), remotecommand.StreamProtocolV5Name)
	}},
	{"websocket v4", func(cfg *rest.Config, u *url.URL) (clientremote.Executor, error) {
		return clientremote.NewWebSocketExecutorForProtocols(cfg, "GET", u.String(), remotecommand.StreamProtocolV4Name)
	}},
	{"spdy", func(cfg *rest.Config, u *url.URL) (clientremote.Executor, error) {
		return clientremote.NewSPDYExecutor(cfg, "POST", u)
	}},
}

// streamURL is the URL of subresource sub of pod ns/name with opts.
func streamURL(t *testing.T, api *testAPI, ns, name, sub string, opts runtime.Object) *url.URL {
	t.Helper()
	return api.clientset(t).CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).
		SubResource(sub).VersionedParams(opts, scheme.ParameterCodec).URL()
}

// TestExec: client-go's executors over each transport get the command's
// output, give it input, resize its terminal, and get its exit code as
// kubectl does (exec.CodeExitError).
func TestExec(t *testing.T) {
	fake := &fakeExec{}
	api := newTestAPI(t, Config{Exec: fake.exec})
	api.store.SetPod(runningPod("default", "web", "app"))
	api.store.SetPod(runningPod("default", "two", "a", "b"))
	cases := []struct {
		name       string
		pod        string
		opts       v1.PodExecOptions
		stdin      string
		wantOut    string
		wantErrOut string
		wantCode   int
		wantID     string
		// closesStdin: the command runs until its input ends, which v4
		// over WebSocket cannot say (v5's CLOSE signal can).
		closesStdin bool
	}{
		{name: "streams", closesStdin: true, pod: "web", opts: v1.PodExecOptions{Command: []string{"io"}, Stdin: true, Stdout: true, Stderr: true},
			stdin: "hello", wantOut: "hello", wantErrOut: "err", wantID: "id-app"},
		{name: "exit code", pod: "web", opts: v1.PodExecOptions{Command: []string{"exit", "3"}, Stdout: true, Stderr: true},
			wantCode: 3, wantID: "id-app"},
		{name: "tty resized", pod: "web", opts: v1.PodExecOptions{Command: []string{"size"}, Stdout: true, TTY: true},
			wantOut: "132x43", wantID: "id-app"},
		{name: "container named", pod: "two", opts: v1.PodExecOptions{Container: "b", Command: []string{"exit", "0"}, Stdout: true},
			wantID: "id-b"},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			if tc.closesStdin && tr.name == "websocket v4" {
				continue
			}
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				ex, err := tr.new(api.config, streamURL(t, api, "default", tc.pod, "exec", &tc.opts))
				if err != nil {
					t.Fatal(err)
				}
				var out, errOut bytes.Buffer
				so := clientremote.StreamOptions{Tty: tc.opts.TTY}
				if tc.opts.Stdin {
					so.Stdin = strings.NewReader(tc.stdin)
				}
				if tc.opts.Stdout {
					so.Stdout = &out
				}
				if tc.opts.Stderr {
					so.Stderr = &errOut
				}
				if tc.opts.TTY {
					so.TerminalSizeQueue = &sizes{}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err = ex.StreamWithContext(ctx, so)
				var exitErr exec.CodeExitError
				switch {
				case tc.wantCode != 0:
					if !errors.As(err, &exitErr) || exitErr.Code != tc.wantCode {
						t.Fatalf("exec = %v (%T), want exit code %d", err, err, tc.wantCode)
					}
				case err != nil:
					t.Fatalf("exec: %v", err)
				}
				if out.String() != tc.wantOut || errOut.String() != tc.wantErrOut {
					t.Errorf("stdout %q, stderr %q; want %q, %q", out.String(), errOut.String(), tc.wantOut, tc.wantErrOut)
				}
				fake.mu.Lock()
				last := fake.ids[len(fake.ids)-1]
				fake.mu.Unlock()
				if last != tc.wantID {
					t.Errorf("ran in container %q, want %q", last, tc.wantID)
				}
			})
		}
	}
}

// TestExecRefused: the apiserver's and the kubelet's answers to a pod
// or container that cannot be exec'd in, as client-go reports them.
func TestExecRefused(t *testing.T) {
	api := newTestAPI(t, Config{Exec: (&fakeExec{}).exec})
	api.store.SetPod(runningPod("default", "two", "a", "b"))
	stopped := runningPod("default", "stopped", "app")
	stopped.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	api.store.SetPod(stopped)
	cases := []struct {
		name, pod string
		opts      v1.PodExecOptions
		want      string
	}{
		{"no container", "two", v1.PodExecOptions{Command: []string{"true"}, Stdout: true},
			"a container name must be specified for pod two, choose one of: [a b]"},
		{"unknown container", "two", v1.PodExecOptions{Container: "c", Command: []string{"true"}, Stdout: true},
			"container c is not valid for pod two"},
		{"no pod", "none", v1.PodExecOptions{Command: []string{"true"}, Stdout: true}, `pods "none" not found`},
		{"not running", "stopped", v1.PodExecOptions{Command: []string{"true"}, Stdout: true}, `container not found ("app")`},
	}
	for _, tr := range transports {
		for _, tc := range cases {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				ex, err := tr.new(api.config, streamURL(t, api, "default", tc.pod, "exec", &tc.opts))
				if err != nil {
					t.Fatal(err)
				}
				err = ex.StreamWithContext(context.Background(), clientremote.StreamOptions{Stdout: io.Discard})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("exec = %v, want an error saying %q", err, tc.want)
				}
			})
		}
	}
}

// attachLogs serves a fixed log, recording the options it was opened
// with.
type attachLogs struct {
	mu   sync.Mutex
	opts []status.LogOptions
}

func (f *attachLogs) open(_ context.Context, pod, container string, opts status.LogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	f.opts = append(f.opts, opts)
	f.mu.Unlock()
	return io.NopCloser(strings.NewReader("from " + pod + "/" + container + "\n")), nil
}

// TestAttach: attach follows the container's log from its end; stdin is
// ignored for a container that has none, and refused for one that asks
// for it, since staticlet keeps no container's input open.
func TestAttach(t *testing.T) {
	logs := &attachLogs{}
	api := newTestAPI(t, Config{Logs: logs.open})
	api.store.SetPod(runningPod("default", "web", "app"))
	interactive := runningPod("default", "shell", "sh")
	interactive.Spec.Containers[0].Stdin = true
	api.store.SetPod(interactive)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			opts := &v1.PodAttachOptions{Stdin: true, Stdout: true}
			ex, err := tr.new(api.config, streamURL(t, api, "default", "web", "attach", opts))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := ex.StreamWithContext(context.Background(), clientremote.StreamOptions{Stdin: strings.NewReader("ignored"), Stdout: &out}); err != nil {
				t.Fatalf("attach: %v", err)
			}
			if want := "from default/web/app\n"; out.String() != want {
				t.Errorf("attach got %q, want %q", out.String(), want)
			}
			logs.mu.Lock()
			got := logs.opts[len(logs.opts)-1]
			logs.mu.Unlock()
			if want := (status.LogOptions{Follow: true}); got != want {
				t.Errorf("log opened with %+v, want %+v", got, want)
			}

			ex, err = tr.new(api.config, streamURL(t, api, "default", "shell", "attach", opts))
			if err != nil {
				t.Fatal(err)
			}
			err = ex.StreamWithContext(context.Background(), clientremote.StreamOptions{Stdin: strings.NewReader("x"), Stdout: io.Discard})
			if want := "staticlet does not keep containers' input open"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("attach with stdin = %v, want an error saying %q", err, want)
			}
		})
	}
}

// TestStreamDiscovery: discovery lists the streaming subresources with
// the apiserver's verbs and kinds.
func TestStreamDiscovery(t *testing.T) {
	api := newTestAPI(t, Config{})
	list, err := api.clientset(t).Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pods/exec": "PodExecOptions", "pods/attach": "PodAttachOptions", "pods/portforward": "PodPortForwardOptions"}
	for _, r := range list.APIResources {
		if kind, ok := want[r.Name]; ok {
			if r.Kind != kind || !equalStrings(r.Verbs, metav1.Verbs{"create", "get"}) {
				t.Errorf("%s: kind %s, verbs %v; want %s, [create get]", r.Name, r.Kind, r.Verbs, kind)
			}
			delete(want, r.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("discovery lacks %v", want)
	}
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// eofSignal is a reader that closes done when r is read to its end.
type eofSignal struct {
	r    io.Reader
	done chan struct{}
	once sync.Once
}

func (e *eofSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}

// TestAttachDropsStdin: the input a client sends when attaching with
// stdin to a container that has none is read and dropped, however much
// there is, so that it never holds the session up.
func TestAttachDropsStdin(t *testing.T) {
	logR, logW := io.Pipe()
	defer logW.Close()
	open := func(context.Context, string, string, status.LogOptions) (io.ReadCloser, error) { return logR, nil }
	api := newTestAPI(t, Config{Logs: open})
	api.store.SetPod(runningPod("default", "web", "app"))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ex, err := tr.new(api.config, streamURL(t, api, "default", "web", "attach", &v1.PodAttachOptions{Stdin: true, Stdout: true}))
			if err != nil {
				t.Fatal(err)
			}
			in := &eofSignal{r: bytes.NewReader(make([]byte, 16<<20)), done: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			attached := make(chan error, 1)
			go func() {
				attached <- ex.StreamWithContext(ctx, clientremote.StreamOptions{Stdin: in, Stdout: io.Discard})
			}()
			select {
			case <-in.done:
			case err := <-attached:
				t.Fatalf("attach ended before its input was sent: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("16 MiB of input not taken in 20s")
			}
			cancel()
			<-attached
		})
	}
}
