package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// podServer serves manifests on 127.0.0.1 as a static web server would,
// with an ETag, and counts requests and bodies sent. It can be stopped and
// started again on the same address.
type podServer struct {
	t    *testing.T
	addr string
	srv  *httptest.Server

	mu       sync.Mutex
	body     string
	requests int
	bodies   int
	auth     string // the last Authorization header
}

func newPodServer(t *testing.T, body string) *podServer {
	t.Helper()
	s := &podServer{t: t, body: body}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *podServer) url() string { return "http://" + s.addr + "/pods" }

func (s *podServer) start() {
	s.t.Helper()
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatalf("listening on %s: %v", addr, err)
	}
	s.addr = l.Addr().String()
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Listener = l
	s.srv.Start()
}

func (s *podServer) stop() {
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.auth = r.Header.Get("Authorization")
	sum := sha256.Sum256([]byte(s.body))
	tag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", tag)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.bodies++
	io.WriteString(w, s.body)
}

func (s *podServer) set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

func (s *podServer) counts() (requests, bodies int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.bodies
}

// urlManifest returns the result of the URL source from the status API.
func urlManifest(d *harness.Daemon, url string) status.Manifest {
	d.T.Helper()
	ms, err := d.Client().Manifests(d.T.Context())
	if err != nil {
		d.T.Fatal(err)
	}
	for _, m := range ms {
		if m.Path == url {
			return m
		}
	}
	return status.Manifest{}
}

// waitURLPods waits until the URL's result lists exactly pods, within about
// one check period (1s, plus time for the request).
func waitURLPods(d *harness.Daemon, url string, pods ...string) {
	d.T.Helper()
	want := strings.Join(pods, ",")
	harness.WaitFor(d.T, 3*time.Second, "the URL's pods to be "+want, func() (bool, string) {
		m := urlManifest(d, url)
		got := strings.Join(slices.Sorted(slices.Values(m.Pods)), ",")
		return got == want && m.Error == "", got + " " + m.Error
	})
}

// TestURLSource runs pods from a URL: they are added, changed and removed
// as the URL's content changes; an unchanged URL costs no body; a server
// that goes away for several periods leaves every pod alone and shows the
// error; when it comes back, changes apply again.
func TestURLSource(t *testing.T) {
	e := harness.NewEnv(t)
	srv := newPodServer(t, harness.SleeperPod("web", "first", true))
	args := []string{"--manifest-url", srv.url(), "--http-check-frequency", "1s",
		"--manifest-url-header", "Authorization: Bearer s3cr3t-e2e"}
	d := e.Start(args...)
	web := "web-" + harness.TestNode
	extra := "extra-" + harness.TestNode

	p := d.WaitPod(web, 30*time.Second, "web running from the URL", harness.Running)
	if p.Annotations["kubernetes.io/config.source"] != "http" {
		t.Errorf("config.source annotation %q, want http", p.Annotations["kubernetes.io/config.source"])
	}
	srv.mu.Lock()
	auth := srv.auth
	srv.mu.Unlock()
	if auth != "Bearer s3cr3t-e2e" {
		t.Errorf("server got Authorization %q, want the header given", auth)
	}

	// Add a pod: a second YAML document.
	srv.set(harness.SleeperPod("web", "first", true) + "---\n" + harness.SleeperPod("extra", "x", true))
	waitURLPods(d, srv.url(), "default/"+extra, "default/"+web)
	d.WaitPod(extra, 30*time.Second, "extra running", harness.Running)

	// Change a pod: its container is replaced.
	oldID := p.Status.ContainerStatuses[0].ContainerID
	srv.set(harness.SleeperPod("web", "second", true) + "---\n" + harness.SleeperPod("extra", "x", true))
	p = d.WaitPod(web, 30*time.Second, "web's new container running", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].ContainerID != oldID
	})
	pid, err := e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	waitArgs(t, pid, "second")

	// Remove a pod.
	srv.set(harness.SleeperPod("web", "second", true))
	waitURLPods(d, srv.url(), "default/"+web)
	harness.WaitFor(t, 30*time.Second, "extra gone", func() (bool, string) {
		_, err := d.Pod(extra)
		return err != nil, "still listed"
	})

	// Unchanged: ten polls, no body.
	req0, bodies0 := srv.counts()
	harness.WaitFor(t, 30*time.Second, "ten more polls", func() (bool, string) {
		req, _ := srv.counts()
		return req >= req0+10, ""
	})
	if req, bodies := srv.counts(); bodies != bodies0 {
		t.Errorf("%d polls of an unchanged URL sent %d bodies, want none", req-req0, bodies-bodies0)
	}

	// The server goes away for more than five periods.
	webID, restarts := p.Status.ContainerStatuses[0].ContainerID, p.Status.ContainerStatuses[0].RestartCount
	srv.stop()
	harness.WaitFor(t, 5*time.Second, "the error in get manifests", func() (bool, string) {
		out, _ := d.CLI("get", "manifests")
		return strings.Contains(out, "connection refused") && strings.Contains(out, "last success"), out
	})
	// What is checked is that nothing happens, so time has to pass.
	time.Sleep(6 * time.Second)
	p, err = d.Pod(web)
	if err != nil {
		t.Fatalf("web after the server was down for 6 periods: %v", err)
	}
	if !harness.Running(p) || p.Status.ContainerStatuses[0].ContainerID != webID || p.Status.ContainerStatuses[0].RestartCount != restarts {
		t.Errorf("web after the server was down: %s, container %s; want the same container %s running",
			harness.Describe(p), p.Status.ContainerStatuses[0].ContainerID, webID)
	}
	if !harness.ProcessRunning(pid) {
		t.Errorf("web's process %d died while the server was down", pid)
	}
	out, err := d.CLI("get", "manifests")
	if err != nil || !strings.Contains(out, "default/"+web) || !strings.Contains(out, "connection refused") {
		t.Errorf("get manifests while the server is down = %q, %v; want web kept and the error", out, err)
	}
	if m := urlManifest(d, srv.url()); m.LastSuccess.IsZero() {
		t.Errorf("/manifests for the URL = %+v, want the time of the last success", m)
	}

	// Restarted while the server is down, staticlet runs what the URL last
	// served (kept under --root-dir) rather than stopping the adopted pods.
	d.Kill()
	d = e.Start(args...)
	time.Sleep(3 * time.Second) // a few failing polls
	if p, err = d.Pod(web); err != nil || !harness.Running(p) || p.Status.ContainerStatuses[0].ContainerID != webID {
		t.Fatalf("web after a restart while the URL is down: %v %v, want container %s kept", err, p, webID)
	}
	if !harness.ProcessRunning(pid) {
		t.Errorf("web's process %d died across a restart while the server was down", pid)
	}

	// Back, with a change.
	srv.set(harness.SleeperPod("web", "third", true))
	srv.start()
	p = d.WaitPod(web, 30*time.Second, "web changed after the server came back", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].ContainerID != webID
	})
	pid, err = e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	waitArgs(t, pid, "third")
	if m := urlManifest(d, srv.url()); m.Error != "" || !m.LastSuccess.IsZero() {
		t.Errorf("/manifests for the URL after recovery = %+v, want no error", m)
	}
	if strings.Contains(d.Out.String(), "s3cr3t") {
		t.Errorf("staticlet's log shows a header value")
	}
}

// TestURLAndFileSamePod defines one pod in a file and at the URL: the file
// wins (the rule in the README), the URL's definition is reported, and the
// URL's other pods run.
func TestURLAndFileSamePod(t *testing.T) {
	e := harness.NewEnv(t)
	e.Write("web.yaml", harness.SleeperPod("web", "from-file", true))
	srv := newPodServer(t, harness.SleeperPod("web", "from-url", true)+"---\n"+harness.SleeperPod("other", "x", true))
	d := e.Start("--manifest-url", srv.url(), "--http-check-frequency", "1s")

	p := d.WaitPod("web-"+harness.TestNode, 30*time.Second, "web running", harness.Running)
	pid, err := e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	waitArgs(t, pid, "from-file")
	d.WaitPod("other-"+harness.TestNode, 30*time.Second, "the URL's other pod running", harness.Running)
	m := urlManifest(d, srv.url())
	want := `pod "default/web-` + harness.TestNode + `" is also defined in ` + e.Manifest + "/web.yaml; this definition is ignored"
	if !strings.Contains(m.Error, want) || strings.Join(m.Pods, ",") != "default/other-"+harness.TestNode {
		t.Errorf("the URL's result = %+v, want pods [default/other-%s] and the error %q", m, harness.TestNode, want)
	}
	out, err := d.CLI("get", "manifests")
	if err != nil || !strings.Contains(out, "also defined in") || !strings.Contains(out, srv.url()) {
		t.Errorf("get manifests = %q, %v; want the URL reported", out, err)
	}
	if !strings.Contains(d.Out.String(), "manifest ignored") {
		t.Errorf("the ignored definition is not in the log")
	}

	// The file goes: the URL's definition takes over.
	e.Remove("web.yaml")
	p = d.WaitPod("web-"+harness.TestNode, 30*time.Second, "web from the URL", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Annotations["kubernetes.io/config.source"] == "http"
	})
	pid, err = e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	waitArgs(t, pid, "from-url")
}
