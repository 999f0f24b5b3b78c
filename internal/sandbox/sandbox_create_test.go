package sandbox

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// podManifest is a pod "web" in namespace ns with one container "c" of the
// test image; podExtra holds pod spec fields indented by two spaces.
func podManifest(podExtra string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: ns
spec:
` + podExtra + `  containers:
  - name: c
    image: localhost/busybox:test
`
}

// pinInode returns the namespace a pin file holds, in the form of the
// /proc/<pid>/ns links ("net:[4026532281]").
func pinInode(t *testing.T, dir string, k netns.Kind) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(netns.Path(dir, k), &st); err != nil {
		t.Fatalf("stat of the %s pin: %v", k, err)
	}
	return fmt.Sprintf("%s:[%d]", k, st.Ino)
}

// TestCreateSandbox: the sandbox of a pod whose containers share a PID
// namespace has a pause process, in the pod's pinned namespaces.
func TestCreateSandbox(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name         string
		podExtra     string
		wantHostNet  bool
		wantHostname string
	}{
		{name: "own network", wantHostname: "web-n"},
		{name: "spec.hostname", podExtra: "  hostname: myhost\n", wantHostname: "myhost"},
		{name: "host network", podExtra: "  hostNetwork: true\n", wantHostNet: true},
	}
	hostNet, hostUTS := nsLink(t, "self", "net"), nsLink(t, "self", "uts")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := *h
			h.t = t
			p := h.decode(fmt.Sprintf("/m/sb%d.yaml", i), podManifest(sharedPID+tt.podExtra))

			created := h.createSandbox(p)
			if created.ID == "" || created.State != pod.TaskCreated || created.Pid != 0 {
				t.Errorf("CreateSandbox() = %+v, want an ID and state created, no pid", created)
			}
			want := pod.Record{Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindSandbox, Hash: p.SandboxHash}
			if created.Pod != want.Pod || created.PodUID != want.PodUID || created.Kind != want.Kind ||
				created.Hash != want.Hash || created.Name != "" || created.SandboxID != "" {
				t.Errorf("CreateSandbox() = %+v, want identity %+v", created, want)
			}
			if fi, err := os.Stat(h.rt.PodDir(string(p.UID))); err != nil || !fi.IsDir() {
				t.Errorf("pod directory %s: %v, want a directory", h.rt.PodDir(string(p.UID)), err)
			}
			nsDir := h.rt.sandboxDir(created.ID)
			for _, k := range []netns.Kind{netns.Net, netns.UTS, netns.IPC} {
				want := k == netns.IPC || !tt.wantHostNet
				if got := netns.Pinned(nsDir, k); got != want {
					t.Errorf("namespace %s pinned = %v, want %v", k, got, want)
				}
			}

			rec := h.startSandbox(created)
			if rec.ID != created.ID || rec.Pid == 0 || rec.State != pod.TaskRunning {
				t.Fatalf("StartSandbox() = %+v, want %s with a pid and state running", rec, created.ID)
			}
			// runc start returns once it told its init to exec the program,
			// maybe before it did.
			waitFor(t, 10*time.Second, "the pause program to run", func() (bool, string) {
				got, want := cmdline(t, rec.Pid), []string{"/pause", "pause"}
				return slices.Equal(got, want), fmt.Sprintf("process %d runs %q, want %q", rec.Pid, got, want)
			})

			net, uts := nsLink(t, rec.Pid, "net"), nsLink(t, rec.Pid, "uts")
			if tt.wantHostNet {
				if net != hostNet || uts != hostUTS {
					t.Errorf("hostNetwork sandbox in net %s uts %s, want the host's %s %s", net, uts, hostNet, hostUTS)
				}
			} else {
				if net == hostNet || uts == hostUTS {
					t.Errorf("sandbox in net %s uts %s, want namespaces other than the host's %s %s", net, uts, hostNet, hostUTS)
				}
				if pin := pinInode(t, nsDir, netns.Net); net != pin {
					t.Errorf("sandbox in %s, want the pinned %s", net, pin)
				}
				if got := utsHostname(t, rec.Pid); got != tt.wantHostname {
					t.Errorf("sandbox host name = %q, want %q", got, tt.wantHostname)
				}
			}
			if ipc, pin := nsLink(t, rec.Pid, "ipc"), pinInode(t, nsDir, netns.IPC); ipc != pin {
				t.Errorf("sandbox in %s, want the pinned %s", ipc, pin)
			}
			for _, ns := range []string{"ipc", "pid", "mnt"} {
				if got, host := nsLink(t, rec.Pid, ns), nsLink(t, "self", ns); got == host {
					t.Errorf("sandbox in the host's %s namespace %s, want its own", ns, got)
				}
			}

			recs, err := h.rt.PodContainers(h.ctx(), p.Key())
			if err != nil {
				t.Fatalf("PodContainers(%s): %v", p.Key(), err)
			}
			if len(recs) != 1 || recs[0].ID != rec.ID || recs[0].Kind != pod.KindSandbox || recs[0].State != pod.TaskRunning ||
				recs[0].Pid != rec.Pid || recs[0].Hash != p.SandboxHash || recs[0].PodUID != string(p.UID) {
				t.Errorf("PodContainers(%s) = %+v, want the running sandbox %s with pid %d", p.Key(), recs, rec.ID, rec.Pid)
			}
		})
	}
}

// TestCreateSandboxHostNamespaces: a pod on the host's network, PID and
// IPC namespaces pins nothing and has no pause process; its container
// joins the host's namespaces and still has a mount namespace of its own.
func TestCreateSandboxHostNamespaces(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/host.yaml", sleeper("host", "  hostNetwork: true\n  hostPID: true\n  hostIPC: true\n"))
	rec := h.sandbox(p)
	if !rec.NoPause || rec.State != pod.TaskRunning || rec.Pid != 0 {
		t.Errorf("sandbox = %+v, want one without a pause process, running", rec)
	}
	c := h.start(p, rec, "c", 0)
	for _, ns := range []string{"net", "uts", "ipc", "pid"} {
		if got, host := nsLink(t, c.Pid, ns), nsLink(t, "self", ns); got != host {
			t.Errorf("host namespaces pod's container in %s, want the host's %s", got, host)
		}
	}
	if got, host := nsLink(t, c.Pid, "mnt"), nsLink(t, "self", "mnt"); got == host {
		t.Errorf("container in the host's mount namespace %s, want its own", got)
	}
	for _, k := range []netns.Kind{netns.Net, netns.UTS, netns.IPC} {
		if netns.Pinned(h.rt.sandboxDir(rec.ID), k) {
			t.Errorf("namespace %s pinned, want nothing pinned", k)
		}
	}
}

// TestRemoveSandbox: removing a sandbox stops its pause process and unpins
// its namespaces; removing it again succeeds.
func TestRemoveSandbox(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/rm.yaml", podManifest(sharedPID))
	rec := h.sandbox(p)
	nsDir := h.rt.sandboxDir(rec.ID)
	for i := 0; i < 2; i++ {
		if err := h.rt.RemoveContainer(h.ctx(), rec.ID); err != nil {
			t.Fatalf("RemoveContainer(%s) #%d: %v", rec.ID, i+1, err)
		}
	}
	waitFor(t, 10*time.Second, "the pause process to go", func() (bool, string) {
		return gone(rec.Pid), fmt.Sprintf("process %d still runs", rec.Pid)
	})
	if _, err := os.Stat(nsDir); !os.IsNotExist(err) {
		t.Errorf("stat %s after RemoveContainer: %v, want it gone", nsDir, err)
	}
	if ids := h.containers(); len(ids) != 0 {
		t.Errorf("containers after RemoveContainer: %q, want none", ids)
	}
}
