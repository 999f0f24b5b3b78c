package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// importPod is a pod running image with pull policy policy; no registry is
// reachable, so it runs only once the image is imported.
func importPod(name, image, policy string) string {
	return strings.Replace(harness.SleeperPod(name, "x", true),
		"    image: localhost/busybox:test\n",
		"    image: "+image+"\n    imagePullPolicy: "+policy+"\n", 1)
}

// writeFileAtomic writes a file under a hidden temporary name and renames
// it into place, as a careful copier does.
func writeFileAtomic(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// extractTar unpacks the regular files and directories of a tar archive
// into dir.
func extractTar(t *testing.T, archive []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// events returns the events (of every pod and none) with reason.
func events(d *harness.Daemon, reason string) []pod.Event {
	d.T.Helper()
	all, err := d.Client().Events(context.Background(), "")
	if err != nil {
		d.T.Fatalf("listing events: %v", err)
	}
	var out []pod.Event
	for _, e := range all {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event with reason whose message has text.
func waitEvent(d *harness.Daemon, reason, text string) pod.Event {
	d.T.Helper()
	return waitEventWithin(d, 60*time.Second, reason, text)
}

// waitEventWithin waits up to timeout for an event with reason whose
// message has text.
func waitEventWithin(d *harness.Daemon, timeout time.Duration, reason, text string) pod.Event {
	d.T.Helper()
	var found pod.Event
	harness.WaitFor(d.T, timeout, reason+" event with "+text, func() (bool, string) {
		for _, e := range events(d, reason) {
			if strings.Contains(e.Message, text) {
				found = e
				return true, ""
			}
		}
		return false, ""
	})
	return found
}

// TestImportDir drops image archives into the import directory: one there
// at start runs its pod without a failed start, one arriving while a pod
// waits starts it at once, the same content again is not imported again,
// and a corrupt one is reported and harms nothing.
func TestImportDir(t *testing.T) {
	e := harness.NewEnv(t)
	dir := filepath.Join(e.Root, "images") // the default --image-import-dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, dir, "atstart.tar.zst", harness.ImageArchive(t, "localhost/atstart:v1", true, "zstd"))
	e.Write("atstart.yaml", importPod("atstart", "localhost/atstart:v1", "IfNotPresent"))
	d := e.Start()

	// At start: imported before the pod's container was started.
	d.WaitPod("atstart-"+harness.TestNode, 60*time.Second, "atstart running", harness.Running)
	waitEvent(d, "Imported", "localhost/atstart:v1 from image file atstart.tar.zst")
	for _, ev := range events(d, "Failed") {
		if strings.HasPrefix(ev.Pod, "default/atstart") {
			t.Errorf("atstart had a failed start: %+v", ev)
		}
	}

	// A pod waiting for its image starts once an archive brings it.
	e.Write("imported.yaml", importPod("imported", "localhost/imported:v1", "IfNotPresent"))
	d.WaitPod("imported-"+harness.TestNode, 60*time.Second, "imported in ImagePullBackOff", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "ImagePullBackOff"
	})
	// Four failed starts: the next retry is 8 s away (1 s doubling), well
	// past the import on a busy machine, so that a start before it can
	// only be the image's arrival.
	harness.WaitFor(t, 60*time.Second, "imported's fourth failed start", func() (bool, string) {
		n := 0
		for _, ev := range events(d, "BackOff") {
			if strings.HasPrefix(ev.Pod, "default/imported") {
				n++
			}
		}
		return n >= 3, fmt.Sprintf("%d BackOff events", n)
	})
	gz := harness.ImageArchive(t, "localhost/imported:v1", false, "gzip")
	writeFileAtomic(t, dir, "imported.tar.gz", gz)
	d.WaitPod("imported-"+harness.TestNode, 60*time.Second, "imported running", harness.Running)
	// It started because the image arrived, not because its backoff ran out.
	if !strings.Contains(d.Out.String(), "image arrived; starting the container without waiting out its backoff") {
		t.Errorf("no sign in the log that the arrival of the image started the container")
	}

	// A plain write, for a pod with pull policy Never.
	e.Write("never.yaml", importPod("never", "localhost/plain:v1", "Never"))
	d.WaitPod("never-"+harness.TestNode, 60*time.Second, "never waiting", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "ErrImageNeverPull"
	})
	if err := os.WriteFile(filepath.Join(dir, "plain.tar"), harness.ImageArchive(t, "localhost/plain:v1", true, ""), 0o644); err != nil {
		t.Fatal(err)
	}
	d.WaitPod("never-"+harness.TestNode, 60*time.Second, "never running", harness.Running)

	// An OCI image layout directory, unpacked beside and renamed into place.
	extractTar(t, harness.ImageArchive(t, "localhost/layout:v1", false, ""), filepath.Join(dir, ".layout.tmp"))
	if err := os.Rename(filepath.Join(dir, ".layout.tmp"), filepath.Join(dir, "layout")); err != nil {
		t.Fatal(err)
	}
	waitEvent(d, "Imported", "localhost/layout:v1 from image file layout")

	// The same content under another name, and rewritten under its own:
	// not imported again. The corrupt file written after them tells when
	// they have been looked at.
	if err := os.WriteFile(filepath.Join(dir, "copy.tar.gz"), gz, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, dir, "imported.tar.gz", gz)
	writeFileAtomic(t, dir, "corrupt.tar.gz", gz[:len(gz)/2])
	failed := waitEvent(d, "ImportFailed", "corrupt.tar.gz")
	if failed.Type != pod.EventWarning || failed.Pod != "" {
		t.Errorf("ImportFailed event = %+v, want a warning of no pod", failed)
	}
	harness.WaitFor(t, 10*time.Second, "STATUS= counting the failed file", func() (bool, string) {
		line, _ := d.Notify.Has("STATUS=")
		return strings.HasSuffix(line, "; 1 image import error"), line
	})
	if n := len(events(d, "Imported")); n != 4 {
		t.Errorf("%d Imported events, want 4 (atstart, imported, plain, layout): %+v", n, events(d, "Imported"))
	}

	list, err := d.Client().Images(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list.Imports {
		if filepath.Base(f.Path) == "copy.tar.gz" && f.Earlier != "imported.tar.gz" {
			t.Errorf("copy.tar.gz = %+v, want known as imported.tar.gz's content", f)
		}
	}
	out, err := d.CLI("get", "images")
	if err != nil {
		t.Fatalf("get images: %v\n%s", err, out)
	}
	t.Logf("get images:\n%s", out)
	for _, want := range []string{
		"localhost/imported:v1", "imported from imported.tar.gz", "imported from atstart.tar.zst",
		"FILE", "corrupt.tar.gz",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("get images =\n%s\nwant %q in it", out, want)
		}
	}
	if out, err := d.CLI("get", "images", "-o", "json"); err != nil || !strings.Contains(out, `"source": "import:plain.tar"`) {
		t.Errorf("get images -o json = %s, %v; want plain.tar's image", out, err)
	}
	if out, err := d.CLI("describe", "pod", "imported-"+harness.TestNode); err != nil || strings.Contains(out, "ImportFailed") {
		t.Errorf("describe pod = %s, %v; want it without the import events", out, err)
	}
	if !d.Running() {
		t.Fatal("staticlet exited")
	}

	// A restarted staticlet imports nothing again.
	d.Stop()
	d = e.Start()
	harness.WaitFor(t, 60*time.Second, "the import directory listed", func() (bool, string) {
		list, err := d.Client().Images(context.Background())
		return err == nil && len(list.Imports) == 6, ""
	})
	if evs := events(d, "Imported"); len(evs) != 0 {
		t.Errorf("after a restart: Imported events %+v, want none", evs)
	}
}
