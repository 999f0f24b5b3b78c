package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/metricstest"
)

const probedPod = `apiVersion: v1
kind: Pod
metadata:
  name: probed
spec:
  hostNetwork: true
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "while true; do sleep 1; done"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`

// TestMetrics runs a probed pod, a crash-looping one, a bad manifest and
// a manifest URL, and reads the metrics on the status socket and on
// --metrics-address with Prometheus' parser: pods by phase, a restart
// counter that moves with each restart, probe counters, the start
// latency, URL polls, the manifest error and the build info.
func TestMetrics(t *testing.T) {
	e := harness.NewEnv(t)
	addr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	urlSource := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"apiVersion": "v1", "kind": "PodList", "items": []}`)
	}))
	defer urlSource.Close()
	d := e.Start("--metrics-address", addr, "--manifest-url", urlSource.URL+"/pods", "--http-check-frequency", "1s")
	e.Write("probed.yaml", probedPod)
	e.Write("crasher.yaml", strings.NewReplacer("NAME", "crasher", "POLICY", "Always", "CODE", "1").Replace(exiter))
	e.Write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {containers: [{name: x}], bogus: 1}\n")

	socket := metricstest.SocketClient(d.Socket)
	tcp := &http.Client{Timeout: 10 * time.Second}
	var last []metricstest.Sample
	// waitMetric waits until the socket's scrape has a series name with
	// labels whose value satisfies cond, and returns that value.
	waitMetric := func(what, name string, cond func(float64) bool, labels ...string) float64 {
		t.Helper()
		var got float64
		harness.WaitFor(t, 60*time.Second, what, func() (bool, string) {
			samples, err := metricstest.Scrape(t.Context(), socket, "http://staticlet/metrics")
			if err != nil {
				return false, err.Error()
			}
			last = samples
			s, ok := metricstest.Find(samples, name, labels...)
			got = s.Value
			return ok && cond(s.Value), fmt.Sprintf("%s%v found %v, value %v", name, labels, ok, s.Value)
		})
		return got
	}
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }

	d.WaitPod("probed-"+harness.TestNode, 60*time.Second, "probed pod ready", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].Ready
	})
	waitMetric("both pods Running", "staticlet_pods", func(v float64) bool { return v == 2 }, "phase=Running")
	waitMetric("running pods", "kubelet_running_pods", atLeast(1))
	waitMetric("a running container", "kubelet_running_containers", atLeast(1), "container_state=running")
	waitMetric("URL polls counted", "staticlet_manifest_url_polls_total", atLeast(2), "url="+urlSource.URL+"/pods", "code=200")
	waitMetric("the bad manifest counted", "staticlet_manifest_errors", func(v float64) bool { return v == 1 }, "source=dir:"+e.Manifest)

	// The restart counter moves with each restart of the crashing container.
	crasher := []string{"namespace=default", "pod=crasher-" + harness.TestNode, "container=main"}
	first := waitMetric("a restart counted", "staticlet_container_restarts_total", atLeast(1), crasher...)
	waitMetric("another restart counted", "staticlet_container_restarts_total", atLeast(first+1), crasher...)

	probed := []string{"namespace=default", "pod=probed-" + harness.TestNode, "container=main"}
	for _, typ := range []string{"Readiness", "Liveness"} {
		labels := append([]string{"probe_type=" + typ, "result=successful"}, probed...)
		waitMetric(typ+" probes counted", "prober_probe_total", atLeast(1), labels...)
		waitMetric(typ+" probes timed", "prober_probe_duration_seconds", atLeast(1), append([]string{"probe_type=" + typ}, probed...)...)
	}
	if s, ok := metricstest.Find(last, "prober_probe_total", "pod=probed-"+harness.TestNode, "result=successful"); !ok || s.Labels["pod_uid"] == "" {
		t.Errorf("prober_probe_total of the probed pod = %+v (found %v), want a pod_uid label", s, ok)
	}
	waitMetric("pod starts timed", "kubelet_pod_start_duration_seconds", atLeast(2))
	if s, ok := metricstest.Find(last, "staticlet_build_info", "goversion="+runtime.Version()); !ok || s.Labels["version"] == "" || s.Value != 1 {
		t.Errorf("staticlet_build_info = %+v (found %v), want 1 with a version and goversion %s", s, ok, runtime.Version())
	}
	if _, ok := metricstest.Find(last, "kubelet_http_requests_total", "path=metrics", "server_type=socket", "method=GET"); !ok {
		t.Errorf("no kubelet_http_requests_total of the socket's GET /metrics")
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := metricstest.Find(last, name); !ok {
			t.Errorf("no %s on the socket's /metrics", name)
		}
	}

	// The TCP port serves the same metrics, and nothing else.
	samples, err := metricstest.Scrape(t.Context(), tcp, "http://"+addr+"/metrics")
	if err != nil {
		t.Fatalf("scraping --metrics-address %s: %v", addr, err)
	}
	if s, ok := metricstest.Find(samples, "staticlet_pods", "phase=Running"); !ok || s.Value != 2 {
		t.Errorf("staticlet_pods{phase=Running} on %s = %v (found %v), want 2", addr, s.Value, ok)
	}
	resp, err := tcp.Get("http://" + addr + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /pods on --metrics-address = %s, want 404: the pods stay behind the socket", resp.Status)
	}
}
