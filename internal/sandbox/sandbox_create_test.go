package sandbox

import (
	"os"
	"slices"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
)

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
			p := h.decode("/m/sb"+string(rune('a'+i))+".yaml", `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: ns
spec:
`+tt.podExtra+`  containers:
  - name: c
    image: localhost/busybox:test
`)
			rec := h.sandbox(p)

			if rec.ID == "" || rec.Pid == 0 || rec.State != pod.TaskRunning {
				t.Fatalf("CreateSandbox() = %+v, want an ID, a pid and state running", rec)
			}
			want := pod.Record{ID: rec.ID, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindSandbox, Hash: p.SandboxHash}
			if rec.Pod != want.Pod || rec.PodUID != want.PodUID || rec.Kind != want.Kind || rec.Hash != want.Hash ||
				rec.Name != "" || rec.SandboxID != "" {
				t.Errorf("CreateSandbox() = %+v, want identity %+v", rec, want)
			}
			if got, want := cmdline(t, rec.Pid), []string{"/pause", "pause"}; !slices.Equal(got, want) {
				t.Errorf("sandbox process runs %q, want %q", got, want)
			}
			if fi, err := os.Stat(h.rt.PodDir(string(p.UID))); err != nil || !fi.IsDir() {
				t.Errorf("pod directory %s: %v, want a directory", h.rt.PodDir(string(p.UID)), err)
			}

			net, uts := nsLink(t, rec.Pid, "net"), nsLink(t, rec.Pid, "uts")
			if tt.wantHostNet {
				if net != hostNet || uts != hostUTS {
					t.Errorf("hostNetwork sandbox in net %s uts %s, want the host's %s %s", net, uts, hostNet, hostUTS)
				}
			} else {
				if net == hostNet || uts == hostUTS {
					t.Errorf("sandbox in net %s uts %s, want namespaces other than the host's %s %s", net, uts, hostNet, hostUTS)
				}
				if got := utsHostname(t, rec.Pid); got != tt.wantHostname {
					t.Errorf("sandbox host name = %q, want %q", got, tt.wantHostname)
				}
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
				recs[0].Pid != rec.Pid || recs[0].Hash != p.SandboxHash {
				t.Errorf("PodContainers(%s) = %+v, want the running sandbox %s with pid %d", p.Key(), recs, rec.ID, rec.Pid)
			}
		})
	}
}

// TestCreateSandboxHostNamespaces: a sandbox on the host's network, PID and
// IPC namespaces joins them, and still has a mount namespace of its own.
func TestCreateSandboxHostNamespaces(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/host.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: host
spec:
  hostNetwork: true
  hostPID: true
  hostIPC: true
  containers:
  - name: c
    image: localhost/busybox:test
`)
	rec := h.sandbox(p)
	for _, ns := range []string{"net", "uts", "ipc", "pid"} {
		if got, host := nsLink(t, rec.Pid, ns), nsLink(t, "self", ns); got != host {
			t.Errorf("host namespaces sandbox in %s, want the host's %s", got, host)
		}
	}
	if got, host := nsLink(t, rec.Pid, "mnt"), nsLink(t, "self", "mnt"); got == host {
		t.Errorf("sandbox in the host's mount namespace %s, want its own", got)
	}
}
