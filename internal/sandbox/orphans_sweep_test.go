package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pause"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
)

// TestSweepPodFiles: the files of a pod with no container and no manifest
// go; those of a pod with a container, of a wanted pod, and a log
// directory staticlet has no pod directory for (a kubelet's, in a shared
// /var/log/pods) stay.
func TestSweepPodFiles(t *testing.T) {
	h := newHarness(t)
	live := h.decode("/m/live.yaml", podManifest(""))
	h.createSandbox(live)
	const orphan, wanted, kubelets = "00000000000000000000000000000001", "00000000000000000000000000000002", "00000000000000000000000000000003"
	mkdirs(t,
		h.rt.PodDir(orphan), filepath.Join(h.rt.PodDir(orphan), "volumes", "empty-dir", "data"),
		filepath.Join(h.rt.PodLogDir("default", "gone-n", orphan), "app"),
		h.rt.PodDir(wanted), filepath.Join(h.rt.PodLogDir("default", "wanted-n", wanted), "app"),
		filepath.Join(h.rt.PodLogDir("kube-system", "etcd-n", kubelets), "etcd"),
	)
	removed, err := h.rt.SweepPodFiles(h.ctx(), func(uid string) bool { return uid == wanted })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{orphan}) {
		t.Errorf("SweepPodFiles removed %v, want only %s", removed, orphan)
	}
	for path, want := range map[string]bool{
		h.rt.PodDir(orphan): false, h.rt.PodLogDir("default", "gone-n", orphan): false,
		h.rt.PodDir(wanted): true, h.rt.PodLogDir("default", "wanted-n", wanted): true,
		h.rt.PodDir(string(live.UID)):                     true,
		h.rt.PodLogDir("kube-system", "etcd-n", kubelets): true,
	} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("after the sweep, stat %s: %v; want it there: %v", path, err, want)
		}
	}
}

// TestSweepShims: a shim of staticlet's namespace on this containerd that
// serves no task is stopped, with its child and its socket, once two
// sweeps a call timeout apart find it so; the shims of running pods are
// left be: a shim of a pod's own (a critical pod's, as every pod's before
// shims were shared) and a shared one whose first pod, that started it,
// is gone.
func TestSweepShims(t *testing.T) {
	h := newHarness(t)
	rt, err := New(h.ctx(), Config{
		Address: h.env.Address, Namespace: testNS, RootDir: h.root, Logs: LogConfig{Dir: h.logs},
		Pause: pause.Config{Binary: pauseBinary(t)}, Snapshotter: h.env.Snapshotter,
		CallTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	var kept []uint32
	critical := h.decode("/m/critical.yaml", podManifest("  priorityClassName: system-node-critical\n"))
	// Sandboxes with pause processes, as earlier builds made: each is a
	// task that keeps its shim.
	kept = append(kept, h.pauseSandbox(critical).Pid)
	for i, name := range []string{"first", "second"} {
		sb := h.pauseSandbox(h.decode("/m/"+name+".yaml", podManifest("")))
		if i == 0 {
			if err := h.rt.RemoveContainer(h.ctx(), sb.ID); err != nil {
				t.Fatalf("RemoveContainer(%s): %v", sb.ID, err)
			}
			continue
		}
		kept = append(kept, sb.Pid)
	}

	// A process that looks like a shim containerd lost: its command line
	// names this containerd and namespace, its bundle a shared group, and
	// it runs a child.
	bundle := filepath.Join(t.TempDir(), "0123456789abcdef")
	mkdirs(t, bundle)
	const group = "staticlet-besteffort-test"
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"annotations":{"`+shimGroup+`":"`+group+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	socket := shimSocket(nil, h.env.Address, testNS, group)
	if err := os.WriteFile(socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(socket) })
	fake := exec.Command("/bin/sh", "-c", "sleep 600 & wait", "sh",
		"-namespace", testNS, "-id", filepath.Base(bundle), "-address", h.env.Address)
	fake.Args[0] = "/usr/bin/containerd-shim-runc-v2"
	fake.Dir = bundle
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = fake.Wait(); close(exited) }()
	t.Cleanup(func() { _ = fake.Process.Kill(); <-exited })
	var child int
	waitFor(t, 10*time.Second, "the fake shim's child", func() (bool, string) {
		procs, _ := procfs.List()
		for _, p := range procs {
			if p.PPID == fake.Process.Pid && len(p.Args) > 0 && p.Args[0] == "sleep" {
				child = p.PID
			}
		}
		return child != 0, "none yet"
	})

	if n, err := rt.SweepShims(context.Background()); n != 0 || err != nil {
		t.Fatalf("first SweepShims = %d, %v; want 0 stopped (a shim may be starting its task)", n, err)
	}
	waitFor(t, 10*time.Second, "a later sweep stopping the fake shim", func() (bool, string) {
		n, err := rt.SweepShims(context.Background())
		return n == 1 && err == nil, fmt.Sprintf("stopped %d, %v", n, err)
	})
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the fake shim still runs after the sweep stopped it")
	}
	waitFor(t, 10*time.Second, "its child gone", func() (bool, string) {
		p, err := procfs.Read(child)
		return err != nil || p.State == 'Z', "still there"
	})
	if _, err := os.Stat(socket); err == nil {
		t.Errorf("the fake shim's socket %s is left", socket)
	}
	for _, pid := range kept {
		if gone(pid) {
			t.Errorf("the pause %d of a running pod went with the sweep", pid)
		}
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
