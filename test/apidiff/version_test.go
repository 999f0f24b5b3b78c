package apidiff

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestKubernetesMatchesAPI checks that the apiserver code linked here is
// of the release whose API staticlet builds on: k8s.io/kubernetes v1.X.Y
// for k8s.io/api v0.X.Y in staticlet's go.mod, and every staging module
// replaced by v0.X.Y.
func TestKubernetesMatchesAPI(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	main, here := read("../../go.mod"), read("go.mod")
	api := regexp.MustCompile(`(?m)^\s*k8s\.io/api (v0\.\d+\.\d+)\s*$`).FindStringSubmatch(main)
	if api == nil {
		t.Fatal("no k8s.io/api requirement in staticlet's go.mod")
	}
	want := "v1." + strings.TrimPrefix(api[1], "v0.")
	kube := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)\s*$`).FindStringSubmatch(here)
	if kube == nil || kube[1] != want {
		t.Errorf("k8s.io/kubernetes is %v here, want %s (k8s.io/api %s in staticlet's go.mod)", kube, want, api[1])
	}
	replaced := regexp.MustCompile(`(?m)^\s*(k8s\.io/\S+) => k8s\.io/\S+ (v\S+)\s*$`).FindAllStringSubmatch(here, -1)
	if len(replaced) == 0 {
		t.Error("no k8s.io staging module is replaced in go.mod")
	}
	for _, m := range replaced {
		if m[2] != api[1] {
			t.Errorf("%s is replaced by %s, want %s", m[1], m[2], api[1])
		}
	}
}
