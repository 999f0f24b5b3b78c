package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticlet/staticlet/internal/pod"
)

// fakeRuntime answers Exec from a function and dials the host for DialPod,
// counting the calls.
type fakeRuntime struct {
	exec  func(cmd []string, timeout time.Duration) (int, []byte, error)
	dials chan string
}

func (f *fakeRuntime) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	return f.exec(cmd, timeout)
}

func (f *fakeRuntime) DialPod(ctx context.Context, id, sandboxID, network, addr string) (net.Conn, error) {
	if f.dials != nil {
		f.dials <- addr
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// hostPort splits a test server's address.
func hostPort(t testing.TB, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// targetFor is a probe target of container c in a pod on the host network
// or not.
func targetFor(c *v1.Container, hostNetwork bool) pod.ProbeTarget {
	p := &pod.Pod{Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: v1.PodSpec{HostNetwork: hostNetwork}}}
	return pod.ProbeTarget{Pod: p, Container: c, ContainerID: "c1", SandboxID: "sb1", StartedAt: time.Now()}
}

func run(t *testing.T, rt Runtime, tg pod.ProbeTarget, pr *v1.Probe) (string, error) {
	t.Helper()
	chk, err := newCheck(rt, tg, pr)
	if err != nil {
		return "", err
	}
	// The worker bounds each run by the probe's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), timeoutOf(pr))
	defer cancel()
	return chk(ctx)
}

func TestHTTPGet(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/moved-bad", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/missing", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/x", http.StatusFound)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "example.test" || r.Header.Get("X-Probe") != "yes" || !strings.HasPrefix(r.UserAgent(), "kube-probe/") {
			http.Error(w, fmt.Sprintf("host %q x-probe %q ua %q", r.Host, r.Header.Get("X-Probe"), r.UserAgent()), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tls := httptest.NewTLSServer(mux)
	defer tls.Close()
	_, port := hostPort(t, srv.Listener.Addr().String())
	_, tlsPort := hostPort(t, tls.Listener.Addr().String())

	tests := []struct {
		name    string
		get     v1.HTTPGetAction
		pod     bool // dial in the pod's namespace, not on the host network
		wantErr string
		warning string
	}{
		{name: "200", get: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(port)}},
		{name: "404", get: v1.HTTPGetAction{Path: "/missing", Port: intstr.FromInt(port)}, wantErr: "HTTP probe failed with statuscode: 404"},
		{name: "named port", get: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}},
		{name: "unknown named port", get: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("nope")}, wantErr: `unable to find port "nope"`},
		{name: "same-host redirect followed", get: v1.HTTPGetAction{Path: "/moved", Port: intstr.FromInt(port)}},
		{name: "same-host redirect to a failure", get: v1.HTTPGetAction{Path: "/moved-bad", Port: intstr.FromInt(port)}, wantErr: "statuscode: 404"},
		{name: "redirect loop", get: v1.HTTPGetAction{Path: "/loop", Port: intstr.FromInt(port)}, wantErr: "stopped after 10 redirects"},
		{name: "other-host redirect warns", get: v1.HTTPGetAction{Path: "/away", Port: intstr.FromInt(port)}, warning: "Probe terminated redirects"},
		{name: "headers", get: v1.HTTPGetAction{Path: "/headers", Port: intstr.FromInt(port),
			HTTPHeaders: []v1.HTTPHeader{{Name: "Host", Value: "example.test"}, {Name: "X-Probe", Value: "yes"}}}},
		{name: "https without verification", get: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(tlsPort), Scheme: v1.URISchemeHTTPS}},
		{name: "in the pod's namespace", get: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(port)}, pod: true},
		{name: "explicit host", get: v1.HTTPGetAction{Host: "127.0.0.1", Path: "/ok", Port: intstr.FromInt(port)}, pod: true},
		{name: "timeout", get: v1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt(port)}, wantErr: "deadline exceeded"},
		{name: "refused", get: v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(1)}, wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
			rt := &fakeRuntime{dials: make(chan string, 20)}
			pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &tt.get}, TimeoutSeconds: 1}
			warning, err := run(t, rt, targetFor(c, !tt.pod), pr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("probe = %v, want error containing %q", err, tt.wantErr)
			}
			if !strings.HasPrefix(warning, tt.warning) || (tt.warning == "") != (warning == "") {
				t.Errorf("warning = %q, want %q", warning, tt.warning)
			}
			podDials := len(rt.dials)
			if want := tt.pod && tt.get.Host == ""; want != (podDials > 0) {
				t.Errorf("%d dials in the pod's namespace, want some: %v", podDials, want)
			}
		})
	}
}

func TestTCPSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port := hostPort(t, ln.Addr().String())
	c := &v1.Container{Name: "app"}
	pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(port)}}}
	if _, err := run(t, &fakeRuntime{}, targetFor(c, true), pr); err != nil {
		t.Errorf("tcpSocket on a listening port = %v, want success", err)
	}
	ln.Close()
	if _, err := run(t, &fakeRuntime{}, targetFor(c, true), pr); err == nil {
		t.Errorf("tcpSocket on a closed port succeeded")
	}
}

func TestGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := grpchealth.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	go srv.Serve(ln)
	defer srv.Stop()
	bare := grpc.NewServer() // no health service
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go bare.Serve(ln2)
	defer bare.Stop()
	_, port := hostPort(t, ln.Addr().String())
	_, port2 := hostPort(t, ln2.Addr().String())
	svc := func(s string) *string { return &s }
	tests := []struct {
		name    string
		port    int
		service *string
		wantErr string
	}{
		{"serving", port, nil, ""},
		{"not serving", port, svc("db"), `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", port, svc("nope"), "NotFound"},
		{"no health service", port2, nil, "does not implement the grpc health protocol"},
		{"refused", 1, nil, "health rpc probe failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(tt.port), Service: tt.service}}}
			_, err := run(t, &fakeRuntime{}, targetFor(&v1.Container{Name: "app"}, true), pr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("grpc probe = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestExec(t *testing.T) {
	tests := []struct {
		name    string
		code    int
		out     string
		err     error
		wantErr string
	}{
		{name: "exit 0"},
		{name: "exit 1 with output", code: 1, out: "not ok\n", wantErr: "not ok"},
		{name: "exit 2 silent", code: 2, wantErr: `command "check" exited with 2`},
		{name: "timeout", err: fmt.Errorf("exec: %w", context.DeadlineExceeded), wantErr: `command "check" timed out`},
		{name: "runtime error", err: errors.New("no such container"), wantErr: "no such container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotTimeout time.Duration
			rt := &fakeRuntime{exec: func(cmd []string, timeout time.Duration) (int, []byte, error) {
				gotTimeout = timeout
				return tt.code, []byte(tt.out), tt.err
			}}
			pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, TimeoutSeconds: 3}
			_, err := run(t, rt, targetFor(&v1.Container{Name: "app"}, false), pr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("exec probe = %v, want error containing %q", err, tt.wantErr)
			}
			if gotTimeout != 3*time.Second {
				t.Errorf("exec timeout = %v, want 3s", gotTimeout)
			}
		})
	}
}

func TestHTTPGetBodyLimit(t *testing.T) {
	// A redirect elsewhere warns with the body, read up to bodyLimit, and
	// each run of a check with the body of its own response.
	var size atomic.Int64
	body := func(n int) string {
		if n == 0 {
			return ""
		}
		return strings.Repeat("x", n-1) + "y"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://elsewhere.test/")
		w.WriteHeader(http.StatusFound)
		fmt.Fprint(w, body(int(size.Load())))
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.Listener.Addr().String())
	pr := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port)}}}
	chk, err := newCheck(&fakeRuntime{}, targetFor(&v1.Container{Name: "app"}, true), pr)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "Probe terminated redirects, Response body: "
	for _, n := range []int{bodyLimit + 100, 3, 0} {
		size.Store(int64(n))
		warning, err := chk(t.Context())
		if err != nil {
			t.Fatalf("body of %d: %v", n, err)
		}
		want := body(n)[:min(n, bodyLimit)]
		if warning != prefix+want {
			t.Errorf("body of %d: warning of %d bytes %.60q..., want %d bytes of body", n, len(warning), warning, len(want))
		}
	}
}
