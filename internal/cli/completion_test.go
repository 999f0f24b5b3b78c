package cli

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodNames(t *testing.T) {
	pod := func(ns, name string) v1.Pod { return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}} }
	pods := []v1.Pod{pod("default", "a"), pod("kube-system", "a"), pod("kube-system", "b"), pod("x", "c"), pod("y", "c")}
	for _, tt := range []struct {
		ns   string
		want []string
	}{
		{"", []string{"a", "kube-system/a", "b", "x/c", "y/c"}},
		{"kube-system", []string{"a", "b"}},
		{"none", nil},
	} {
		if got := podNames(pods, tt.ns); !slices.Equal(got, tt.want) {
			t.Errorf("podNames(pods, %q) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}
