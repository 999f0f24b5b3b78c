package kubeapi

import (
	"context"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/staticlet/staticlet/internal/status"
)

// NodeUsage samples the whole node's usage over window, as
// metrics-server reports it: the CPU used on average over the window and
// the memory working set at its end. It blocks for about window, and
// returns early with an error when ctx ends.
type NodeUsage func(ctx context.Context, window time.Duration) (status.Usage, error)

// metricsWindow is how long each request for metrics samples usage:
// kubectl top waits that long. metrics-server's is its scrape
// resolution (15s), from which it answers at once; staticlet keeps no
// samples in the background.
const metricsWindow = status.DefaultStatsWindow

// metricsResources are the resources of metrics.k8s.io, as
// metrics-server serves them for kubectl top: pods (from Config.Stats)
// and nodes (Config.NodeUsage), each left out when its reader is nil.
// Usage is sampled for each request; nothing is kept.
func (s *Server) metricsResources() []*resource {
	gv := metricsv1beta1.SchemeGroupVersion
	var out []*resource
	if s.cfg.Stats != nil {
		out = append(out, &resource{
			gv: gv, name: "pods", singular: "", kind: "PodMetrics", namespaced: true, noWatch: true,
			get:  s.serveMetrics(s.podMetrics, false),
			list: s.serveMetrics(s.podMetrics, true),
		})
	}
	if s.cfg.NodeUsage != nil {
		out = append(out, &resource{
			gv: gv, name: "nodes", singular: "", kind: "NodeMetrics", noWatch: true,
			get:  s.serveMetrics(s.nodeMetrics, false),
			list: s.serveMetrics(s.nodeMetrics, true),
		})
	}
	return out
}

// serveMetrics serves a get (list false) or list of the metrics sample
// reads, with the selectors, Table and metadata forms of a collection.
func (s *Server) serveMetrics(sample func(ctx context.Context) (*collection, error), list bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, req request) {
		if req.verb == verbWatch {
			s.writeStatus(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Group: req.group, Resource: req.resource}, verbWatch))
			return
		}
		c, err := sample(r.Context())
		if err != nil {
			s.log.Warn("sampling usage for the metrics API", "resource", req.resource, "err", err)
			s.writeStatus(w, r, apierrors.NewServiceUnavailable("reading usage: "+err.Error()))
			return
		}
		if list {
			s.serveList(c, w, r, req)
		} else {
			s.serveGet(c, w, r, req)
		}
	}
}

// podMetrics samples the pods' usage as PodMetrics, each with its pod's
// labels (a label selector picks pods by them, as with metrics-server).
func (s *Server) podMetrics(ctx context.Context) (*collection, error) {
	list, err := s.cfg.Stats(ctx, metricsWindow)
	if err != nil {
		return nil, err
	}
	window, err := time.ParseDuration(list.Window)
	if err != nil {
		window = metricsWindow
	}
	pods, rev := s.cfg.Store.PodsAt()
	labels := make(map[[2]string]map[string]string, len(pods))
	for _, p := range pods {
		labels[[2]string{p.Namespace, p.Name}] = p.Labels
	}
	objs := make([]runtime.Object, 0, len(list.Pods))
	for _, p := range list.Pods {
		m := &metricsv1beta1.PodMetrics{
			TypeMeta:   metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "PodMetrics"},
			ObjectMeta: metricsMeta(p.Name, p.Namespace, labels[[2]string{p.Namespace, p.Name}], list.Time),
			Timestamp:  metav1.NewTime(list.Time),
			Window:     metav1.Duration{Duration: window},
			Containers: make([]metricsv1beta1.ContainerMetrics, 0, len(p.Containers)),
		}
		for _, c := range p.Containers {
			m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: usageList(c.Usage)})
		}
		objs = append(objs, m)
	}
	return s.metricsCollection(metricsv1beta1.Resource("pods"), objs, rev, func() runtime.Object {
		return &metricsv1beta1.PodMetrics{TypeMeta: metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "PodMetrics"}}
	}, func(items []runtime.Object, rv string) runtime.Object {
		l := &metricsv1beta1.PodMetricsList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []metricsv1beta1.PodMetrics{}}
		l.APIVersion, l.Kind = metricsv1beta1.SchemeGroupVersion.String(), "PodMetricsList"
		for _, obj := range items {
			l.Items = append(l.Items, *obj.(*metricsv1beta1.PodMetrics))
		}
		return l
	}), nil
}

// nodeMetrics samples the node's usage as its NodeMetrics.
func (s *Server) nodeMetrics(ctx context.Context) (*collection, error) {
	u, err := s.cfg.NodeUsage(ctx, metricsWindow)
	if err != nil {
		return nil, err
	}
	end := time.Now()
	n := s.node()
	m := &metricsv1beta1.NodeMetrics{
		TypeMeta:   metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "NodeMetrics"},
		ObjectMeta: metricsMeta(n.Name, "", n.Labels, end),
		Timestamp:  metav1.NewTime(end),
		Window:     metav1.Duration{Duration: metricsWindow},
		Usage:      usageList(u),
	}
	return s.metricsCollection(metricsv1beta1.Resource("nodes"), []runtime.Object{m}, s.cfg.Store.Revision(), func() runtime.Object {
		return &metricsv1beta1.NodeMetrics{TypeMeta: metav1.TypeMeta{APIVersion: metricsv1beta1.SchemeGroupVersion.String(), Kind: "NodeMetrics"}}
	}, func(items []runtime.Object, rv string) runtime.Object {
		l := &metricsv1beta1.NodeMetricsList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []metricsv1beta1.NodeMetrics{}}
		l.APIVersion, l.Kind = metricsv1beta1.SchemeGroupVersion.String(), "NodeMetricsList"
		for _, obj := range items {
			l.Items = append(l.Items, *obj.(*metricsv1beta1.NodeMetrics))
		}
		return l
	}), nil
}

// metricsMeta is the metadata of a metrics object: the name, namespace
// and labels of what it measures, made when it was measured, as
// metrics-server's.
func metricsMeta(name, namespace string, labels map[string]string, at time.Time) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, CreationTimestamp: metav1.NewTime(at)}
}

// usageList is u as metrics-server gives it: CPU in nanocores, memory in
// bytes.
func usageList(u status.Usage) v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    *apiresource.NewScaledQuantity(int64(u.CPUNanoCores), apiresource.Nano),
		v1.ResourceMemory: *apiresource.NewQuantity(int64(u.MemoryWorkingSetBytes), apiresource.BinarySI),
	}
}

// metricsCollection serves objs, one sample, as a collection: its Table
// has the name, the CPU and memory used (a pod's summed over its
// containers) and the window.
func (s *Server) metricsCollection(gr schema.GroupResource, objs []runtime.Object, rev uint64,
	empty func() runtime.Object, list func([]runtime.Object, string) runtime.Object) *collection {
	col := func(name, desc string) metav1.TableColumnDefinition {
		return metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc}
	}
	return &collection{
		resource: gr,
		snapshot: func(ns string) ([]runtime.Object, uint64) {
			var out []runtime.Object
			for _, obj := range objs {
				if m, err := meta.Accessor(obj); err == nil && (ns == "" || m.GetNamespace() == ns) {
					out = append(out, obj)
				}
			}
			return out, rev
		},
		table: tableForm{
			columns: []metav1.TableColumnDefinition{
				nameColumn(),
				col("CPU", "The CPU used, in cores, on average over the window."),
				col("Memory", "The memory working set at the window's end."),
				col("Window", "The time the usage was measured over."),
			},
			cells: metricsCells,
		},
		empty: empty,
		list:  list,
	}
}

func metricsCells(obj runtime.Object, _ time.Time) []any {
	switch m := obj.(type) {
	case *metricsv1beta1.NodeMetrics:
		return []any{m.Name, m.Usage.Cpu().String(), m.Usage.Memory().String(), m.Window.Duration.String()}
	case *metricsv1beta1.PodMetrics:
		cpu, mem := apiresource.Quantity{}, apiresource.Quantity{}
		for _, c := range m.Containers {
			cpu.Add(*c.Usage.Cpu())
			mem.Add(*c.Usage.Memory())
		}
		return []any{m.Name, cpu.String(), mem.String(), m.Window.Duration.String()}
	}
	return nil
}
