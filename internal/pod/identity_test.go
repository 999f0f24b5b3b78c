package pod

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestFullName(t *testing.T) {
	tests := []struct{ name, node, want string }{
		{"etcd", "master-0", "etcd-master-0"},
		{"etcd", "Master-0.Example.COM", "etcd-master-0.example.com"},
	}
	for _, tc := range tests {
		if got := FullName(tc.name, tc.node); got != tc.want {
			t.Errorf("FullName(%q, %q) = %q, want %q", tc.name, tc.node, got, tc.want)
		}
	}
}

func TestIdentity(t *testing.T) {
	p := decodeOne(t, webPod, testOpts)
	if p.Name != "web-node-1" || p.Key() != (Key{Namespace: "default", Name: "web-node-1"}) {
		t.Errorf("name = %q, key = %v, want web-node-1 in default", p.Name, p.Key())
	}
	if len(p.UID) != 32 {
		t.Errorf("UID = %q, want 32 hex digits", p.UID)
	}
	want := map[string]string{
		AnnotationSource: SourceFile,
		AnnotationHash:   string(p.UID),
		AnnotationSeen:   "2025-01-02T03:04:05.000000006Z",
	}
	for k, v := range want {
		if p.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, p.Annotations[k], v)
		}
	}
	if p.Source != "test.yaml" {
		t.Errorf("Source = %q, want test.yaml", p.Source)
	}
}

func TestUID(t *testing.T) {
	uid := func(manifest, path string, opts Options) string {
		t.Helper()
		pods, err := Decode(path, []byte(manifest), opts)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		return string(pods[0].UID)
	}
	base := uid(webPod, "/m/web.yaml", testOpts)
	later := testOpts
	later.Seen = later.Seen.Add(time.Hour)
	other := testOpts
	other.NodeName = "node-2"
	http := testOpts
	http.SourceKind = SourceHTTP

	tests := []struct {
		name string
		got  string
		same bool
	}{
		{"same input", uid(webPod, "/m/web.yaml", testOpts), true},
		{"seen later", uid(webPod, "/m/web.yaml", later), true},
		{"other node", uid(webPod, "/m/web.yaml", other), false},
		{"other path", uid(webPod, "/m/web2.yaml", testOpts), false},
		{"http source", uid(webPod, "/m/web.yaml", http), false},
		{"edited", uid(strings.Replace(webPod, "nginx:1.27", "nginx:1.28", 1), "/m/web.yaml", testOpts), false},
	}
	for _, tc := range tests {
		if (tc.got == base) != tc.same {
			t.Errorf("%s: UID %q vs %q, want same = %v", tc.name, tc.got, base, tc.same)
		}
	}
	given := strings.Replace(webPod, "  name: web\n", "  name: web\n  uid: 1234-abcd\n", 1)
	if got := uid(given, "/m/web.yaml", testOpts); got != "1234-abcd" {
		t.Errorf("UID with metadata.uid set = %q, want 1234-abcd", got)
	}
}

func TestSandboxHash(t *testing.T) {
	const base = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  initContainers:
  - name: init
    image: busybox
    args: [a]
  containers:
  - name: web
    image: nginx:1.27
    args: [a]
    ports:
    - containerPort: 80
`
	hash := func(manifest string, opts Options) string {
		t.Helper()
		return decodeOne(t, manifest, opts).SandboxHash
	}
	later := testOpts
	later.Seen = later.Seen.Add(time.Hour)
	want := hash(base, testOpts)
	tests := []struct {
		name     string
		manifest string
		opts     Options
		same     bool
	}{
		{"same input", base, testOpts, true},
		{"seen later", base, later, true},
		{"container args", strings.Replace(base, "args: [a]\n    ports", "args: [b]\n    ports", 1), testOpts, true},
		{"container image", strings.Replace(base, "nginx:1.27", "nginx:1.28", 1), testOpts, true},
		{"container port", strings.Replace(base, "containerPort: 80", "containerPort: 81", 1), testOpts, true},
		{"host port", strings.Replace(base, "containerPort: 80", "containerPort: 80\n      hostPort: 8080", 1), testOpts, false},
		{"hostNetwork", strings.Replace(base, "spec:\n", "spec:\n  hostNetwork: true\n", 1), testOpts, false},
		{"init container args", strings.Replace(base, "args: [a]\n  containers", "args: [b]\n  containers", 1), testOpts, false},
		{"label", strings.Replace(base, "app: web", "app: web2", 1), testOpts, false},
		{"annotation", strings.Replace(base, "  labels:", "  annotations:\n    a: b\n  labels:", 1), testOpts, false},
	}
	for _, tc := range tests {
		if got := hash(tc.manifest, tc.opts); (got == want) != tc.same {
			t.Errorf("%s: SandboxHash %q vs %q, want same = %v", tc.name, got, want, tc.same)
		}
	}
}

func TestContainerHash(t *testing.T) {
	c := &v1.Container{Name: "web", Image: "nginx", Args: []string{"a"}}
	want := ContainerHash(c)
	if want != ContainerHash(c.DeepCopy()) {
		t.Error("ContainerHash differs for equal containers")
	}
	// A fixed value guards stability across processes and Go versions:
	// running containers are matched to manifests by this hash, so a change
	// here (say, from a k8s.io/api upgrade adding a field that is always
	// encoded) restarts every container after an upgrade of staticlet.
	if want != "e9fa6ec5ca6d882c" {
		t.Errorf("ContainerHash = %s, want e9fa6ec5ca6d882c", want)
	}
	changed := c.DeepCopy()
	changed.Args = []string{"b"}
	if ContainerHash(changed) == want {
		t.Error("ContainerHash unchanged after changing args")
	}
	env := c.DeepCopy()
	env.Env = []v1.EnvVar{{Name: "A", Value: "1"}}
	if ContainerHash(env) == want {
		t.Error("ContainerHash unchanged after adding env")
	}
}
