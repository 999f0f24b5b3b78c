package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	osexec "os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	//lint:ignore SA1019 client-go v0.37 still dials and fails in apimachinery's httpstream types
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// loopbackServerPod serves "hello from the pod" on 127.0.0.1:8080 inside
// its network namespace only.
const loopbackServerPod = `apiVersion: v1
kind: Pod
metadata:
  name: lo
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "mkdir -p /www && echo hello from the pod > /www/index.html && trap 'exit 0' TERM; httpd -f -p 127.0.0.1:8080 -h /www & wait"]
`

// firstLine is a writer that closes got once it has been written a
// whole line.
type firstLine struct {
	buf  harness.SyncBuffer
	got  chan struct{}
	once sync.Once
}

func (f *firstLine) Write(p []byte) (int, error) {
	n, err := f.buf.Write(p)
	if strings.Contains(f.buf.String(), "\n") {
		f.once.Do(func() { close(f.got) })
	}
	return n, err
}

// kubectlExecutor is the executor kubectl exec uses: WebSocket (v5)
// first, SPDY when the upgrade fails.
func kubectlExecutor(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor {
	t.Helper()
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestKubeAPIExecAndPortForward: through the API, with the kubeconfig
// staticlet prints, client-go runs commands in a real container as
// kubectl exec does (output, input ended by the v5 CLOSE signal, the exit
// code), forwards a local port to a server that listens on 127.0.0.1
// inside the pod, as kubectl port-forward does, and attaches to a
// container's output from now on.
func TestKubeAPIExecAndPortForward(t *testing.T) {
	e := harness.NewEnv(t)
	d, cfg, _ := startWithAPI(t, e)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Write("lo.yaml", loopbackServerPod)
	e.Write("ticker.yaml", tickerPod)
	name := "lo-" + harness.TestNode
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	harness.WaitFor(t, 60*time.Second, "the pod running, through the API", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return harness.Running(p), harness.Describe(p)
	})
	execURL := func(opts *v1.PodExecOptions) *url.URL {
		return cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(name).
			SubResource("exec").VersionedParams(opts, scheme.ParameterCodec).URL()
	}

	// Output on both streams and the exit code.
	var out, errOut bytes.Buffer
	err = kubectlExecutor(t, cfg, execURL(&v1.PodExecOptions{
		Command: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}, Stdout: true, Stderr: true,
	})).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	var exitErr exec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 7 {
		t.Errorf("exec exit 7 = %v (%T), want exit code 7", err, err)
	}
	if out.String() != "out\n" || errOut.String() != "err\n" {
		t.Errorf("exec output %q, %q; want %q, %q", out.String(), errOut.String(), "out\n", "err\n")
	}

	// Input that ends: cat exits when the client's stdin does.
	out.Reset()
	err = kubectlExecutor(t, cfg, execURL(&v1.PodExecOptions{Command: []string{"cat"}, Stdin: true, Stdout: true})).
		StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("to cat\n"), Stdout: &out})
	if err != nil || out.String() != "to cat\n" {
		t.Errorf("exec cat = %q, %v; want %q", out.String(), err, "to cat\n")
	}

	// Port forwarding, as kubectl: SPDY in a WebSocket, SPDY as fallback.
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(name).SubResource("portforward").URL()
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dialer := portforward.NewFallbackDialer(tunnel, spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u),
		func(err error) bool { return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) })
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	defer func() {
		close(stop)
		<-done
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port forwarding ended: %v", err)
	case <-ctx.Done():
		t.Fatal("port forwarding not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	local := fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
	// The server is on the pod's loopback, not the host's.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:8080", time.Second); err == nil {
		c.Close()
		t.Log("something listens on the host's 127.0.0.1:8080 too; the check below still goes through the pod")
	}
	client := &http.Client{Timeout: 20 * time.Second}
	for range 2 {
		resp, err := client.Get("http://" + local + "/")
		if err != nil {
			t.Fatalf("GET through the forwarded port: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello from the pod\n" {
			t.Fatalf("GET through the forwarded port = %q, %v; want %q", body, err, "hello from the pod\n")
		}
	}

	// Attach: the ticker's lines from now on, not those already logged.
	ticker := "ticker-" + harness.TestNode
	harness.WaitFor(t, 60*time.Second, "the ticker running and ticking", func() (bool, string) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, ticker, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		logs, _ := d.CLI("logs", ticker)
		return harness.Running(p) && strings.Contains(logs, "tick 3\n"), harness.Describe(p)
	})
	u = cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(ticker).
		SubResource("attach").VersionedParams(&v1.PodAttachOptions{Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	w := &firstLine{got: make(chan struct{})}
	attached := make(chan error, 1)
	go func() {
		attached <- kubectlExecutor(t, cfg, u).StreamWithContext(actx, remotecommand.StreamOptions{Stdout: w, Stderr: w})
	}()
	select {
	case <-w.got:
	case err := <-attached:
		t.Fatalf("attach ended before a line: %v (got %q)", err, w.buf.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("attach: no line in 30s (got %q)", w.buf.String())
	}
	acancel()
	<-attached
	if first := w.buf.String(); !strings.HasPrefix(first, "tick ") || strings.HasPrefix(first, "tick 1\n") {
		t.Errorf("attach began with %q, want a later tick than the first", first)
	}
}

// TestKubectlExecAndPortForward drives a real kubectl 1.30: exec keeps the
// command's exit code and passes piped input, and port-forward reaches a
// server listening on 127.0.0.1 inside the pod.
func TestKubectlExecAndPortForward(t *testing.T) {
	e := harness.NewEnv(t)
	d, _, kubeconfig := startWithAPI(t, e)
	k := kubectl{t: t, bin: kubetools.Kubectl(t), kubeconfig: kubeconfig}
	e.Write("web.yaml", kubectlPod)
	web := "web-" + harness.TestNode
	d.WaitPod(web, 60*time.Second, "web running", harness.Running)

	out, err := k.run("exec", web, "--", "sh", "-c", "echo out; exit 3")
	var exitErr *osexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 || !strings.Contains(out, "out\n") {
		t.Errorf("kubectl exec ... exit 3 = %v, output %q; want exit status 3 and out", err, out)
	}
	cmd := osexec.Command(k.bin, "--kubeconfig", kubeconfig, "exec", "-i", web, "--", "cat")
	cmd.Stdin = strings.NewReader("piped\n")
	if b, err := cmd.CombinedOutput(); err != nil || string(b) != "piped\n" {
		t.Errorf("kubectl exec -i ... cat = %q, %v; want %q", b, err, "piped\n")
	}

	// exec -it on a terminal: a shell, its answer, a resize, its exit code.
	term := openPTY(t)
	term.setSize(t, 30, 100)
	sh := osexec.Command(k.bin, "--kubeconfig", kubeconfig, "exec", "-it", web, "--", "sh")
	sh.Stdin, sh.Stdout, sh.Stderr = term.slave, term.slave, term.slave
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	done := startCmd(t, sh)
	term.waitFor(t, "the shell's prompt", regexp.MustCompile(`[#$] `))
	term.typeIn(t, "echo $((6*7)); stty size\r")
	term.waitFor(t, "the shell's answer and the terminal's size", regexp.MustCompile(`\r\n42\r\n30 100\r\n`))
	term.typeIn(t, "exit 5\r")
	if code := waitExit(t, sh, done); code != 5 {
		t.Errorf("kubectl exec -it ... sh after exit 5 exited %d, want 5; terminal: %q", code, lastBytes(term.out.String(), 300))
	}

	pf := osexec.Command(k.bin, "--kubeconfig", kubeconfig, "port-forward", "pod/"+web, "--address", "127.0.0.1", ":8080")
	pfOut := &harness.SyncBuffer{}
	pf.Stdout, pf.Stderr = pfOut, pfOut
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = pf.Process.Kill()
		_ = pf.Wait()
	}()
	var local string
	harness.WaitFor(t, 30*time.Second, "kubectl port-forward listening", func() (bool, string) {
		for line := range strings.SplitSeq(pfOut.String(), "\n") {
			if from, ok := strings.CutPrefix(line, "Forwarding from "); ok {
				local, _, _ = strings.Cut(from, " ->")
				return true, ""
			}
		}
		return false, pfOut.String()
	})
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Get("http://" + local + "/")
	if err != nil {
		t.Fatalf("GET through kubectl port-forward: %v\n%s", err, pfOut.String())
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "hello from web\n" {
		t.Errorf("GET through kubectl port-forward = %q, %v; want %q", body, err, "hello from web\n")
	}
}
