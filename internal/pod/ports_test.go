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
