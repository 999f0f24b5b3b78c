package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// TestMissingImage checks that a pod whose image is not on the node waits
// with the kubelet's reason and starts once its manifest names one that is.
func TestMissingImage(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	missing := func(policy string) string {
		return strings.Replace(harness.SleeperPod("missing-"+strings.ToLower(policy), "x", true),
			"    image: localhost/busybox:test\n",
			"    image: 127.0.0.1:1/nothing:1\n    imagePullPolicy: "+policy+"\n", 1)
	}
	e.Write("never.yaml", missing("Never"))
	e.Write("ifnotpresent.yaml", missing("IfNotPresent"))

	waiting := func(reasons ...string) func(p *v1.Pod) bool {
		return func(p *v1.Pod) bool {
			w := p.Status.ContainerStatuses[0].State.Waiting
			for _, r := range reasons {
				if w != nil && w.Reason == r && strings.Contains(w.Message, "127.0.0.1:1/nothing:1") {
					return p.Status.Phase == v1.PodPending
				}
			}
			return false
		}
	}
	d.WaitPod("missing-never-"+harness.TestNode, 30*time.Second, "ErrImageNeverPull", waiting("ErrImageNeverPull"))
	d.WaitPod("missing-ifnotpresent-"+harness.TestNode, 30*time.Second, "ErrImagePull", waiting("ErrImagePull", "ImagePullBackOff"))
	d.WaitPod("missing-ifnotpresent-"+harness.TestNode, 30*time.Second, "ImagePullBackOff", waiting("ImagePullBackOff"))
	out, _ := d.CLI("get", "pods")
	if !strings.Contains(out, "ErrImageNeverPull") {
		t.Errorf("get pods =\n%s\nwant ErrImageNeverPull shown", out)
	}

	// Fixing the manifest starts the pod: the worker was not stuck.
	e.Write("never.yaml", harness.SleeperPod("missing-never", "x", true))
	d.WaitPod("missing-never-"+harness.TestNode, 30*time.Second, "fixed pod running", harness.Running)
	if !d.Running() {
		t.Fatal("staticlet exited")
	}
}

// TestImageFromKubeletNamespace: a pod whose image is only in containerd's
// k8s.io namespace, where kubeadm and crictl put what they pull, runs that
// image with no registry traffic, although the registry it names serves
// another under that name; its Pulled event and get images say where the
// image was taken from.
func TestImageFromKubeletNamespace(t *testing.T) {
	e := harness.NewEnv(t)
	reg := newTestRegistry(t, "", "", false)
	image := reg.image(reg.host)
	preloaded := e.Ctrd.ImportImageWith(t, "k8s.io", testimage.Options{Ref: image, Files: map[string][]byte{"bin/preloaded": []byte(image)}})
	d := e.Start()
	name := "preloaded-" + harness.TestNode
	e.Write("preloaded.yaml", pullPod("preloaded", image, v1.PullIfNotPresent))
	p := d.WaitPod(name, 30*time.Second, "pod running", harness.Running)

	if got, want := p.Status.ContainerStatuses[0].ImageID, image+"@"+preloaded.Target().Digest.String(); got != want {
		t.Errorf("image ID = %s, want k8s.io's %s", got, want)
	}
	want := fmt.Sprintf(`Container image %q already present on machine (taken from containerd namespace "k8s.io", no pull)`, image)
	if ev := eventsOf(d, name, "Pulled"); len(ev) != 1 || ev[0].Message != want {
		t.Errorf("Pulled events = %+v, want one: %s", ev, want)
	}
	if out, err := d.CLI("get", "images"); err != nil || !strings.Contains(out, "taken from containerd namespace k8s.io") {
		t.Errorf("get images = %s, %v; want %s taken from containerd namespace k8s.io", out, err, image)
	}
	if n := reg.resolveCount(); n != 0 {
		t.Errorf("the registry was asked for the image %d times, want none", n)
	}
}
