package sandbox

import (
	"os"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/podnet/netns"
)

// TestSandboxWithoutPause: the sandbox of a pod that shares no PID
// namespace has no pause process: no task, running from its creation,
// StartSandbox a no-op; its container joins the pinned namespaces. It is
// down, and not pinned (to be re-created), once it is from another boot
// of the node or a namespace of it is no longer pinned; removing it
// unpins what is left.
func TestSandboxWithoutPause(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/nopause.yaml", sleeper("nopause", ""))
	sb := h.createSandbox(p)
	if !sb.NoPause || sb.State != pod.TaskRunning || sb.Pid != 0 || !sb.Pinned {
		t.Fatalf("CreateSandbox = %+v, want a pinned sandbox without a pause process, running", sb)
	}
	ctr, err := h.client.LoadContainer(h.nsCtx(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctr.Task(h.nsCtx(), nil); !errdefs.IsNotFound(err) {
		t.Errorf("the sandbox's task: %v, want none", err)
	}
	if again, err := h.rt.StartSandbox(h.ctx(), sb); err != nil || again.State != pod.TaskRunning || again.Pid != 0 {
		t.Errorf("StartSandbox = %+v, %v; want it running as it was", again, err)
	}
	if _, err := ctr.Task(h.nsCtx(), nil); !errdefs.IsNotFound(err) {
		t.Errorf("the sandbox's task after StartSandbox: %v, want none", err)
	}
	c := h.start(p, sb, "c", 0)
	nsDir := h.rt.sandboxDir(sb.ID)
	for _, k := range []netns.Kind{netns.Net, netns.UTS, netns.IPC} {
		if got, pin := nsLink(t, c.Pid, string(k)), pinInode(t, nsDir, k); got != pin {
			t.Errorf("container in %s, want the pinned %s", got, pin)
		}
	}
	if got := utsHostname(t, c.Pid); got != "nopause-n" {
		t.Errorf("container host name = %q, want nopause-n", got)
	}
	if r := h.sandboxRecord(p); r.State != pod.TaskRunning || !r.NoPause || !r.Pinned {
		t.Errorf("listed sandbox = %+v, want running, pinned, without a pause process", r)
	}

	// Another boot's sandbox is gone.
	labels, err := ctr.Labels(h.nsCtx())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctr.SetLabels(h.nsCtx(), map[string]string{LabelBoot: "another-boot"}); err != nil {
		t.Fatal(err)
	}
	r := h.sandboxRecord(p)
	if r.State != pod.TaskExited || r.Pinned || !strings.Contains(r.Message, "node restarted") {
		t.Errorf("sandbox of another boot = %+v, want exited, not pinned, saying the node restarted", r)
	}
	if _, err := h.rt.StartSandbox(h.ctx(), r); err == nil || !strings.Contains(err.Error(), "node restarted") {
		t.Errorf("StartSandbox of a sandbox of another boot = %v, want an error saying it is gone", err)
	}
	if _, err := ctr.SetLabels(h.nsCtx(), map[string]string{LabelBoot: labels[LabelBoot]}); err != nil {
		t.Fatal(err)
	}
	if r := h.sandboxRecord(p); r.State != pod.TaskRunning {
		t.Fatalf("sandbox back in its boot = %+v, want running", r)
	}

	// So is one whose network namespace was unmounted.
	if err := unix.Unmount(netns.Path(nsDir, netns.Net), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	r = h.sandboxRecord(p)
	if r.State != pod.TaskExited || r.Pinned || !strings.Contains(r.Message, "net namespace is no longer pinned") {
		t.Errorf("sandbox with its network namespace unmounted = %+v, want exited, not pinned, saying so", r)
	}

	for _, id := range []string{c.ID, sb.ID} {
		if err := h.rt.RemoveContainer(h.ctx(), id); err != nil {
			t.Fatalf("RemoveContainer(%s): %v", id, err)
		}
	}
	if _, err := os.Stat(nsDir); !os.IsNotExist(err) {
		t.Errorf("stat %s after RemoveContainer: %v, want it gone", nsDir, err)
	}
	if ids := h.containers(); len(ids) != 0 {
		t.Errorf("containers after RemoveContainer: %q, want none", ids)
	}
}
