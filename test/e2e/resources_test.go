package e2e

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const resourcesPod = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "100000"]
RESOURCES`

// TestResources runs pods of each QoS class and reads back, from the host,
// the cgroup settings and OOM score their containers got, their pod
// cgroups (with --pod-max-pids), and that the pod cgroups go with the pods.
func TestResources(t *testing.T) {
	if os.Getenv("STATICLET_TEST_CGROUP_DRIVER") == "systemd" {
		t.Skip("cgroupfs paths; TestSystemdCgroupDriver checks the systemd driver's")
	}
	e := harness.NewEnv(t)
	d := e.Start("--pod-max-pids", "1024")
	floor := oomFloor(t)
	tests := []struct {
		name      string
		qos       v1.PodQOSClass
		resources string
		qosDir    string // the pod cgroup's parent under /staticlet
		shares    string
		quota     string
		memory    int64 // 0: unlimited
		oom       int
		podShares string
		podQuota  string
		podMemory int64
	}{
		{
			name:      "burstable",
			qos:       v1.PodQOSBurstable,
			resources: "    resources:\n      requests: {cpu: 250m, memory: 64Mi}\n      limits: {cpu: 500m, memory: 128Mi}\n",
			qosDir:    "burstable/", shares: "256", quota: "50000", memory: 128 << 20,
			oom:       burstableOOM(t, 64<<20),
			podShares: "256", podQuota: "50000", podMemory: 128 << 20,
		},
		{
			name:      "guaranteed",
			qos:       v1.PodQOSGuaranteed,
			resources: "    resources:\n      limits: {cpu: 200m, memory: 32Mi}\n",
			qosDir:    "", shares: "204", quota: "20000", memory: 32 << 20,
			oom:       -997,
			podShares: "204", podQuota: "20000", podMemory: 32 << 20,
		},
		{
			name:   "besteffort",
			qos:    v1.PodQOSBestEffort,
			qosDir: "besteffort/", shares: "2", quota: "-1",
			oom:       1000,
			podShares: "2", podQuota: "-1",
		},
	}
	podCgroups := map[string]string{}
	for _, tt := range tests {
		e.Write(tt.name+".yaml", strings.NewReplacer("NAME", tt.name, "RESOURCES", tt.resources).Replace(resourcesPod))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := d.In(t)
			p := d.WaitPod(tt.name+"-"+harness.TestNode, 30*time.Second, tt.name+" running", harness.Running)
			if p.Status.QOSClass != tt.qos {
				t.Errorf("status QoS class = %q, want %q", p.Status.QOSClass, tt.qos)
			}
			cs := p.Status.ContainerStatuses[0]
			pid, err := e.PidOf(cs)
			if err != nil {
				t.Fatal(err)
			}
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			cg := procCgroups(t, pid)
			wantPath := "/staticlet/" + tt.qosDir + "pod" + string(p.UID) + "/" + id
			got := cg["cpu"]
			if v2 := cg[""]; unifiedMode() {
				got = v2
			}
			if got != wantPath {
				t.Fatalf("container cgroup = %q, want %q (all: %v)", got, wantPath, cg)
			}
			podPath := path.Dir(wantPath)
			podCgroups[tt.name] = podPath
			if hybrid := cg[""]; !unifiedMode() {
				// Hybrid mode: runc puts the process in the v2 hierarchy
				// too, which has no controllers to set.
				ctl, _ := os.ReadFile("/sys/fs/cgroup/unified" + hybrid + "/cgroup.controllers")
				t.Logf("v2 (hybrid) cgroup %q, controllers %q", hybrid, strings.TrimSpace(string(ctl)))
			}

			check := func(what, dir string, shares, quota string, memory int64) {
				t.Helper()
				if unifiedMode() {
					wantMax := "max 100000"
					if quota != "-1" {
						wantMax = quota + " 100000"
					}
					expectFile(t, what, "/sys/fs/cgroup"+dir+"/cpu.max", wantMax)
					mem := "max"
					if memory != 0 {
						mem = strconv.FormatInt(memory, 10)
					}
					expectFile(t, what, "/sys/fs/cgroup"+dir+"/memory.max", mem)
					return
				}
				expectFile(t, what, "/sys/fs/cgroup/cpu"+dir+"/cpu.shares", shares)
				expectFile(t, what, "/sys/fs/cgroup/cpu"+dir+"/cpu.cfs_quota_us", quota)
				if memory != 0 {
					expectFile(t, what, "/sys/fs/cgroup/memory"+dir+"/memory.limit_in_bytes", strconv.FormatInt(memory, 10))
				} else if v := readTrim(t, "/sys/fs/cgroup/memory"+dir+"/memory.limit_in_bytes"); len(v) < 15 {
					t.Errorf("%s memory.limit_in_bytes = %s, want unlimited", what, v)
				}
			}
			check("container", wantPath, tt.shares, tt.quota, tt.memory)
			if tt.memory != 0 && unifiedMode() {
				// No swap, as the kubelet's NoSwap.
				expectFile(t, "container", "/sys/fs/cgroup"+wantPath+"/memory.swap.max", "0")
			}
			if tt.memory != 0 && !unifiedMode() {
				if _, err := os.Stat("/sys/fs/cgroup/memory" + wantPath + "/memory.memsw.limit_in_bytes"); err == nil {
					expectFile(t, "container", "/sys/fs/cgroup/memory"+wantPath+"/memory.memsw.limit_in_bytes", strconv.FormatInt(tt.memory, 10))
				}
			}
			check("pod", podPath, tt.podShares, tt.podQuota, tt.podMemory)
			pids := "/sys/fs/cgroup/pids" + podPath + "/pids.max"
			if unifiedMode() {
				pids = "/sys/fs/cgroup" + podPath + "/pids.max"
			}
			expectFile(t, "pod", pids, "1024")
			sandboxPath := sandboxCgroup(e, t, string(p.UID))
			if path.Dir(sandboxPath) != podPath {
				t.Errorf("sandbox cgroup = %q, want one in %q", sandboxPath, podPath)
			}

			want := max(tt.oom, floor)
			expectFile(t, "container", fmt.Sprintf("/proc/%d/oom_score_adj", pid), strconv.Itoa(want))
		})
	}

	for _, tt := range tests {
		e.Remove(tt.name + ".yaml")
	}
	for _, tt := range tests {
		podPath, ok := podCgroups[tt.name]
		if !ok {
			continue
		}
		harness.WaitFor(t, 30*time.Second, tt.name+" pod cgroups removed", func() (bool, string) {
			if _, err := d.Pod(tt.name + "-" + harness.TestNode); err == nil {
				return false, "pod still listed"
			}
			left := cgroupDirs(podPath)
			return len(left) == 0, fmt.Sprint(left)
		})
	}
}

// sandboxCgroup returns the cgroup (v2's in unified mode, else cpu's) of
// the pause process of the pod with uid; for a sandbox without one, the
// cgroup its spec gives it.
func sandboxCgroup(e *harness.Env, t *testing.T, uid string) string {
	t.Helper()
	ctx := harness.NSCtx(context.Background())
	cs, err := e.Client.Containers(ctx, `labels."io.staticlet.kind"==sandbox,labels."io.staticlet.pod.uid"==`+uid)
	if err != nil || len(cs) != 1 {
		t.Fatalf("sandboxes of pod %s: %d, %v; want 1", uid, len(cs), err)
	}
	task, err := cs[0].Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		s, err := cs[0].Spec(ctx)
		if err != nil || s.Linux == nil {
			t.Fatalf("the spec of sandbox %s: %v", cs[0].ID(), err)
		}
		return s.Linux.CgroupsPath
	}
	if err != nil {
		t.Fatal(err)
	}
	cg := procCgroups(t, int(task.Pid()))
	if unifiedMode() {
		return cg[""]
	}
	return cg["cpu"]
}

// unifiedMode tells whether the host runs cgroup v2 only.
func unifiedMode() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// procCgroups maps each controller of process pid (and "" for v2) to its
// cgroup path.
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// cgroupDirs lists the directories of cgroup path in every hierarchy.
func cgroupDirs(cgroupPath string) []string {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", cgroupPath))
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", cgroupPath)); err == nil {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", cgroupPath))
	}
	return dirs
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

func expectFile(t *testing.T, what, path, want string) {
	t.Helper()
	if got := readTrim(t, path); got != want {
		t.Errorf("%s: %s = %q, want %q", what, path, got, want)
	}
}

// oomFloor is the lowest oom_score_adj staticlet can give, as it works it
// out: its own (this process's, which it inherits) unless it holds
// CAP_SYS_RESOURCE.
func oomFloor(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			mask, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if mask&(1<<24) != 0 { // CAP_SYS_RESOURCE
				return -1000
			}
		}
	}
	own, err := strconv.Atoi(readTrim(t, "/proc/self/oom_score_adj"))
	if err != nil {
		t.Fatal(err)
	}
	return own
}

// burstableOOM is the kubelet's oom_score_adj for a Burstable container
// requesting request bytes of this node's memory.
func burstableOOM(t *testing.T, request int64) int {
	t.Helper()
	var total int64
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(meminfo), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			total = kb * 1024
		}
	}
	adj := 1000 - 1000*request/total
	return int(min(max(adj, 3), 999))
}
