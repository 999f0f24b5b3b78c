package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticlet/staticlet/internal/pod"
)

// podStartBuckets are the kubelet's for kubelet_pod_start_duration_seconds:
// a pod may wait minutes for its image.
var podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// pullBuckets are for staticlet_image_pull_duration_seconds, from a cached
// layer's second to a big image's ten minutes.
var pullBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600}

// Config configures Metrics.
type Config struct {
	// Version is staticlet's, for staticlet_build_info.
	Version string
	// Pods returns the pods as the status socket reports them; it is
	// called at each scrape. Nil: no pod gauges.
	Pods func() []v1.Pod
	// ManifestErrors returns how many manifest files (or URLs) of each
	// source are rejected, by source name; it is called at each scrape.
	// Nil: no manifest gauge.
	ManifestErrors func() map[string]int
	// NodeConditions returns the node's conditions (Ready, DiskPressure);
	// it is called at each scrape. Nil: no node gauge.
	NodeConditions func() []v1.NodeCondition
	// Devices returns how many CDI devices of each kind are free,
	// allocated or shared; it is called at each scrape. Nil: no device
	// gauge.
	Devices func() []DeviceCounts
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Metrics holds staticlet's metrics. Construct it with New.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	probes        *prometheus.CounterVec
	probeDuration *prometheus.HistogramVec
	podStart      prometheus.Histogram
	urlPolls      *prometheus.CounterVec
	imports       *prometheus.CounterVec
	pulls         *prometheus.CounterVec
	pullDuration  prometheus.Histogram
	imageGC       imageGCMetrics
	http          httpMetrics

	// mu guards the maps below; the probe series of a pod are deleted
	// under it too, so that none is deleted while held in probeMeters.
	mu sync.Mutex
	// started is the UID of each pod whose start was observed, so that a
	// pod's start counts once, and a replaced pod's again.
	started map[pod.Key]types.UID
	// uids is the UID of each pod as last updated, so that the probe
	// series of a replaced pod go.
	uids map[pod.Key]types.UID
	// probeMeters holds each probe's series, found once: looking them up
	// by their labels was the dearest part of counting a run, with every
	// container probed every second or so.
	probeMeters map[probeID]*probeMeters
}

// imageGCMetrics count image garbage collection's removals.
type imageGCMetrics struct {
	removed *prometheus.CounterVec // by reason
	freed   *prometheus.CounterVec // bytes, by reason
}

// probeID is one probe of one container of one pod.
type probeID struct {
	pod       pod.Key
	uid       string
	container string
	typ       pod.ProbeType
}

// probeMeters are the series one probe's runs go to.
type probeMeters struct {
	successful, failed prometheus.Counter
	took               prometheus.Observer
}

// New returns Metrics for cfg, its collectors registered.
func New(cfg Config) *Metrics {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Metrics{
		cfg:     cfg,
		reg:     prometheus.NewRegistry(),
		http:    newHTTPMetrics(),
		started: map[pod.Key]types.UID{},
		uids:    map[pod.Key]types.UID{},

		probeMeters: map[probeID]*probeMeters{},
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		probeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "prober_probe_duration_seconds",
			Help: "Duration in seconds for a probe response.",
		}, []string{"probe_type", "container", "pod", "namespace"}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubelet_pod_start_duration_seconds",
			Help:    "Duration in seconds from staticlet seeing a pod's manifest to the pod running.",
			Buckets: podStartBuckets,
		}),
		urlPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "staticlet_manifest_url_polls_total",
			Help: "Polls of a manifest URL, by the response's status code (\"error\": no response).",
		}, []string{"url", "code"}),
		imports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "staticlet_image_imports_total",
			Help: "Files of the image import directory imported (success) or not (failure).",
		}, []string{"result"}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "staticlet_image_pulls_total",
			Help: "Image pulls from a registry, by result (success, failure).",
		}, []string{"result"}),
		pullDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "staticlet_image_pull_duration_seconds",
			Help:    "Duration in seconds of image pulls from a registry, failed ones included.",
			Buckets: pullBuckets,
		}),
		imageGC: imageGCMetrics{
			removed: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kubelet_image_garbage_collected_total",
				Help: "Images removed by image garbage collection, by reason (age, space).",
			}, []string{"reason"}),
			freed: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "staticlet_image_garbage_collected_bytes_total",
				Help: "Bytes freed by image garbage collection, by reason (age, space): the content size of each image removed, as the kubelet counts it.",
			}, []string{"reason"}),
		},
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "staticlet_build_info",
		Help: "Always 1, labelled with staticlet's version and the Go version that built it.",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(cfg.Version, runtime.Version()).Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo, m.probes, m.probeDuration, m.podStart, m.urlPolls, m.imports, m.pulls, m.pullDuration,
		m.imageGC.removed, m.imageGC.freed,
		stateCollector{pods: cfg.Pods, manifestErrors: cfg.ManifestErrors, nodeConditions: cfg.NodeConditions, devices: cfg.Devices},
	)
	m.reg.MustRegister(m.http.collectors()...)
	return m
}

// Handler serves the metrics in Prometheus' formats, with
// promhttp_metric_handler_* counting the scrapes.
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
}

// Registry is the registry the metrics are in, for tests and for adding
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ProbeRan counts one run of a probe, as the kubelet's prober does:
// prober_probe_total by result, and the duration of a successful run.
func (m *Metrics) ProbeRan(r pod.ProbeRun) {
	id := probeID{pod: r.Pod, uid: r.UID, container: r.Container, typ: r.Type}
	typ := string(r.Type)
	m.mu.Lock()
	pm := m.probeMeters[id]
	if pm == nil {
		pm = &probeMeters{}
		m.probeMeters[id] = pm
	}
	// A series is made at its first run, as the kubelet's: no failed
	// series at 0 for a probe that never failed.
	if !r.OK {
		if pm.failed == nil {
			pm.failed = m.probes.WithLabelValues(typ, "failed", r.Container, r.Pod.Name, r.Pod.Namespace, r.UID)
		}
		c := pm.failed
		m.mu.Unlock()
		c.Inc()
		return
	}
	if pm.successful == nil {
		pm.successful = m.probes.WithLabelValues(typ, "successful", r.Container, r.Pod.Name, r.Pod.Namespace, r.UID)
		pm.took = m.probeDuration.WithLabelValues(typ, r.Container, r.Pod.Name, r.Pod.Namespace)
	}
	c, took := pm.successful, pm.took
	m.mu.Unlock()
	took.Observe(r.Took.Seconds())
	c.Inc()
}

// forgetProbes drops the probe series of pod key held in probeMeters, all
// of them, or those of uid only when it is set; the caller deletes them
// from their vectors. m.mu must be held.
func (m *Metrics) forgetProbes(key pod.Key, uid types.UID) {
	for id := range m.probeMeters {
		if id.pod == key && (uid == "" || id.uid == string(uid)) {
			delete(m.probeMeters, id)
		}
	}
}

// PodUpdated observes the start of p the first time p, by its UID, is
// reported running: the time since its manifest was seen (its
// pod.AnnotationSeen), as the kubelet does. A pod without that
// annotation is not observed. The probe series of the pod p replaced
// (another UID) go.
func (m *Metrics) PodUpdated(p *v1.Pod) {
	key := pod.Key{Namespace: p.Namespace, Name: p.Name}
	m.mu.Lock()
	old, had := m.uids[key]
	m.uids[key] = p.UID
	start := p.Status.Phase == v1.PodRunning && m.started[key] != p.UID
	if start {
		m.started[key] = p.UID
	}
	if had && old != p.UID {
		m.forgetProbes(key, old)
		m.probes.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "pod": key.Name, "pod_uid": string(old)})
	}
	m.mu.Unlock()
	if !start {
		return
	}
	seen, err := time.Parse(time.RFC3339Nano, p.Annotations[pod.AnnotationSeen])
	if err != nil {
		return
	}
	if d := m.cfg.Now().Sub(seen); d >= 0 {
		m.podStart.Observe(d.Seconds())
	}
}

// ForgetPod drops what is kept of a pod that is gone: its probes' series,
// and whether its start was observed.
func (m *Metrics) ForgetPod(key pod.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.started, key)
	delete(m.uids, key)
	m.forgetProbes(key, "")
	labels := prometheus.Labels{"namespace": key.Namespace, "pod": key.Name}
	m.probes.DeletePartialMatch(labels)
	m.probeDuration.DeletePartialMatch(labels)
}

// URLPolled counts one poll of a manifest URL by its status code, 0 for
// none (an "error").
func (m *Metrics) URLPolled(url string, code int) {
	c := "error"
	if code != 0 {
		c = strconv.Itoa(code)
	}
	m.urlPolls.WithLabelValues(url, c).Inc()
}

// ImageImported counts one file of the image import directory imported,
// or failed when failed.
func (m *Metrics) ImageImported(failed bool) {
	m.imports.WithLabelValues(result(failed)).Inc()
}

// ImagePulled counts one pull from a registry, and how long it took.
func (m *Metrics) ImagePulled(took time.Duration, err error) {
	m.pulls.WithLabelValues(result(err != nil)).Inc()
	m.pullDuration.Observe(took.Seconds())
}

// ImageCollected counts one image removed by garbage collection, for
// reason (age, space), and the bytes its removal is counted to free.
func (m *Metrics) ImageCollected(reason string, bytes int64) {
	m.imageGC.removed.WithLabelValues(reason).Inc()
	m.imageGC.freed.WithLabelValues(reason).Add(float64(bytes))
}

func result(failed bool) string {
	if failed {
		return "failure"
	}
	return "success"
}
