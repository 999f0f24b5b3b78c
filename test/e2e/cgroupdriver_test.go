package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// requireSystemdInit skips a test that needs systemd as the init system
// where it is not: these run in the test machine (TestVM...), which boots
// one.
func requireSystemdInit(t *testing.T) {
	t.Helper()
	if !cgroups.SystemdBooted() {
		t.Skip("needs systemd as the init system; TestVM runs it in a machine that has it")
	}
}

// TestSystemdCgroupDriver: with --cgroup-driver=systemd, each pod is a
// slice systemd made with the pod's limits, in the kubelet's layout under
// staticlet.slice, each container a scope in its pod's slice with its own
// limits, which systemd-cgls shows; an OOM kill is reported as
// OOMKilled; removing the pods leaves no unit and no cgroup of theirs.
func TestSystemdCgroupDriver(t *testing.T) {
	requireSystemdInit(t)
	e := harness.NewEnv(t)
	d := e.Start("--cgroup-driver", "systemd", "--pod-max-pids", "1024")
	root := harness.TestNS // the root slice's name, as the namespace has no dash
	tests := []struct {
		name, resources string
		slice           string // the pod slice's path, below the root slice, with UID for the pod's
		weight, max     string // cpu.weight, cpu.max of the pod slice
		memory          string // memory.max of the pod slice and the container
	}{
		{"guaranteed", "    resources:\n      limits: {cpu: 200m, memory: 32Mi}\n",
			root + "-podUID.slice", "8", "20000 100000", strconv.Itoa(32 << 20)},
		{"burstable", "    resources:\n      requests: {cpu: 250m, memory: 64Mi}\n      limits: {cpu: 500m, memory: 128Mi}\n",
			root + "-burstable.slice/" + root + "-burstable-podUID.slice", "10", "50000 100000", strconv.Itoa(128 << 20)},
		{"besteffort", "",
			root + "-besteffort.slice/" + root + "-besteffort-podUID.slice", "1", "max 100000", "max"},
	}
	for _, tt := range tests {
		e.Write(tt.name+".yaml", strings.NewReplacer("NAME", tt.name, "RESOURCES", tt.resources).Replace(resourcesPod))
	}
	e.Write("oom.yaml", strings.Split(oomPods, "---\n")[0])

	var units []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := d.In(t)
			p := d.WaitPod(tt.name+"-"+harness.TestNode, 60*time.Second, tt.name+" running", harness.Running)
			cs := p.Status.ContainerStatuses[0]
			pid, err := e.PidOf(cs)
			if err != nil {
				t.Fatal(err)
			}
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			sliceDir := "/" + root + ".slice/" + strings.ReplaceAll(tt.slice, "UID", string(p.UID))
			scope := sliceDir + "/" + root + "-" + id + ".scope"
			if got := procCgroups(t, pid)[""]; got != scope {
				t.Fatalf("container cgroup = %q, want %q", got, scope)
			}
			unit := filepath.Base(sliceDir)
			units = append(units, unit)
			if out, err := exec.Command("systemctl", "is-active", unit).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "active" {
				t.Errorf("systemctl is-active %s: %v %s, want active", unit, err, out)
			}
			expectFile(t, "pod slice", "/sys/fs/cgroup"+sliceDir+"/cpu.weight", tt.weight)
			expectFile(t, "pod slice", "/sys/fs/cgroup"+sliceDir+"/cpu.max", tt.max)
			expectFile(t, "pod slice", "/sys/fs/cgroup"+sliceDir+"/memory.max", tt.memory)
			expectFile(t, "pod slice", "/sys/fs/cgroup"+sliceDir+"/pids.max", "1024")
			expectFile(t, "container", "/sys/fs/cgroup"+scope+"/memory.max", tt.memory)
			if tt.memory != "max" {
				expectFile(t, "container", "/sys/fs/cgroup"+scope+"/memory.swap.max", "0")
			}
			out, err := exec.Command("systemd-cgls", "--no-pager", "/"+root+".slice").CombinedOutput()
			if err != nil || !strings.Contains(string(out), filepath.Base(scope)) || !strings.Contains(string(out), unit) {
				t.Errorf("systemd-cgls /%s.slice (%v) does not show %s in %s:\n%s", root, err, filepath.Base(scope), unit, out)
			}
		})
	}
	oom := d.WaitPod("oom-app-"+harness.TestNode, 60*time.Second, "oom-app OOMKilled", func(p *v1.Pod) bool {
		st := p.Status.ContainerStatuses[0].State
		return st.Terminated != nil && st.Terminated.Reason == "OOMKilled"
	})
	units = append(units, root+"-burstable-pod"+string(oom.UID)+".slice")
	if t.Failed() {
		return
	}

	for _, tt := range tests {
		e.Remove(tt.name + ".yaml")
	}
	e.Remove("oom.yaml")
	// Only these pods' units: an earlier test's may be about.
	harness.WaitFor(t, 60*time.Second, "no pod unit or cgroup left", func() (bool, string) {
		out, _ := exec.Command("systemctl", append([]string{"list-units", "--all", "--plain", "--no-legend"}, units...)...).CombinedOutput()
		var left []string
		if s := strings.TrimSpace(string(out)); s != "" {
			left = append(left, s)
		}
		_ = filepath.Walk("/sys/fs/cgroup/"+root+".slice", func(path string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() && slices.Contains(units, filepath.Base(path)) {
				left = append(left, path)
			}
			return nil
		})
		return len(left) == 0, fmt.Sprint(left)
	})
}
