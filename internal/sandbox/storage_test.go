package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestStorageUsageAndEvict: a running container's writable layer and its
// log are measured, and its pod's disk emptyDir, not its Memory one; an
// evicted container is killed, its exit says so with the message, and it
// is measured no more.
func TestStorageUsageAndEvict(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/disk.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: disk
spec:
  containers:
  - name: writer
    image: localhost/busybox:test
    command: [/bin/sh, -c, "dd if=/dev/zero of=/big bs=1M count=3 && dd if=/dev/zero of=/scratch/f bs=1M count=2 && dd if=/dev/zero of=/mem/f bs=1M count=1 && echo written && sleep 100000"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: mem, mountPath: /mem}
  volumes:
  - name: scratch
    emptyDir: {}
  - name: mem
    emptyDir: {medium: Memory, sizeLimit: 4Mi}
`)
	sb := h.sandbox(p)
	c := h.start(p, sb, "writer", 0)
	t.Cleanup(func() {
		// The Memory emptyDir's tmpfs goes with the pod's files.
		if err := h.rt.RemovePodFiles(h.ctx(), p.Namespace, p.Name, string(p.UID)); err != nil {
			t.Errorf("RemovePodFiles: %v", err)
		}
	})

	const mi = 1 << 20
	uids := map[string]bool{string(p.UID): true}
	var got pod.StorageUsage
	memFile := filepath.Join(h.rt.PodDir(string(p.UID)), emptyDirVolumes, "mem", "f")
	waitFor(t, 30*time.Second, "the writes measured", func() (bool, string) {
		if _, err := os.Stat(memFile); err != nil {
			return false, err.Error() // the last write
		}
		all, err := h.rt.StorageUsage(h.ctx(), uids)
		if err != nil {
			return false, err.Error()
		}
		for _, u := range all {
			if u.UID == string(p.UID) {
				got = u
			}
		}
		ok := len(got.Containers) == 1 && got.Containers[0].RootfsBytes >= 3*mi && got.Containers[0].LogBytes > 0 &&
			got.EmptyDirs["scratch"] >= 2*mi
		return ok, fmt.Sprintf("%+v", got)
	})
	want := pod.Key{Namespace: p.Namespace, Name: p.Name}
	if cs := got.Containers[0]; got.Pod != want || cs.Name != "writer" || cs.ID != c.ID || cs.RootfsBytes > 4*mi {
		t.Errorf("usage %+v, want pod %s, container writer %s, its writable layer about 3Mi", got, want, c.ID)
	}
	if _, ok := got.EmptyDirs["mem"]; ok || got.EmptyDirs["scratch"] > 3*mi {
		t.Errorf("emptyDirs %v: want scratch about 2Mi, and mem (a tmpfs) not measured", got.EmptyDirs)
	}

	const msg = `Container writer exceeded its local ephemeral storage limit "2Mi". `
	if err := h.rt.Evict(h.ctx(), c.ID, msg); err != nil {
		t.Fatalf("Evict: %v", err)
	}
	waitFor(t, 30*time.Second, "the evicted container's exit", func() (bool, string) {
		recs, err := h.rt.PodContainers(h.ctx(), want)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range recs {
			if r.ID == c.ID {
				return r.State == pod.TaskExited && r.ExitCode == 137 && r.Evicted == msg, fmt.Sprintf("%+v", r)
			}
		}
		return false, "no record"
	})
	all, err := h.rt.StorageUsage(h.ctx(), uids)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range all {
		if u.UID == string(p.UID) {
			t.Errorf("the evicted container is still measured: %+v", u)
		}
	}
	// A pod not asked for is not measured.
	if all, err := h.rt.StorageUsage(h.ctx(), nil); err != nil || len(all) != 0 {
		t.Errorf("StorageUsage(none) = %+v, %v; want nothing", all, err)
	}
	// Evicting a container that is gone is no error.
	if err := h.rt.Evict(h.ctx(), "no-such-container", msg); err != nil {
		t.Errorf("Evict(gone): %v", err)
	}
}
