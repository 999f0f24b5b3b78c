package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

func TestExec(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/exec.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: exec
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
    workingDir: /tmp
    env: [{name: FOO, value: bar}, {name: TERM, value: dumb}]
    securityContext: {runAsUser: 65534, runAsGroup: 65534}
`, idleScript))
	sb := h.sandbox(p)
	c := h.start(p, sb, "c", 0)

	tests := []struct {
		name     string
		cmd      []string
		timeout  time.Duration
		wantCode int
		wantOut  string // the output, or with a trailing "..." its start
		wantErr  error
	}{
		{"exit code and output", []string{"sh", "-c", "echo out; sleep 0.1; echo err >&2; exit 3"}, 0, 3, "out\nerr\n", nil},
		{"as the container runs", []string{"sh", "-c", `echo "$FOO $(id -u):$(id -g) $(pwd)"`}, time.Minute, 0, "bar 65534:65534 /tmp\n", nil},
		{"output cut at the limit", []string{"sh", "-c", "yes | head -c 100000"}, time.Minute, 0, strings.Repeat("y\n", ExecOutputLimit/2), nil},
		{"timeout", []string{"sh", "-c", "echo started; exec sleep 30"}, time.Second, -1, "started\n", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := h.rt.Exec(h.ctx(), c.ID, tt.cmd, tt.timeout)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr != nil) != (err != nil) {
				t.Fatalf("Exec(%q) error = %v, want %v", tt.cmd, err, tt.wantErr)
			}
			if res.ExitCode != tt.wantCode || string(res.Output) != tt.wantOut {
				t.Errorf("Exec(%q) = exit %d, output %.80q (%d bytes); want exit %d, output %.80q", tt.cmd, res.ExitCode, res.Output, len(res.Output), tt.wantCode, tt.wantOut)
			}
			if tt.timeout > 0 && time.Since(start) > tt.timeout+killWait {
				t.Errorf("Exec(%q) took %s, want it ended soon after its timeout %s", tt.cmd, time.Since(start), tt.timeout)
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(h.ctx(), 2*time.Second)
		defer cancel()
		if _, err := h.rt.Exec(ctx, c.ID, []string{"sleep", "30"}, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Exec with an ending context = %v, want the context's error", err)
		}
	})
	t.Run("no such command", func(t *testing.T) {
		res, err := h.rt.Exec(h.ctx(), c.ID, []string{"/nonexistent"}, time.Minute)
		if err == nil && res.ExitCode == 0 {
			t.Errorf("Exec(/nonexistent) = %+v, nil; want a failure", res)
		}
	})
	// Nothing is left of the execs killed: the container runs on alone.
	h.waitNoExec(c.ID, "sleep 30")

	t.Run("streams", func(t *testing.T) { testExecStream(t, h, c.ID) })
}

// waitNoExec waits until no process of container id's task runs cmd.
func (h *harness) waitNoExec(id, cmd string) {
	h.t.Helper()
	c, err := h.client.LoadContainer(h.nsCtx(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	task, err := c.Task(h.nsCtx(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	waitFor(h.t, 10*time.Second, "the exec'd "+cmd+" to go", func() (bool, string) {
		procs, err := task.Pids(h.nsCtx())
		if err != nil {
			return false, err.Error()
		}
		for _, p := range procs {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid)); strings.Join(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), " ") == cmd {
				return false, fmt.Sprintf("process %d runs %s", p.Pid, cmd)
			}
		}
		return true, ""
	})
}

// TestStopSignal checks which signal StopContainer sends: the image's
// STOPSIGNAL, lifecycle.stopSignal over it, SIGTERM when neither is set.
// Each container exits with its own code on the signal it should get and
// ignores the others.
func TestStopSignal(t *testing.T) {
	h := newHarness(t)
	h.env.ImportImageWith(t, testNS, testimage.Options{Ref: "localhost/busybox:usr1", StopSignal: "SIGUSR1"})
	script := func(sig string, code int) string {
		return fmt.Sprintf("trap '' TERM USR1 USR2; trap 'exit %d' %s; : > %s; while true; do sleep 1 & wait $!; done", code, sig, trappedFile)
	}
	p := h.decode("/m/signal.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: signal
spec:
  os: {name: linux}
  containers:
  - name: image
    image: localhost/busybox:usr1
    command: [/bin/sh, -c, %q]
  - name: field
    image: localhost/busybox:usr1
    command: [/bin/sh, -c, %q]
    lifecycle: {stopSignal: SIGUSR2}
  - name: default
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
`, script("USR1", 7), script("USR2", 8), script("TERM", 9)))
	sb := h.sandbox(p)
	tests := []struct {
		container string
		label     string
		code      uint32
	}{
		{"image", "SIGUSR1", 7},
		{"field", "SIGUSR2", 8},
		{"default", "SIGTERM", 9},
	}
	for _, tt := range tests {
		t.Run(tt.container, func(t *testing.T) {
			h := *h
			h.t = t
			c := h.start(p, sb, tt.container, 0)
			waitTrapped(t, c.Pid)
			ctr, err := h.client.LoadContainer(h.nsCtx(), c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if labels, err := ctr.Labels(h.nsCtx()); err != nil || labels[LabelStopSignal] != tt.label {
				t.Errorf("label %s = %q, %v; want %q", LabelStopSignal, labels[LabelStopSignal], err, tt.label)
			}
			const grace = 20 * time.Second
			start := time.Now()
			if err := h.rt.StopContainer(h.ctx(), c.ID, grace); err != nil {
				t.Fatalf("StopContainer: %v", err)
			}
			if elapsed := time.Since(start); elapsed >= grace/2 {
				t.Errorf("StopContainer took %s: the signal was not %s", elapsed, tt.label)
			}
			st, err := h.taskStatus(c.ID)
			if err != nil || st.Status != client.Stopped || st.ExitStatus != tt.code {
				t.Errorf("task after StopContainer = %+v, %v; want exit %d, the trap of %s", st, err, tt.code, tt.label)
			}
		})
	}
}

// TestRunHook runs exec and httpGet hooks against a pod on its own network,
// where the httpGet goes to 127.0.0.1 inside the pod's namespace.
func TestRunHook(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/hook.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: hook
spec:
  containers:
  - name: web
    image: localhost/busybox:test
    command: [httpd, -f, -p, "8080", -h, /var/www]
    ports: [{name: http, containerPort: 8080}]
`)
	sb := h.sandbox(p)
	c := h.start(p, sb, "web", 0)
	req := h.request(p, sb, "web", 0)
	get := func(port intstr.IntOrString, path string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: port, Path: path, Scheme: v1.URISchemeHTTP}}
	}
	exec := func(cmd string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", cmd}}}
	}
	waitFor(t, 10*time.Second, "httpd to listen in the pod", func() (bool, string) {
		err := h.rt.RunHook(h.ctx(), c.ID, req, get(intstr.FromInt32(8080), "/index.html"))
		return err == nil, fmt.Sprint(err)
	})
	tests := []struct {
		name    string
		h       *v1.LifecycleHandler
		wantErr string // empty for success
	}{
		{"named port", get(intstr.FromString("http"), "/index.html"), ""},
		{"not found", get(intstr.FromString("http"), "/missing"), "HTTP status 404"},
		{"nothing listening", get(intstr.FromInt32(8081), "/"), "refused"},
		{"unknown port name", get(intstr.FromString("https"), "/"), `unable to find port "https"`},
		{"exec", exec("test -f /var/www/index.html"), ""},
		{"failing exec", exec("echo oops; exit 2"), "command 'sh -c echo oops; exit 2' exited with 2: oops"},
		{"sleep is the caller's", &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}, "invalid handler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.rt.RunHook(h.ctx(), c.ID, req, tt.h)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("RunHook = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestHookHTTPGet checks the request an httpGet hook of a hostNetwork pod
// sends, against servers on the host's loopback: no container is needed.
func TestHookHTTPGet(t *testing.T) {
	var (
		mu   sync.Mutex
		last *http.Request
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r
		mu.Unlock()
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/fail":
			http.Error(w, "no", http.StatusInternalServerError)
		}
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()
	portOf := func(s *httptest.Server) int32 {
		_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
		n, _ := strconv.Atoi(port)
		return int32(n)
	}
	p := &pod.Pod{Pod: &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}}
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: portOf(plain)}}}
	req := pod.ContainerRequest{Pod: p, Container: c}
	rt := &Runtime{}

	tests := []struct {
		name     string
		get      v1.HTTPGetAction
		wantErr  string
		wantPath string
		check    func(*http.Request) string
	}{
		{"headers", v1.HTTPGetAction{Path: "/hook?x=1", Port: intstr.FromString("web"), Scheme: v1.URISchemeHTTP,
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: "pre"}, {Name: "Host", Value: "example.test"}}}, "", "/hook",
			func(r *http.Request) string {
				if r.Header.Get("X-Hook") != "pre" || r.Host != "example.test" || r.URL.RawQuery != "x=1" || !strings.HasPrefix(r.UserAgent(), "kube-lifecycle") {
					return fmt.Sprintf("header X-Hook %q, Host %q, query %q, User-Agent %q", r.Header.Get("X-Hook"), r.Host, r.URL.RawQuery, r.UserAgent())
				}
				return ""
			}},
		{"https without verification", v1.HTTPGetAction{Path: "/tls", Port: intstr.FromInt32(portOf(secure)), Scheme: v1.URISchemeHTTPS}, "", "/tls", nil},
		{"a redirect is success", v1.HTTPGetAction{Path: "/redirect", Port: intstr.FromInt32(portOf(plain)), Scheme: v1.URISchemeHTTP}, "", "/redirect", nil},
		{"server error", v1.HTTPGetAction{Path: "/fail", Port: intstr.FromInt32(portOf(plain)), Scheme: v1.URISchemeHTTP}, "HTTP status 500", "/fail", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := rt.RunHook(ctx, "", req, &v1.LifecycleHandler{HTTPGet: &tt.get})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("RunHook = %v, want %q", err, tt.wantErr)
			}
			mu.Lock()
			r := last
			last = nil
			mu.Unlock()
			if r == nil || r.URL.Path != tt.wantPath {
				t.Fatalf("request = %v, want GET %s", r, tt.wantPath)
			}
			if tt.check != nil {
				if msg := tt.check(r); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}
