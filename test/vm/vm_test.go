package vm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testvm"
)

// vmFacts writes what TestVM checks of the guest to $RESULTS/facts, one
// key=value a line.
const vmFacts = `{
echo "pid1=$(cat /proc/1/comm)"
echo "cgroupfs=$(stat -fc %T /sys/fs/cgroup)"
echo "controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"
echo "containerd=$(systemctl is-active containerd)"
} | tee "$RESULTS/facts"
`

// vmTests are end-to-end tests (test/e2e) TestVM runs inside the guest,
// where the host's cgroup v1 hierarchy gives way to cgroup v2 under
// systemd: a pod's life (run, edit, delete, adoption after kill -9) with
// its hooks, its cgroups and their limits, OOM kills, its probes, its
// network; and the systemd cgroup driver, which needs systemd as PID 1, by
// itself and as kubeadm's kubelet config asks for it.
var vmTests = []string{"TestPodLifecycle", "TestAdoptionAfterKill", "TestLifecycleHooks", "TestResources",
	"TestOOMKilled", "TestLivenessRestarts", "TestReadinessFlips", "TestPodNetwork", "TestSystemdCgroupDriver",
	"TestKubeletConfigFile", "TestTopPods"}

// vmSystemdDriverTests run in the guest a second time, with every
// staticlet on the systemd cgroup driver. TestTopPods leaves its idle pod
// running for the clean-up, which deletes the pod's containers and then
// stops its slice itself (internal/testutil/ctrdtest).
var vmSystemdDriverTests = []string{"TestPodLifecycle", "TestAdoptionAfterKill", "TestOOMKilled", "TestPodNetwork", "TestTopPods"}

// TestVM boots a Debian guest under QEMU (internal/testutil/testvm), once, as each
// boot costs tens of seconds of emulation. It checks the guest is the
// machine the VM tests are for: systemd as PID 1, the unified cgroup
// hierarchy with the controllers staticlet sets, and the distribution's
// containerd running. It installs the .deb there and checks systemd runs
// it with the systemd cgroup driver and a node shutdown through logind
// (vmpackage_test.go). Then it runs vmTests there, against
// their own private containerd as everywhere, with this staticlet binary,
// and vmSystemdDriverTests again with the systemd cgroup driver.
func TestVM(t *testing.T) {
	if testvm.InGuest() {
		t.Skip("inside the test VM already")
	}
	files := vmPackageFiles(t)
	files["staticlet"] = harness.Binary(t)
	res := testvm.Run(t, testvm.Spec{
		Files:  files,
		Script: vmFacts + vmPackageScript,
		GoTests: []testvm.GoTest{{
			Package: "../e2e",
			Tests:   vmTests,
			Env:     map[string]string{"STATICLET_BIN": testvm.GuestDir + "/staticlet"},
			Timeout: 10 * time.Minute,
		}, {
			Package: "../e2e",
			Tests:   vmSystemdDriverTests,
			Env:     map[string]string{"STATICLET_BIN": testvm.GuestDir + "/staticlet", "STATICLET_TEST_CGROUP_DRIVER": "systemd"},
			Timeout: 6 * time.Minute,
		}},
		Timeout: 20 * time.Minute,
	})
	// A test that skipped in the guest did not run where it was meant to.
	for i, set := range [][]string{vmTests, vmSystemdDriverTests} {
		for _, name := range set {
			if !strings.Contains(res.GoTests[i].Output, "--- PASS: "+name+" ") {
				// Why, last: the end of a long output is what is kept.
				logged := testvm.Logged(res.GoTests[i].Output, name)
				t.Errorf("guest run %d: %s did not pass (skipped?); it logged:\n%s", i+1, name, strings.Join(logged[max(0, len(logged)-20):], "\n"))
			}
		}
	}
	if res.ExitCode != 0 {
		t.Fatalf("the facts script exited %d:\n%s", res.ExitCode, res.Output)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, "facts"))
	if err != nil {
		t.Fatal(err)
	}
	facts := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			facts[k] = v
		}
	}
	for _, want := range []struct{ key, value string }{
		{"pid1", "systemd"},
		{"cgroupfs", "cgroup2fs"},
		{"containerd", "active"},
	} {
		if got := facts[want.key]; got != want.value {
			t.Errorf("guest %s = %q, want %q", want.key, got, want.value)
		}
	}
	checkVMPackage(t, res.Dir, res.Output)
	controllers := strings.Fields(facts["controllers"])
	for _, c := range []string{"cpu", "memory", "io", "pids"} {
		if !slices.Contains(controllers, c) {
			t.Errorf("guest /sys/fs/cgroup/cgroup.controllers = %q, want %s among them", facts["controllers"], c)
		}
	}
}
