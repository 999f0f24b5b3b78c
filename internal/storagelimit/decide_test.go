package storagelimit

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticlet/staticlet/internal/pod"
)

const mi = 1 << 20

func limited(name, limit string, mounts ...string) v1.Container {
	c := v1.Container{Name: name}
	if limit != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
	}
	for _, m := range mounts {
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: m, MountPath: "/" + m})
	}
	return c
}

func emptyDir(name, size string, medium v1.StorageMedium) v1.Volume {
	ed := &v1.EmptyDirVolumeSource{Medium: medium}
	if size != "" {
		q := resource.MustParse(size)
		ed.SizeLimit = &q
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}}
}

func testPod(spec v1.PodSpec) v1.Pod {
	return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: types.UID("uid-1")}, Spec: spec}
}

func use(name string, rootfs, logs int64) pod.ContainerStorage {
	return pod.ContainerStorage{Name: name, ID: "id-" + name, RootfsBytes: rootfs, LogBytes: logs}
}

func usage(dirs map[string]int64, cs ...pod.ContainerStorage) pod.StorageUsage {
	return pod.StorageUsage{Pod: pod.Key{Namespace: "default", Name: "p"}, UID: "uid-1", Containers: cs, EmptyDirs: dirs}
}

// render prints evictions as "message -> targets [critical]".
func render(es []Eviction) []string {
	var out []string
	for _, e := range es {
		var names []string
		for _, t := range e.Targets {
			names = append(names, t.Name)
		}
		s := fmt.Sprintf("%s: %s-> %v", e.Pod, e.Message, names)
		if e.Critical {
			s += " critical"
		}
		out = append(out, s)
	}
	return out
}

func TestDecide(t *testing.T) {
	critical := int32(pod.SystemClusterCriticalPriority)
	tests := []struct {
		name  string
		spec  v1.PodSpec
		usage pod.StorageUsage
		want  []string
	}{{
		name:  "under its limit",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "4Mi")}},
		usage: usage(nil, use("a", 3*mi, mi)),
	}, {
		name:  "writable layer and log over the limit",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "4Mi")}},
		usage: usage(nil, use("a", 3*mi, mi+1)),
		// The kubelet checks the pod's total first, which is a's limit.
		want: []string{`default/p: Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. -> [a]`},
	}, {
		// The pod's total (8Mi) is not reached: only b is over its own.
		name:  "only the container over its own limit",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "6Mi"), limited("b", "2Mi")}},
		usage: usage(nil, use("a", mi, 0), use("b", 3*mi, 0)),
		want:  []string{`default/p: Container b exceeded its local ephemeral storage limit "2Mi". -> [b]`},
	}, {
		name:  "pod over its total: the containers over their own limits only",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "2Mi"), limited("b", "2Mi"), limited("c", "2Mi")}},
		usage: usage(nil, use("a", mi, 0), use("b", 5*mi, 0), use("c", 3*mi, 0)),
		want:  []string{`default/p: Pod ephemeral local storage usage exceeds the total limit of containers 6Mi. -> [b c]`},
	}, {
		name:  "no limit, nothing enforced",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "")}},
		usage: usage(nil, use("a", 100*mi, 0)),
	}, {
		// A container without a limit adds to the pod's use, not to its
		// limit: the pod is over the total, and all its containers go.
		name:  "pod over the total of its containers' limits",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "4Mi"), limited("b", "")}},
		usage: usage(nil, use("b", 5*mi, 0), use("a", mi, 0)),
		want:  []string{`default/p: Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. -> [a b]`},
	}, {
		name: "disk emptyDirs count toward the pod's total",
		spec: v1.PodSpec{Containers: []v1.Container{limited("a", "4Mi")},
			Volumes: []v1.Volume{emptyDir("cache", "", "")}},
		usage: usage(map[string]int64{"cache": 4 * mi}, use("a", mi, 0)),
		want:  []string{`default/p: Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. -> [a]`},
	}, {
		name: "emptyDir over its sizeLimit, first: the containers mounting it",
		spec: v1.PodSpec{Containers: []v1.Container{limited("w", "1Mi", "cache"), limited("x", ""), limited("r", "", "cache")},
			Volumes: []v1.Volume{emptyDir("cache", "2Mi", "")}},
		usage: usage(map[string]int64{"cache": 3 * mi}, use("w", 2*mi, 0), use("x", 0, 0), use("r", 0, 0)),
		want:  []string{`default/p: Usage of EmptyDir volume "cache" exceeds the limit "2Mi". -> [r w]`},
	}, {
		name: "emptyDir at its sizeLimit",
		spec: v1.PodSpec{Containers: []v1.Container{limited("w", "", "cache")},
			Volumes: []v1.Volume{emptyDir("cache", "2Mi", "")}},
		usage: usage(map[string]int64{"cache": 2 * mi}, use("w", 0, 0)),
	}, {
		name: "emptyDir sizeLimit 0 is no limit",
		spec: v1.PodSpec{Containers: []v1.Container{limited("w", "", "cache")},
			Volumes: []v1.Volume{emptyDir("cache", "0", "")}},
		usage: usage(map[string]int64{"cache": 2 * mi}, use("w", 0, 0)),
	}, {
		name: "a Memory emptyDir is a sized tmpfs, not measured",
		spec: v1.PodSpec{Containers: []v1.Container{limited("w", "", "mem")},
			Volumes: []v1.Volume{emptyDir("mem", "1Mi", v1.StorageMediumMemory)}},
		usage: usage(map[string]int64{"mem": 2 * mi}, use("w", 0, 0)),
	}, {
		name: "a HugePages emptyDir is a hugetlbfs, not measured",
		spec: v1.PodSpec{Containers: []v1.Container{limited("w", "", "huge")},
			Volumes: []v1.Volume{emptyDir("huge", "1Mi", v1.StorageMediumHugePages)}},
		usage: usage(map[string]int64{"huge": 2 * mi}, use("w", 0, 0)),
	}, {
		name: "emptyDir over its limit that no running container mounts",
		spec: v1.PodSpec{InitContainers: []v1.Container{limited("fill", "", "cache")}, Containers: []v1.Container{limited("w", "")},
			Volumes: []v1.Volume{emptyDir("cache", "1Mi", "")}},
		usage: usage(map[string]int64{"cache": 2 * mi}, use("w", 0, 0)),
	}, {
		name:  "a critical pod is told, not killed",
		spec:  v1.PodSpec{Priority: &critical, Containers: []v1.Container{limited("a", "1Mi")}},
		usage: usage(nil, use("a", 2*mi, 0)),
		want:  []string{`default/p: Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. -> [a] critical`},
	}, {
		name:  "usage of another pod of the same name (another UID) is not this pod's",
		spec:  v1.PodSpec{Containers: []v1.Container{limited("a", "1Mi")}},
		usage: func() pod.StorageUsage { u := usage(nil, use("a", 2*mi, 0)); u.UID = "uid-0"; return u }(),
	}, {
		name: "a sidecar's limit adds to the total; an init container's own is a floor",
		spec: v1.PodSpec{
			InitContainers: []v1.Container{limited("side", "1Mi"), limited("init", "10Mi")},
			Containers:     []v1.Container{limited("a", "2Mi"), limited("b", "")}},
		usage: usage(nil, use("side", 0, 0), use("a", mi, 0), use("b", 11*mi, 0)),
		want:  []string{`default/p: Pod ephemeral local storage usage exceeds the total limit of containers 11Mi. -> [a b side]`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			for i := range spec.InitContainers {
				if spec.InitContainers[i].Name == "side" {
					always := v1.ContainerRestartPolicyAlways
					spec.InitContainers[i].RestartPolicy = &always
				}
			}
			got := render(Decide([]v1.Pod{testPod(spec)}, []pod.StorageUsage{tt.usage}))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestLimited(t *testing.T) {
	tests := []struct {
		name string
		spec v1.PodSpec
		want bool
	}{
		{"no limit", v1.PodSpec{Containers: []v1.Container{limited("a", "")}, Volumes: []v1.Volume{emptyDir("d", "", "")}}, false},
		{"a container's limit", v1.PodSpec{Containers: []v1.Container{limited("a", ""), limited("b", "1Mi")}}, true},
		{"an init container's limit", v1.PodSpec{InitContainers: []v1.Container{limited("i", "1Mi")}, Containers: []v1.Container{limited("a", "")}}, true},
		{"a disk emptyDir's sizeLimit", v1.PodSpec{Containers: []v1.Container{limited("a", "")}, Volumes: []v1.Volume{emptyDir("d", "1Mi", "")}}, true},
		{"a Memory emptyDir's sizeLimit", v1.PodSpec{Containers: []v1.Container{limited("a", "")}, Volumes: []v1.Volume{emptyDir("d", "1Mi", v1.StorageMediumMemory)}}, false},
		{"a HugePages emptyDir's sizeLimit", v1.PodSpec{Containers: []v1.Container{limited("a", "")}, Volumes: []v1.Volume{emptyDir("d", "1Mi", v1.StorageMediumHugePagesPrefix+"2Mi")}}, false},
		{"sizeLimit 0", v1.PodSpec{Containers: []v1.Container{limited("a", "")}, Volumes: []v1.Volume{emptyDir("d", "0", "")}}, false},
	}
	for _, tt := range tests {
		if got := Limited([]v1.Pod{testPod(tt.spec)})["uid-1"]; got != tt.want {
			t.Errorf("%s: Limited = %v, want %v", tt.name, got, tt.want)
		}
	}
}
