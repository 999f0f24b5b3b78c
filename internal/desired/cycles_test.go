package desired

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// after returns a pod "ns/name-n1" of node n1 that waits for deps.
func after(name string, deps ...string) *pod.Pod {
	p := newPod("kube-system/"+pod.FullName(name, "n1"), name+".yaml")
	p.Spec.NodeName = "n1"
	if len(deps) > 0 {
		p.Annotations = map[string]string{pod.AnnotationAfter: strings.Join(deps, ",")}
	}
	return p
}

func TestRefuseCycles(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pods    []*pod.Pod
		kept    string
		refused map[string]string // file path -> the cycle its error names
	}{
		{name: "no annotation", pods: []*pod.Pod{after("etcd"), after("api")},
			kept: "kube-system/etcd-n1,kube-system/api-n1"},
		{name: "a chain", pods: []*pod.Pod{after("etcd"), after("api", "etcd"), after("ctrl", "api", "etcd")},
			kept: "kube-system/etcd-n1,kube-system/api-n1,kube-system/ctrl-n1"},
		{name: "a missing dependency is no cycle", pods: []*pod.Pod{after("api", "etcd")},
			kept: "kube-system/api-n1"},
		{name: "two pods", pods: []*pod.Pod{after("etcd"), after("a", "b"), after("b", "a")},
			kept: "kube-system/etcd-n1",
			refused: map[string]string{
				"a.yaml": "(kube-system/a-n1 waits for kube-system/b-n1 waits for kube-system/a-n1)",
				"b.yaml": "(kube-system/a-n1 waits for kube-system/b-n1 waits for kube-system/a-n1)",
			}},
		{name: "three pods, and one outside waiting on them", pods: []*pod.Pod{after("x", "y"), after("y", "z"), after("z", "x"), after("w", "x")},
			kept: "kube-system/w-n1",
			refused: map[string]string{
				"x.yaml": "(kube-system/x-n1 waits for kube-system/y-n1 waits for kube-system/z-n1 waits for kube-system/x-n1)",
				"y.yaml": "(kube-system/x-n1 waits for kube-system/y-n1",
				"z.yaml": "(kube-system/x-n1 waits for kube-system/y-n1",
			}},
		{name: "two cycles through one pod", pods: []*pod.Pod{after("a", "b", "c"), after("b", "a"), after("c", "a")},
			refused: map[string]string{"a.yaml": "a cycle", "b.yaml": "a cycle", "c.yaml": "a cycle"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var files []watch.FileResult
			for _, p := range tt.pods {
				files = append(files, watch.FileResult{Path: p.Source, Pods: []*pod.Pod{p}})
			}
			kept, out := refuseCycles(tt.pods, files)
			if got := keys(kept); got != tt.kept {
				t.Errorf("kept %s, want %s", got, tt.kept)
			}
			for _, f := range out {
				want, refused := tt.refused[f.Path]
				var ce *CycleError
				switch {
				case !refused && f.Err != nil:
					t.Errorf("%s: %v, want no error", f.Path, f.Err)
				case refused && (!errors.As(f.Err, &ce) || !strings.Contains(f.Err.Error(), want) || len(f.Pods) != 0):
					t.Errorf("%s: %v with %d pods, want a cycle error naming %q and no pod", f.Path, f.Err, len(f.Pods), want)
				}
			}
		})
	}
}

// TestMergeRefusesCycles: the merged set leaves out a cycle, and the
// manifest results say why.
func TestMergeRefusesCycles(t *testing.T) {
	a, b := after("a", "b"), after("b", "a")
	s := newMergeState([]string{dirSource}, slog.New(slog.DiscardHandler))
	pods, manifests, _ := s.add(snap(dirSource,
		watch.FileResult{Path: "a.yaml", Pods: []*pod.Pod{a}}, watch.FileResult{Path: "b.yaml", Pods: []*pod.Pod{b}}))
	if len(pods) != 0 {
		t.Errorf("merged %s, want nothing", keys(pods))
	}
	for _, m := range manifests {
		if !strings.Contains(m.Error, "wait for each other in a cycle") || len(m.Pods) != 0 {
			t.Errorf("manifest %s: error %q, pods %v; want the cycle and no pod", m.Path, m.Error, m.Pods)
		}
	}
}
