package spec

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestMountPropagation checks the options each mountPropagation gives a
// volume mount and the root, and that Bidirectional needs a privileged
// container (the spec refuses it too, whatever validated the pod).
func TestMountPropagation(t *testing.T) {
	tests := []struct {
		name       string
		mode       string // the mount's mountPropagation line, if any
		privileged bool
		wantOpt    string
		wantRoot   string
		wantErr    string
	}{
		{name: "unset", wantOpt: "rprivate"},
		{name: "None", mode: "None", wantOpt: "rprivate"},
		{name: "HostToContainer", mode: "HostToContainer", wantOpt: "rslave", wantRoot: "rslave"},
		{name: "Bidirectional privileged", mode: "Bidirectional", privileged: true, wantOpt: "rshared", wantRoot: "rshared"},
		{name: "HostToContainer privileged", mode: "HostToContainer", privileged: true, wantOpt: "rslave", wantRoot: "rslave"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := "    volumeMounts:\n    - name: h\n      mountPath: /h\n"
			if tt.mode != "" {
				extra += "      mountPropagation: " + tt.mode + "\n"
			}
			if tt.privileged {
				extra += "    securityContext: {privileged: true}\n"
			}
			p := simplePod(t, extra, "  volumes:\n  - {name: h, hostPath: {path: /srv/h}}\n")
			s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: map[string]string{"h": "/srv/h"}})
			m := mountAt(t, s.Mounts, "/h")
			if want := []string{"rbind", tt.wantOpt, "rw"}; !slices.Equal(m.Options, want) {
				t.Errorf("mount options = %q, want %q", m.Options, want)
			}
			if s.Linux.RootfsPropagation != tt.wantRoot {
				t.Errorf("rootfsPropagation = %q, want %q", s.Linux.RootfsPropagation, tt.wantRoot)
			}
		})
	}

	// A shared mount anywhere makes the root shared, whatever the order.
	p := simplePod(t, "    securityContext: {privileged: true}\n    volumeMounts:\n"+
		"    - {name: h, mountPath: /a, mountPropagation: Bidirectional}\n"+
		"    - {name: h, mountPath: /b, mountPropagation: HostToContainer}\n",
		"  volumes:\n  - {name: h, hostPath: {path: /srv/h}}\n")
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: map[string]string{"h": "/srv/h"}})
	if s.Linux.RootfsPropagation != "rshared" {
		t.Errorf("rootfsPropagation with Bidirectional then HostToContainer = %q, want rshared", s.Linux.RootfsPropagation)
	}

	// Bidirectional in an unprivileged container: the kubelet's message.
	p = simplePod(t, "    volumeMounts:\n    - {name: h, mountPath: /h}\n", "  volumes:\n  - {name: h, hostPath: {path: /srv/h}}\n")
	bidi := v1.MountPropagationBidirectional
	p.Spec.Containers[0].VolumeMounts[0].MountPropagation = &bidi
	_, err := Container(p, &p.Spec.Containers[0], ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: map[string]string{"h": "/srv/h"}})
	if err == nil || !strings.Contains(err.Error(), "Bidirectional mount propagation is available only to privileged containers") {
		t.Errorf("Container() with Bidirectional, unprivileged: error = %v, want the kubelet's refusal", err)
	}
}

// TestDownwardAPIMountReadOnly checks that a downwardAPI volume is mounted
// read-only even when its mount does not say so, as with the kubelet.
func TestDownwardAPIMountReadOnly(t *testing.T) {
	p := simplePod(t, "    volumeMounts:\n    - {name: info, mountPath: /info}\n    - {name: data, mountPath: /data}\n",
		"  volumes:\n  - name: info\n    downwardAPI:\n      items:\n      - {path: name, fieldRef: {fieldPath: metadata.name}}\n  - {name: data, emptyDir: {}}\n")
	s := mustContainer(t, p, ContainerOptions{Image: ImageConfig{Cmd: []string{"sh"}}, Volumes: map[string]string{"info": "/p/info", "data": "/p/data"}})
	if m := mountAt(t, s.Mounts, "/info"); !slices.Contains(m.Options, "ro") {
		t.Errorf("downwardAPI mount options = %q, want ro", m.Options)
	}
	if m := mountAt(t, s.Mounts, "/data"); !slices.Contains(m.Options, "rw") {
		t.Errorf("emptyDir mount options = %q, want rw", m.Options)
	}
}

func TestDownwardAPIFiles(t *testing.T) {
	p := decodePod(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: prod
  labels:
    tier: front
    app: web
  annotations:
    note: "say \"hi\"\nbye"
spec:
  containers:
  - name: c
    image: busybox
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {memory: 128Mi}
  volumes:
  - name: info
    downwardAPI:
      defaultMode: 0600
      items:
      - {path: name, fieldRef: {fieldPath: metadata.name}}
      - {path: namespace, fieldRef: {fieldPath: metadata.namespace}}
      - {path: uid, fieldRef: {fieldPath: metadata.uid}}
      - {path: labels, mode: 0444, fieldRef: {fieldPath: metadata.labels}}
      - {path: meta/annotations, fieldRef: {fieldPath: metadata.annotations}}
      - {path: app, fieldRef: {fieldPath: "metadata.labels['app']"}}
      - {path: ./cpu-request, resourceFieldRef: {containerName: c, resource: requests.cpu, divisor: 1m}}
      - {path: mem-limit, resourceFieldRef: {containerName: c, resource: limits.memory, divisor: 1Mi}}
      - {path: cpu-limit, resourceFieldRef: {containerName: c, resource: limits.cpu}}
`)
	node := NodeFacts{CPU: resource.MustParse("3"), Memory: resource.MustParse("8Gi")}
	files, err := DownwardAPIFiles(p, p.Spec.Volumes[0].DownwardAPI, node)
	if err != nil {
		t.Fatalf("DownwardAPIFiles: %v", err)
	}
	// The static pod's annotations (config.hash...) come with the manifest's.
	var annotations []string
	for _, k := range []string{"kubernetes.io/config.hash", "kubernetes.io/config.seen", "kubernetes.io/config.source", "note"} {
		if v, ok := p.Annotations[k]; ok {
			annotations = append(annotations, k+"="+strconv.Quote(v))
		}
	}
	want := map[string]VolumeFile{
		"name":             {[]byte(p.Name), 0o600},
		"namespace":        {[]byte("prod"), 0o600},
		"uid":              {[]byte(p.UID), 0o600},
		"labels":           {[]byte(`app="web"` + "\n" + `tier="front"`), 0o444},
		"meta/annotations": {[]byte(strings.Join(annotations, "\n")), 0o600},
		"app":              {[]byte("web"), 0o600},
		"cpu-request":      {[]byte("250"), 0o600},
		"mem-limit":        {[]byte("128"), 0o600},
		"cpu-limit":        {[]byte("3"), 0o600}, // no limit: the node's capacity
	}
	if len(files) != len(want) {
		t.Errorf("DownwardAPIFiles gave %d files, want %d: %v", len(files), len(want), keys(files))
	}
	for path, w := range want {
		got, ok := files[path]
		if !ok {
			t.Errorf("DownwardAPIFiles has no %q; has %v", path, keys(files))
			continue
		}
		if string(got.Data) != string(w.Data) || got.Mode != w.Mode {
			t.Errorf("DownwardAPIFiles[%q] = %q %v, want %q %v", path, got.Data, got.Mode, w.Data, w.Mode)
		}
	}
	if !strings.Contains(string(files["meta/annotations"].Data), `note="say \"hi\"\nbye"`) {
		t.Errorf("annotations file = %q, want the note quoted as Go quotes it", files["meta/annotations"].Data)
	}

	// Without a defaultMode (not decoded), files get the API's 0644.
	src := &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	files, err = DownwardAPIFiles(p, src, node)
	if err != nil || files["n"].Mode != fs.FileMode(0o644) {
		t.Errorf("DownwardAPIFiles without defaultMode = %v, %v; want mode 0644", files, err)
	}
	// An unknown container is an error naming the item.
	src = &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{{Path: "cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}}}}
	if _, err := DownwardAPIFiles(p, src, node); err == nil || !strings.Contains(err.Error(), "items[0] (cpu)") || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("DownwardAPIFiles with an unknown container: error = %v, want one naming items[0] and the container", err)
	}
}

func TestFormatMap(t *testing.T) {
	tests := []struct {
		in   map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{"a": "1"}, `a="1"`},
		{map[string]string{"b": "2", "a": "x y", "c": "tab\there"}, "a=\"x y\"\nb=\"2\"\nc=\"tab\\there\""},
	}
	for _, tt := range tests {
		if got := formatMap(tt.in); got != tt.want {
			t.Errorf("formatMap(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMemoryVolumeSize(t *testing.T) {
	const node = 8 << 30
	tests := []struct {
		name       string
		containers string
		sizeLimit  string
		nodeMemory int64
		want       int64
	}{
		{name: "no limits: the node's memory", nodeMemory: node, want: node},
		{name: "sizeLimit", sizeLimit: "8Mi", nodeMemory: node, want: 8 << 20},
		{name: "sizeLimit above the node", sizeLimit: "16Gi", nodeMemory: node, want: node},
		{name: "pod limit", containers: "a:64Mi,b:32Mi", nodeMemory: node, want: 96 << 20},
		{name: "pod limit and smaller sizeLimit", containers: "a:64Mi", sizeLimit: "8Mi", nodeMemory: node, want: 8 << 20},
		{name: "pod limit and larger sizeLimit", containers: "a:64Mi", sizeLimit: "1Gi", nodeMemory: node, want: 64 << 20},
		{name: "a container without a limit: no pod limit", containers: "a:64Mi,b:", nodeMemory: node, want: node},
		{name: "node memory unknown, sizeLimit", sizeLimit: "8Mi", want: 8 << 20},
		{name: "node memory unknown, nothing", want: 0},
		{name: "zero sizeLimit means none", sizeLimit: "0", nodeMemory: node, want: node},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, "", "")
			if tt.containers != "" {
				p.Spec.Containers = nil
				for _, c := range strings.Split(tt.containers, ",") {
					name, limit, _ := strings.Cut(c, ":")
					ctr := v1.Container{Name: name, Image: "busybox"}
					if limit != "" {
						ctr.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(limit)}
					}
					p.Spec.Containers = append(p.Spec.Containers, ctr)
				}
			}
			ed := &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}
			if tt.sizeLimit != "" {
				q := resource.MustParse(tt.sizeLimit)
				ed.SizeLimit = &q
			}
			if got := MemoryVolumeSize(p, ed, tt.nodeMemory); got != tt.want {
				t.Errorf("MemoryVolumeSize = %d, want %d", got, tt.want)
			}
		})
	}
}

func mountAt(t *testing.T, mounts []specs.Mount, dest string) specs.Mount {
	t.Helper()
	for _, m := range mounts {
		if m.Destination == dest {
			return m
		}
	}
	t.Fatalf("no mount at %s in %+v", dest, mounts)
	return specs.Mount{}
}

func keys(m map[string]VolumeFile) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
