package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/metricstest"
	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

// gcConfig is a KubeletConfiguration with imageMaximumGCAge 1m, and the
// thresholds out of the way so that the disk the test runs on decides
// nothing.
const gcConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageMaximumGCAge: 1m
imageMinimumGCAge: 30s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

// imagePod is pod name running image, sleeping or, with exit, exiting 0
// at once under restartPolicy Never.
func imagePod(name, image string, exit bool) string {
	if !exit {
		return strings.Replace(harness.SleeperPod(name, "x", true), "    image: localhost/busybox:test\n", "    image: "+image+"\n", 1)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "exit 0"]
`, name, image)
}

// TestImageGC is issue 24's acceptance of image garbage collection: with
// imageMaximumGCAge 1m (collections every 2 s through the test hook), the
// image of a pod whose manifest went, and an image never used, are removed
// once unused for a minute, each with an event of the node and counted in
// the metrics; the image of a running pod, of a completed Never pod whose
// manifest is still there, and of an archive in the import directory stay,
// and get images says why, and, after a kill -9 and a restart, when each
// was last used.
func TestImageGC(t *testing.T) {
	e := harness.NewEnv(t)
	e.ExtraEnv = append(e.ExtraEnv, "STATICLET_TEST_IMAGE_GC_PERIOD=2s")
	const (
		running   = "localhost/busybox:test"
		removed   = "localhost/gc-removed:v1"
		unused    = "localhost/gc-unused:v1"
		completed = "localhost/gc-completed:v1"
		archived  = "localhost/gc-archived:v1"
	)
	for _, ref := range []string{removed, unused, completed} {
		e.Ctrd.ImportImageWith(t, harness.TestNS, testimage.Options{Ref: ref, Files: map[string][]byte{"gc": []byte(ref)}})
	}
	importDir := filepath.Join(e.Root, "images") // the default --image-import-dir
	if err := os.MkdirAll(importDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, importDir, "archived.tar", harness.ImageArchive(t, archived, true, ""))
	config := filepath.Join(e.Dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(gcConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Write("running.yaml", imagePod("running", running, false))
	e.Write("removed.yaml", imagePod("removed", removed, false))
	e.Write("completed.yaml", imagePod("completed", completed, true))
	d := e.Start("--config", config)

	d.WaitPod("running-"+harness.TestNode, 60*time.Second, "running pod running", harness.Running)
	d.WaitPod("removed-"+harness.TestNode, 60*time.Second, "pod to remove running", harness.Running)
	d.WaitPod("completed-"+harness.TestNode, 60*time.Second, "Never pod Succeeded", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded
	})
	waitEvent(d, "Imported", archived)
	e.Remove("removed.yaml")
	harness.WaitFor(t, 60*time.Second, "removed pod gone", func() (bool, string) {
		_, err := d.Pod("removed-" + harness.TestNode)
		return err != nil, "still listed"
	})
	removedAt := time.Now()

	for _, ref := range []string{removed, unused} {
		ev := waitEventWithin(d, 150*time.Second, "ImageGarbageCollected", ref)
		if ev.Object != "node/"+harness.TestNode || ev.Pod != "" || ev.Type != pod.EventNormal {
			t.Errorf("event %+v, want a Normal event of node/%s", ev, harness.TestNode)
		}
		if !strings.Contains(ev.Message, "imageMaximumGCAge 1m") {
			t.Errorf("event message %q, want it to name imageMaximumGCAge 1m", ev.Message)
		}
	}
	if since := time.Since(removedAt); since < time.Minute {
		t.Errorf("%s removed %v after its pod went, want no sooner than imageMaximumGCAge", removed, since)
	}
	for ref, want := range map[string]bool{running: true, completed: true, archived: true, removed: false, unused: false} {
		if _, err := e.Client.GetImage(harness.NSCtx(context.Background()), ref); (err == nil) != want {
			t.Errorf("image %s present = %v (%v), want %v", ref, err == nil, err, want)
		}
	}

	out, err := d.CLI("get", "images")
	if err != nil {
		t.Fatalf("get images: %v\n%s", err, out)
	}
	t.Logf("get images:\n%s", out)
	for ref, kept := range map[string]string{running: "in use,manifest", completed: "manifest", archived: "import file"} {
		if !imageRowHas(out, ref, kept) {
			t.Errorf("get images =\n%s\nwant %s kept for %q", out, ref, kept)
		}
	}
	if out, err := d.CLI("get", "events"); err != nil || !strings.Contains(out, "node/"+harness.TestNode) {
		t.Errorf("get events = %s, %v; want the removals shown as events of node/%s", out, err, harness.TestNode)
	}
	checkGCMetrics(t, d.Socket)

	// When each image was last used is in containerd: a staticlet started
	// after a kill -9 shows it.
	list, err := d.Client().Images(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.Kill()
	d = e.Start("--config", config)
	restarted, err := d.Client().Images(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, before := range list.Images {
		i := slices.IndexFunc(restarted.Images, func(img status.Image) bool { return img.Name == before.Name })
		if before.Name == completed && before.LastUsed.IsZero() {
			t.Errorf("%s last used = never before the restart, want when its container was seen", completed)
		}
		if i < 0 || restarted.Images[i].LastUsed.Before(before.LastUsed) {
			t.Errorf("after a restart, %s = %+v, want last used no earlier than %v", before.Name, restarted.Images, before.LastUsed)
		}
	}
	if !d.Running() {
		t.Fatal("staticlet exited")
	}
}

// imageRowHas tells whether ref's get images row ends with kept (the
// KEPT column, or its end).
func imageRowHas(out, ref, kept string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, ref+" ") && strings.HasSuffix(strings.TrimSpace(line), kept) {
			return true
		}
	}
	return false
}

// checkGCMetrics checks the socket's metrics count two images removed for
// age, and bytes freed.
func checkGCMetrics(t *testing.T, socket string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	samples, err := metricstest.Scrape(t.Context(), c, "http://staticlet/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := metricstest.Find(samples, "kubelet_image_garbage_collected_total", "reason=age"); !ok || s.Value != 2 {
		t.Errorf("kubelet_image_garbage_collected_total{reason=age} = %v (found %v), want 2", s.Value, ok)
	}
	if s, ok := metricstest.Find(samples, "staticlet_image_garbage_collected_bytes_total", "reason=age"); !ok || s.Value <= 0 {
		t.Errorf("staticlet_image_garbage_collected_bytes_total{reason=age} = %v (found %v), want bytes", s.Value, ok)
	}
}
