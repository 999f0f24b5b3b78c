package metrics

import (
	"errors"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// scrape gets m's handler's answer and parses it with Prometheus' own
// text parser.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value is the value of the series of family name with labels, and
// whether there is one: a counter's or gauge's value, a histogram's count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		match := true
		for k, v := range labels {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// series is the value a series is expected to have.
type series struct {
	name   string
	labels map[string]string
	want   float64
}

// checkSeries checks that fams have the series in want.
func checkSeries(t *testing.T, fams map[string]*dto.MetricFamily, want []series) {
	t.Helper()
	for _, tt := range want {
		if got, ok := value(fams, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (found %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
}

func ptime(t time.Time) metav1.Time { return metav1.NewTime(t) }

// testPods are one pod in each interesting state.
func testPods() []v1.Pod {
	now := time.Now()
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ptime(now)}}
	exited := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	creating := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	pod := func(name string, phase v1.PodPhase, init []v1.ContainerStatus, cs ...v1.ContainerStatus) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Status: v1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: cs}}
	}
	return []v1.Pod{
		pod("web", v1.PodRunning, []v1.ContainerStatus{{Name: "init", State: exited, ContainerID: "containerd://i"}},
			v1.ContainerStatus{Name: "app", State: running, RestartCount: 2, ContainerID: "containerd://a"},
			v1.ContainerStatus{Name: "crash", State: waiting, LastTerminationState: exited, RestartCount: 5, ContainerID: "containerd://c"}),
		pod("new", "", nil, v1.ContainerStatus{Name: "app", State: creating}),
		pod("job", v1.PodSucceeded, nil, v1.ContainerStatus{Name: "app", State: exited, ContainerID: "containerd://j"}),
		pod("bad", v1.PodFailed, nil, v1.ContainerStatus{Name: "app", State: exited, ContainerID: "containerd://b"}),
		pod("made", v1.PodPending, nil, v1.ContainerStatus{Name: "app", State: creating, ContainerID: "containerd://m"}),
	}
}

// TestMetricsState checks the gauges computed at scrape time from the
// pods and manifests.
func TestMetricsState(t *testing.T) {
	m := New(Config{
		Version:        "v1.2.3",
		Pods:           testPods,
		ManifestErrors: func() map[string]int { return map[string]int{"dir:/m": 2, "url:http://x": 0} },
	})
	fams := scrape(t, m)
	checkSeries(t, fams, []series{
		{"kubelet_running_pods", nil, 1},
		{"kubelet_running_containers", map[string]string{"container_state": "running"}, 1},
		{"kubelet_running_containers", map[string]string{"container_state": "exited"}, 4},
		{"kubelet_running_containers", map[string]string{"container_state": "created"}, 1},
		{"kubelet_running_containers", map[string]string{"container_state": "unknown"}, 0},
		{"staticlet_pods", map[string]string{"phase": "Running"}, 1},
		{"staticlet_pods", map[string]string{"phase": "Pending"}, 2},
		{"staticlet_pods", map[string]string{"phase": "Succeeded"}, 1},
		{"staticlet_pods", map[string]string{"phase": "Failed"}, 1},
		{"staticlet_pods", map[string]string{"phase": "Unknown"}, 0},
		{"staticlet_container_restarts_total", map[string]string{"pod": "web", "container": "app"}, 2},
		{"staticlet_container_restarts_total", map[string]string{"pod": "web", "container": "crash"}, 5},
		{"staticlet_container_restarts_total", map[string]string{"pod": "web", "container": "init"}, 0},
		{"staticlet_manifest_errors", map[string]string{"source": "dir:/m"}, 2},
		{"staticlet_manifest_errors", map[string]string{"source": "url:http://x"}, 0},
		{"staticlet_build_info", map[string]string{"version": "v1.2.3", "goversion": runtime.Version()}, 1},
	})
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_requests_total"} {
		if fams[name] == nil {
			t.Errorf("no %s: the Go, process and handler collectors are missing", name)
		}
	}
	if got := fams["staticlet_container_restarts_total"].GetType(); got != dto.MetricType_COUNTER {
		t.Errorf("staticlet_container_restarts_total is a %v, want a counter", got)
	}
}

// TestMetricsEvents checks the counters and histograms the other
// packages feed.
func TestMetricsEvents(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := New(Config{Now: func() time.Time { return now }})
	key := pod.Key{Namespace: "kube-system", Name: "etcd-node"}
	m.ProbeRan(pod.ProbeRun{Pod: key, UID: "u1", Container: "etcd", Type: pod.Liveness, OK: true, Took: 3 * time.Millisecond})
	m.ProbeRan(pod.ProbeRun{Pod: key, UID: "u1", Container: "etcd", Type: pod.Liveness, OK: true, Took: time.Millisecond})
	m.ProbeRan(pod.ProbeRun{Pod: key, UID: "u1", Container: "etcd", Type: pod.Readiness, OK: false})
	m.URLPolled("http://x/pods", 200)
	m.URLPolled("http://x/pods", 304)
	m.URLPolled("http://x/pods", 304)
	m.URLPolled("http://x/pods", 0)
	m.ImageImported(false)
	m.ImageImported(true)
	m.ImageImported(false)
	m.ImagePulled(time.Second, nil)
	m.ImagePulled(time.Second, errors.New("no such host"))

	seen := now.Add(-1500 * time.Millisecond).Format(time.RFC3339Nano)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "u1",
		Annotations: map[string]string{pod.AnnotationSeen: seen}}}
	m.PodUpdated(p) // pending: not started
	p.Status.Phase = v1.PodRunning
	m.PodUpdated(p)
	m.PodUpdated(p) // the same pod again: counted once
	p = p.DeepCopy()
	p.UID = "u2" // the manifest changed: a new pod
	m.PodUpdated(p)

	fams := scrape(t, m)
	liveness := map[string]string{"probe_type": "Liveness", "pod": key.Name, "namespace": key.Namespace, "container": "etcd"}
	checkSeries(t, fams, []series{
		{"prober_probe_total", map[string]string{"probe_type": "Liveness", "result": "successful", "pod_uid": "u1"}, 2},
		{"prober_probe_total", map[string]string{"probe_type": "Readiness", "result": "failed"}, 1},
		{"prober_probe_duration_seconds", liveness, 2},
		{"staticlet_manifest_url_polls_total", map[string]string{"url": "http://x/pods", "code": "200"}, 1},
		{"staticlet_manifest_url_polls_total", map[string]string{"code": "304"}, 2},
		{"staticlet_manifest_url_polls_total", map[string]string{"code": "error"}, 1},
		{"staticlet_image_imports_total", map[string]string{"result": "success"}, 2},
		{"staticlet_image_imports_total", map[string]string{"result": "failure"}, 1},
		{"staticlet_image_pulls_total", map[string]string{"result": "success"}, 1},
		{"staticlet_image_pulls_total", map[string]string{"result": "failure"}, 1},
		{"staticlet_image_pull_duration_seconds", nil, 2},
		{"kubelet_pod_start_duration_seconds", nil, 2},
	})
	if got := fams["prober_probe_duration_seconds"].Metric; len(got) != 1 {
		t.Errorf("%d prober_probe_duration_seconds series, want 1: only successful runs are timed", len(got))
	}
	if h := fams["kubelet_pod_start_duration_seconds"].Metric[0].Histogram; h.GetSampleSum() != 3 {
		t.Errorf("kubelet_pod_start_duration_seconds sum = %v, want 3 (1.5 s twice)", h.GetSampleSum())
	}

	m.ForgetPod(key)
	fams = scrape(t, m)
	for _, name := range []string{"prober_probe_total", "prober_probe_duration_seconds"} {
		if _, ok := value(fams, name, map[string]string{"pod": key.Name}); ok {
			t.Errorf("%s still has series of pod %s after ForgetPod", name, key)
		}
	}
}
