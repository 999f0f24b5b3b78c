package netns

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		tier.Missing(t, "creating namespaces needs root")
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestCreateAndRemove(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name  string
		kinds []Kind
	}{
		{"all", []Kind{Net, UTS, IPC}},
		{"ipc only (host network)", []Kind{IPC}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir() + "/ns"
			if err := Create(Spec{Dir: dir, Kinds: tt.kinds, Hostname: "pod-a"}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			t.Cleanup(func() { _ = Remove(dir) })
			for _, k := range tt.kinds {
				if !Pinned(dir, k) {
					t.Errorf("Pinned(%s) = false after Create", k)
				}
				// No thread of this process is left in the pod's namespaces.
				tasks, _ := filepath.Glob("/proc/self/task/*/ns/" + string(k))
				for _, task := range tasks {
					if inode(t, Path(dir, k)) == inode(t, task) {
						t.Errorf("%s: %s is the pod's namespace", k, task)
					}
				}
			}
			for _, k := range []Kind{Net, UTS, IPC} {
				if !contains(tt.kinds, k) && Pinned(dir, k) {
					t.Errorf("Pinned(%s) = true, not asked for", k)
				}
			}
			if contains(tt.kinds, Net) {
				checkLoopbackUp(t, Path(dir, Net))
			}
			if contains(tt.kinds, UTS) {
				if got := hostnameIn(t, Path(dir, UTS)); got != "pod-a" {
					t.Errorf("host name in the pod's UTS namespace = %q, want pod-a", got)
				}
			}
			if err := Remove(dir); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("directory left after Remove: %v", err)
			}
			if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), dir) {
				t.Errorf("mount under %s left after Remove", dir)
			}
			if err := Remove(dir); err != nil {
				t.Errorf("second Remove: %v", err)
			}
		})
	}
}

func contains(kinds []Kind, k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

func checkLoopbackUp(t *testing.T, path string) {
	t.Helper()
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if lo.Attrs().Flags&unix.IFF_UP == 0 {
		t.Errorf("loopback is down in the new network namespace")
	}
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 {
		t.Errorf("%d links in the new network namespace, want only lo", len(links))
	}
}

// hostnameIn reads the host name in the UTS namespace at path, from a
// thread thrown away afterwards.
func hostnameIn(t *testing.T, path string) string {
	t.Helper()
	type result struct {
		name string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open(path)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWUTS); err != nil {
			done <- result{err: err}
			return
		}
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			done <- result{err: err}
			return
		}
		done <- result{name: unix.ByteSliceToString(u.Nodename[:])}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.name
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir() + "/ns"
	if err := Create(Spec{Dir: dir, Kinds: []Kind{Net, "bogus"}}); err == nil {
		t.Fatal("Create with an unknown kind succeeded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory left after a failed Create: %v", err)
	}
}
