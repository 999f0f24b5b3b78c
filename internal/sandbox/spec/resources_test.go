package spec

import (
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCPUShares(t *testing.T) {
	tests := []struct {
		milli int64
		want  uint64
	}{
		{-5, 2}, {0, 2}, {1, 2}, {2, 2}, {3, 3}, {100, 102}, {250, 256}, {1000, 1024},
		{256000, 262144}, {500000, 262144},
	}
	for _, tt := range tests {
		if got := CPUShares(tt.milli); got != tt.want {
			t.Errorf("CPUShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
}

func TestCPUQuota(t *testing.T) {
	tests := []struct {
		milli, period, want int64
	}{
		{0, 100000, 0}, {1, 100000, 1000}, {10, 100000, 1000}, {11, 100000, 1100},
		{100, 100000, 10000}, {1500, 100000, 150000}, {4000, 50000, 200000},
	}
	for _, tt := range tests {
		if got := CPUQuota(tt.milli, tt.period); got != tt.want {
			t.Errorf("CPUQuota(%d, %d) = %d, want %d", tt.milli, tt.period, got, tt.want)
		}
	}
}

func TestHugePageSizeName(t *testing.T) {
	tests := []struct {
		bytes   int64
		want    string
		wantErr bool
	}{
		{2 << 20, "2MB", false}, {1 << 30, "1GB", false}, {64 << 10, "64KB", false},
		{1536, "1536B", false}, {0, "", true},
	}
	for _, tt := range tests {
		got, err := HugePageSizeName(tt.bytes)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("HugePageSizeName(%d) = %q, %v, want %q (error %v)", tt.bytes, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestPodCgroup(t *testing.T) {
	tests := []struct {
		qos  v1.PodQOSClass
		want string
	}{
		{v1.PodQOSGuaranteed, "/staticlet/podabc"},
		{v1.PodQOSBurstable, "/staticlet/burstable/podabc"},
		{v1.PodQOSBestEffort, "/staticlet/besteffort/podabc"},
	}
	for _, tt := range tests {
		if got := PodCgroup("/staticlet", tt.qos, "abc"); got != tt.want {
			t.Errorf("PodCgroup(/staticlet, %s, abc) = %q, want %q", tt.qos, got, tt.want)
		}
	}
}

// resourcesYAML is a container's resources block.
func resourcesYAML(requests, limits string) string {
	var b strings.Builder
	b.WriteString("    resources:\n")
	for _, l := range []struct{ name, kv string }{{"requests", requests}, {"limits", limits}} {
		if l.kv == "" {
			continue
		}
		b.WriteString("      " + l.name + ":\n")
		for _, kv := range strings.Split(l.kv, ",") {
			k, v, _ := strings.Cut(kv, "=")
			b.WriteString("        " + k + ": " + v + "\n")
		}
	}
	return b.String()
}

func TestContainerResources(t *testing.T) {
	const gi = int64(1) << 30
	nodeMem := 8 * gi
	all := ResourceFacts{MinOOMScoreAdj: MinOOMScoreAdj, Swap: true}
	tests := []struct {
		name            string
		requests, limit string
		podExtra        string
		facts           ResourceFacts
		wantShares      uint64
		wantQuota       int64 // 0: none
		wantMemory      int64 // 0: none
		wantSwap        int64 // 0: none
		wantOOM         int
	}{
		{name: "best effort", facts: all, wantShares: 2, wantOOM: 1000},
		{name: "guaranteed from limits", limit: "cpu=500m,memory=128Mi", facts: all,
			wantShares: 512, wantQuota: 50000, wantMemory: 128 << 20, wantSwap: 128 << 20, wantOOM: -997},
		{name: "guaranteed clamped to own score", limit: "cpu=500m,memory=128Mi", facts: ResourceFacts{Swap: true},
			wantShares: 512, wantQuota: 50000, wantMemory: 128 << 20, wantSwap: 128 << 20, wantOOM: 0},
		{name: "guaranteed without swap accounting", limit: "cpu=2,memory=1Gi", facts: ResourceFacts{MinOOMScoreAdj: -999},
			wantShares: 2048, wantQuota: 200000, wantMemory: gi, wantOOM: -997},
		{name: "burstable scaled by memory request", requests: "cpu=250m,memory=1Gi", limit: "cpu=1,memory=2Gi", facts: all,
			wantShares: 256, wantQuota: 100000, wantMemory: 2 * gi, wantSwap: 2 * gi, wantOOM: 875},
		{name: "burstable requests only", requests: "cpu=100m,memory=2Gi", facts: all,
			wantShares: 102, wantOOM: 750},
		{name: "burstable with no memory request", requests: "cpu=100m", facts: all,
			wantShares: 102, wantOOM: 999},
		{name: "burstable asking for the whole node", requests: "memory=8Gi", facts: all,
			wantShares: 2, wantOOM: 3},
		{name: "burstable floor above the score", requests: "memory=4Gi", facts: ResourceFacts{MinOOMScoreAdj: 600},
			wantShares: 2, wantOOM: 600},
		{name: "tiny cpu limit", requests: "cpu=1m", limit: "cpu=5m", facts: all,
			wantShares: 2, wantQuota: 1000, wantOOM: 999},
		{name: "node critical", requests: "cpu=100m", podExtra: "  priorityClassName: system-node-critical", facts: all,
			wantShares: 102, wantOOM: -997},
		{name: "node critical clamped", requests: "cpu=100m", podExtra: "  priorityClassName: system-node-critical", facts: ResourceFacts{MinOOMScoreAdj: -500},
			wantShares: 102, wantOOM: -500},
		{name: "best effort above the floor", facts: ResourceFacts{MinOOMScoreAdj: 5}, wantShares: 2, wantOOM: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, "    command: [sh]\n"+resourcesYAML(tt.requests, tt.limit), tt.podExtra)
			node := NodeFacts{Memory: *resource.NewQuantity(nodeMem, resource.BinarySI)}
			s := mustContainer(t, p, ContainerOptions{Node: node, Resources: tt.facts})
			r := s.Linux.Resources
			if r.CPU == nil || r.CPU.Shares == nil || *r.CPU.Shares != tt.wantShares {
				t.Errorf("cpu shares = %v, want %d", r.CPU, tt.wantShares)
			}
			switch {
			case tt.wantQuota == 0 && r.CPU != nil && r.CPU.Quota != nil:
				t.Errorf("cpu quota = %d, want none", *r.CPU.Quota)
			case tt.wantQuota != 0 && (r.CPU.Quota == nil || *r.CPU.Quota != tt.wantQuota || r.CPU.Period == nil || *r.CPU.Period != 100000):
				t.Errorf("cpu quota/period = %v/%v, want %d/100000", r.CPU.Quota, r.CPU.Period, tt.wantQuota)
			}
			var mem, swap int64
			if r.Memory != nil && r.Memory.Limit != nil {
				mem = *r.Memory.Limit
			}
			if r.Memory != nil && r.Memory.Swap != nil {
				swap = *r.Memory.Swap
			}
			if mem != tt.wantMemory || swap != tt.wantSwap {
				t.Errorf("memory limit/swap = %d/%d, want %d/%d", mem, swap, tt.wantMemory, tt.wantSwap)
			}
			if s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != tt.wantOOM {
				t.Errorf("oom_score_adj = %v, want %d", s.Process.OOMScoreAdj, tt.wantOOM)
			}
			if len(r.Devices) == 0 {
				t.Errorf("device rules lost: %+v", r)
			}
		})
	}
}

func TestSidecarOOMScoreAdj(t *testing.T) {
	p := decodePod(t, `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers:
  - name: proxy
    image: busybox
    restartPolicy: Always
    resources: {requests: {memory: 100Mi}}
  containers:
  - name: big
    image: busybox
    resources: {requests: {memory: 4Gi}}
  - name: small
    image: busybox
    resources: {requests: {memory: 2Gi}}
`)
	const node = int64(8) << 30
	for _, tt := range []struct {
		c    *v1.Container
		want int
	}{
		{&p.Spec.InitContainers[0], 750}, // no more than the smallest app container
		{&p.Spec.Containers[0], 500},
		{&p.Spec.Containers[1], 750},
	} {
		if got := OOMScoreAdj(p, tt.c, node); got != tt.want {
			t.Errorf("OOMScoreAdj(%s) = %d, want %d", tt.c.Name, got, tt.want)
		}
	}
}

func TestHugePageLimits(t *testing.T) {
	limits := "cpu=1,memory=64Mi,hugepages-2Mi=4Mi"
	tests := []struct {
		name    string
		limits  string
		sizes   []string
		want    []specs.LinuxHugepageLimit
		wantErr string
	}{
		{"limited, other sizes 0", limits, []string{"2MB", "1GB"},
			[]specs.LinuxHugepageLimit{{Pagesize: "2MB", Limit: 4 << 20}, {Pagesize: "1GB", Limit: 0}}, ""},
		{"none asked: every size 0", "cpu=1", []string{"2MB"}, []specs.LinuxHugepageLimit{{Pagesize: "2MB", Limit: 0}}, ""},
		{"no hugetlb cgroup, none asked", "cpu=1", nil, nil, ""},
		{"no hugetlb cgroup", limits, nil, nil, "cannot limit huge pages of 2MB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(t, "    command: [sh]\n"+resourcesYAML(tt.limits, tt.limits), "")
			s, err := Container(p, &p.Spec.Containers[0], ContainerOptions{Resources: ResourceFacts{HugePageSizes: tt.sizes}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Container() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Linux.Resources.HugepageLimits; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hugepage limits = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSandboxResources(t *testing.T) {
	p := simplePod(t, "    command: [sh]\n", "")
	for _, tt := range []struct {
		floor, want int
	}{{MinOOMScoreAdj, -998}, {0, 0}, {-999, -998}} {
		s := Sandbox(p, SandboxOptions{Resources: ResourceFacts{MinOOMScoreAdj: tt.floor}})
		if s.Process.OOMScoreAdj == nil || *s.Process.OOMScoreAdj != tt.want {
			t.Errorf("sandbox oom_score_adj with floor %d = %v, want %d", tt.floor, s.Process.OOMScoreAdj, tt.want)
		}
		if cpu := s.Linux.Resources.CPU; cpu == nil || cpu.Shares == nil || *cpu.Shares != 2 {
			t.Errorf("sandbox cpu = %+v, want shares 2", cpu)
		}
	}
}

func TestPodResources(t *testing.T) {
	ctr := func(name, extra, requests, limits string) string {
		return "  - name: " + name + "\n    image: busybox\n" + extra + resourcesYAML(requests, limits)
	}
	tests := []struct {
		name       string
		inits      string
		apps       string
		sizes      []string
		wantShares uint64
		wantQuota  int64
		wantMemory int64
		wantHuge   []specs.LinuxHugepageLimit
		pids       int64 // the node's pod pids limit, and the pod's
	}{
		{name: "best effort", apps: ctr("a", "", "", ""), wantShares: 2},
		{name: "best effort, pids limited", apps: ctr("a", "", "", ""), wantShares: 2, pids: 100},
		{name: "guaranteed, pids limited", apps: ctr("a", "", "", "cpu=1,memory=100Mi"), pids: 4096,
			wantShares: 1024, wantQuota: 100000, wantMemory: 100 << 20},
		{name: "best effort, hugetlb zeroed", apps: ctr("a", "", "", ""), sizes: []string{"2MB"}, wantShares: 2,
			wantHuge: []specs.LinuxHugepageLimit{{Pagesize: "2MB"}}},
		{name: "guaranteed sums", apps: ctr("a", "", "", "cpu=500m,memory=100Mi") + ctr("b", "", "", "cpu=250m,memory=50Mi"),
			wantShares: 768, wantQuota: 75000, wantMemory: 150 << 20},
		{name: "burstable, all limited", apps: ctr("a", "", "cpu=100m,memory=10Mi", "cpu=1,memory=100Mi") + ctr("b", "", "", "cpu=1,memory=100Mi"),
			wantShares: 1126, wantQuota: 200000, wantMemory: 200 << 20},
		{name: "burstable, one without a cpu limit", apps: ctr("a", "", "cpu=100m", "memory=100Mi") + ctr("b", "", "", "cpu=1,memory=100Mi"),
			wantShares: 1126, wantMemory: 200 << 20},
		{name: "burstable, one without limits", apps: ctr("a", "", "cpu=100m,memory=10Mi", "") + ctr("b", "", "", "cpu=1,memory=100Mi"),
			wantShares: 1126},
		{name: "init container above the apps", inits: ctr("init", "", "", "cpu=2,memory=1Gi"), apps: ctr("a", "", "", "cpu=1,memory=100Mi"),
			wantShares: 2048, wantQuota: 200000, wantMemory: 1 << 30},
		{name: "sidecar adds to the apps and to later inits",
			inits: ctr("side", "    restartPolicy: Always\n", "", "cpu=1,memory=100Mi") + ctr("init", "", "", "cpu=1500m,memory=100Mi"),
			apps:  ctr("a", "", "", "cpu=1,memory=100Mi"),
			// max(side+a = 2, side+init = 2.5)
			wantShares: 2560, wantQuota: 250000, wantMemory: 200 << 20},
		{name: "hugepages from requests", apps: ctr("a", "", "", "cpu=1,memory=100Mi,hugepages-2Mi=8Mi"), sizes: []string{"2MB", "1GB"},
			wantShares: 1024, wantQuota: 100000, wantMemory: 100 << 20,
			wantHuge: []specs.LinuxHugepageLimit{{Pagesize: "2MB", Limit: 8 << 20}, {Pagesize: "1GB"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n"
			if tt.inits != "" {
				m += "  initContainers:\n" + tt.inits
			}
			m += "  containers:\n" + tt.apps
			p := decodePod(t, m)
			r, err := PodResources(p, ResourceFacts{HugePageSizes: tt.sizes, PodPidsLimit: tt.pids})
			if err != nil {
				t.Fatal(err)
			}
			if r.CPU == nil || r.CPU.Shares == nil || *r.CPU.Shares != tt.wantShares {
				t.Errorf("pod cpu shares = %+v, want %d", r.CPU, tt.wantShares)
			}
			var quota, mem int64
			if r.CPU != nil && r.CPU.Quota != nil {
				quota = *r.CPU.Quota
			}
			if r.Memory != nil && r.Memory.Limit != nil {
				mem = *r.Memory.Limit
			}
			if quota != tt.wantQuota || mem != tt.wantMemory {
				t.Errorf("pod cpu quota/memory = %d/%d, want %d/%d", quota, mem, tt.wantQuota, tt.wantMemory)
			}
			var pids int64
			if r.Pids != nil && r.Pids.Limit != nil {
				pids = *r.Pids.Limit
			}
			if pids != tt.pids {
				t.Errorf("pod pids limit = %d, want %d", pids, tt.pids)
			}
			if !reflect.DeepEqual(r.HugepageLimits, tt.wantHuge) {
				t.Errorf("pod hugepage limits = %+v, want %+v", r.HugepageLimits, tt.wantHuge)
			}
		})
	}
}
