package pod

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestContainerPort(t *testing.T) {
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{intstr.FromInt(9000), 9000, false},
		{intstr.FromString("http"), 8080, false},
		{intstr.FromString("8081"), 8081, false},
		{intstr.FromString("metrics"), 0, true},
	}
	for _, tt := range tests {
		got, err := ContainerPort(tt.port, c)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ContainerPort(%s) = %d, %v; want %d, error %v", tt.port.String(), got, err, tt.want, tt.wantErr)
		}
	}
}

func TestHTTPGetURL(t *testing.T) {
	tests := []struct {
		get  v1.HTTPGetAction
		want string
	}{
		{v1.HTTPGetAction{Path: "/healthz"}, "http://127.0.0.1:8080/healthz"},
		{v1.HTTPGetAction{Path: "/health?exclude=NOSPACE&serializable=true", Scheme: v1.URISchemeHTTPS}, "https://127.0.0.1:8080/health?exclude=NOSPACE&serializable=true"},
		{v1.HTTPGetAction{}, "http://127.0.0.1:8080"},
	}
	for _, tt := range tests {
		if got := HTTPGetURL(&tt.get, "127.0.0.1", 8080).String(); got != tt.want {
			t.Errorf("HTTPGetURL(%+v) = %q, want %q", tt.get, got, tt.want)
		}
	}
}
