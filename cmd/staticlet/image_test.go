package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testimage"
)

// TestMissingImage checks that a pod whose image is not on the node waits
// with the kubelet's reason and starts once its manifest names one that is.
func TestMissingImage(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	missing := func(policy string) string {
		return strings.Replace(sleeperPod("missing-"+strings.ToLower(policy), "x", true),
			"    image: localhost/busybox:test\n",
			"    image: 127.0.0.1:1/nothing:1\n    imagePullPolicy: "+policy+"\n", 1)
	}
	e.write("never.yaml", missing("Never"))
	e.write("ifnotpresent.yaml", missing("IfNotPresent"))

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
	d.waitPod("missing-never-"+testNode, 30*time.Second, "ErrImageNeverPull", waiting("ErrImageNeverPull"))
	d.waitPod("missing-ifnotpresent-"+testNode, 30*time.Second, "ErrImagePull", waiting("ErrImagePull", "ImagePullBackOff"))
	d.waitPod("missing-ifnotpresent-"+testNode, 30*time.Second, "ImagePullBackOff", waiting("ImagePullBackOff"))
	out, _ := d.cli("get", "pods")
	if !strings.Contains(out, "ErrImageNeverPull") {
		t.Errorf("get pods =\n%s\nwant ErrImageNeverPull shown", out)
	}

	// Fixing the manifest starts the pod: the worker was not stuck.
	e.write("never.yaml", sleeperPod("missing-never", "x", true))
	d.waitPod("missing-never-"+testNode, 30*time.Second, "fixed pod running", running)
	if !d.running() {
		t.Fatal("staticlet exited")
	}
}

// TestImageFromKubeletNamespace: a pod whose image is only in containerd's
// k8s.io namespace, where kubeadm and crictl put what they pull, runs with
// no registry traffic; its Pulled event and get images say where the image
// was taken from. The image is named after a loopback registry that counts
// what it is asked.
func TestImageFromKubeletNamespace(t *testing.T) {
	var asked atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(reg.Close)
	ref := reg.Listener.Addr().String() + "/preloaded:1"
	e := newEnv(t)
	e.ctrd.ImportImageWith(t, "k8s.io", testimage.Options{Ref: ref, Files: map[string][]byte{"bin/preloaded": []byte(ref)}})
	d := e.start()
	e.write("preloaded.yaml", strings.Replace(sleeperPod("preloaded", "x", true),
		"    image: localhost/busybox:test\n", "    image: "+ref+"\n", 1))
	d.waitPod("preloaded-"+testNode, 30*time.Second, "pod running", running)

	events, err := d.client().Events(t.Context(), "default/preloaded-"+testNode)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`Container image %q already present on machine (taken from containerd namespace "k8s.io", no pull)`, ref)
	found := false
	for _, ev := range events {
		found = found || ev.Reason == "Pulled" && ev.Message == want
	}
	if !found {
		t.Errorf("events = %+v, want Pulled: %s", events, want)
	}
	if out, err := d.cli("get", "images"); err != nil || !strings.Contains(out, "taken from containerd namespace k8s.io") {
		t.Errorf("get images = %s, %v; want %s taken from containerd namespace k8s.io", out, err, ref)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the registry was asked %d times, want none", n)
	}
}
