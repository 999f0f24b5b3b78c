package pod

import "testing"

func TestImageName(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox":                "docker.io/library/busybox:latest",
		"busybox:1.36":           "docker.io/library/busybox:1.36",
		"localhost/imported:v1":  "localhost/imported:v1",
		"registry.k8s.io/etcd:3": "registry.k8s.io/etcd:3",
		"Not A Reference":        "Not A Reference",
		"127.0.0.1:5000/x":       "127.0.0.1:5000/x:latest",
	} {
		if got := ImageName(ref); got != want {
			t.Errorf("ImageName(%q) = %q, want %q", ref, got, want)
		}
	}
}
