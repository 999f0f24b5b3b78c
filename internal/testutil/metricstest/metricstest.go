// Package metricstest reads Prometheus metrics for tests: it parses the
// text format with Prometheus' own parser into flat samples and finds
// series among them. It owns no state and starts nothing; tests of
// package metrics and the end-to-end tests use it.
package metricstest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series of a scrape.
type Sample struct {
	Name   string
	Type   dto.MetricType
	Labels map[string]string
	// Value is a counter's or gauge's value, a histogram's count.
	Value float64
	// Sum is a histogram's sum of observations.
	Sum float64
}

// Parse reads the text format from r.
func Parse(r io.Reader) ([]Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	var out []Sample
	for name, f := range fams {
		for _, m := range f.Metric {
			s := Sample{Name: name, Type: f.GetType(), Labels: map[string]string{}}
			for _, l := range m.Label {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = m.Counter.GetValue()
			case dto.MetricType_GAUGE:
				s.Value = m.Gauge.GetValue()
			case dto.MetricType_HISTOGRAM:
				s.Value, s.Sum = float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum()
			default:
				s.Value = m.Untyped.GetValue()
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// SocketClient is an HTTP client that reaches the server on the unix
// socket at path whatever the URL's host (staticlet's status socket),
// with a 10 s timeout.
func SocketClient(path string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
}

// Scrape gets url with c and parses the answer.
func Scrape(ctx context.Context, c *http.Client, url string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Find returns the first sample called name whose labels include those
// given as "name=value" pairs, and whether there is one.
func Find(samples []Sample, name string, labels ...string) (Sample, bool) {
next:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if s.Labels[k] != v {
				continue next
			}
		}
		return s, true
	}
	return Sample{}, false
}
