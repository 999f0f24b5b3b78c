package printers

import (
	"bytes"
	"testing"

	"github.com/staticlet/staticlet/internal/status"
)

func TestTopPods(t *testing.T) {
	pods := []status.PodStats{
		{Name: "busy", Usage: status.Usage{CPUNanoCores: 998_400_001, MemoryWorkingSetBytes: 1<<20 + 5}, Containers: []status.ContainerStats{
			{Name: "loop", Usage: status.Usage{CPUNanoCores: 997_000_000, MemoryWorkingSetBytes: 600 << 10}},
			{Name: "sidecar", Usage: status.Usage{CPUNanoCores: 1, MemoryWorkingSetBytes: 0}},
		}},
		{Name: "idle", Usage: status.Usage{}},
	}
	tests := []struct {
		name       string
		containers bool
		want       string
	}{
		{"pods", false, `NAME   CPU(cores)   MEMORY(bytes)
busy   999m         1Mi
idle   0m           0Mi
`},
		{"containers", true, `POD    NAME      CPU(cores)   MEMORY(bytes)
busy   loop      997m         0Mi
busy   sidecar   1m           0Mi
`},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := TopPods(&b, pods, tt.containers); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("%s: TopPods() =\n%s\nwant\n%s", tt.name, b.String(), tt.want)
		}
	}
}
