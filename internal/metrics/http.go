package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpPaths are the first segments of the paths staticlet serves: any
// other is counted as "other", so that requests cannot grow the series
// without bound.
var httpPaths = map[string]bool{
	"healthz": true, "readyz": true, "pods": true, "manifests": true,
	"events": true, "images": true, "metrics": true, "stats": true,
	"node": true, "configmaps": true, "secrets": true,
}

// httpMethods are the methods counted by name; any other is "other".
var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// httpLabels are the labels of the kubelet's HTTP server metrics.
var httpLabels = []string{"method", "path", "server_type", "long_running"}

// httpMetrics are the kubelet's metrics of its HTTP server.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
}

func newHTTPMetrics() httpMetrics {
	return httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_http_requests_total",
			Help: "Number of the http requests received since the server started.",
		}, httpLabels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubelet_http_requests_duration_seconds",
			Help: "Duration in seconds to serve http requests.",
		}, httpLabels),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubelet_http_inflight_requests",
			Help: "Number of the inflight http requests.",
		}, httpLabels),
	}
}

func (h httpMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.requests, h.duration, h.inflight}
}

// InstrumentHTTP counts and times the requests h serves as the kubelet
// does its server's: by method, path (the first segment of the URL path),
// server_type (server: which listener) and long_running (a log that is
// followed). A request is counted when it arrives, and timed when it is
// done.
func (m *Metrics) InstrumentHTTP(server string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		labels := prometheus.Labels{
			"method":       httpLabel(httpMethods, r.Method),
			"path":         httpLabel(httpPaths, rootPath(r.URL.Path)),
			"server_type":  server,
			"long_running": strconv.FormatBool(r.URL.Query().Get("follow") == "true"),
		}
		m.http.requests.With(labels).Inc()
		inflight := m.http.inflight.With(labels)
		inflight.Inc()
		defer inflight.Dec()
		began := time.Now()
		h.ServeHTTP(w, r)
		m.http.duration.With(labels).Observe(time.Since(began).Seconds())
	})
}

// rootPath is the first segment of path: "pods" of /pods/web/log.
func rootPath(path string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return first
}

// httpLabel is v when known has it, else "other".
func httpLabel(known map[string]bool, v string) string {
	if known[v] {
		return v
	}
	return "other"
}
