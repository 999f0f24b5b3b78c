package desired

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// catalog is a DeviceCatalog of fixed devices, safe to change while a
// Merger runs.
type catalog struct {
	mu      sync.Mutex
	devices []string // vendor.com/class=name
}

func (c *catalog) set(devices ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.devices = devices
}

func (c *catalog) KnownKind(kind string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.devices {
		if pod.DeviceKind(d) == kind {
			return true
		}
	}
	return false
}

func (c *catalog) Devices(kind string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, d := range c.devices {
		if pod.DeviceKind(d) == kind {
			out = append(out, d)
		}
	}
	return out
}

func (c *catalog) KnownDevice(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.devices {
		if d == name {
			return true
		}
	}
	return false
}

const (
	limitPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: lim}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      limits: {example.test/dev: 1}\n"
	bigPod   = "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      limits: {example.test/dev: 2}\n"
	annPod   = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ann\n  annotations: {cdi.k8s.io/x: 'example.test/dev=d1'}\nspec:\n  containers:\n  - {name: c, image: busybox}\n"
	allPod   = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: all\n  annotations: {cdi.k8s.io/x: 'vendor.test/cam=all'}\nspec:\n  containers:\n  - {name: c, image: busybox}\n"
	plainPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec:\n  containers:\n  - {name: c, image: busybox}\n"
)

func TestUnknownDevices(t *testing.T) {
	files := []watch.FileResult{
		decoded(t, "/m/all.yaml", allPod), decoded(t, "/m/ann.yaml", annPod), decoded(t, "/m/big.yaml", bigPod),
		decoded(t, "/m/lim.yaml", limitPod), decoded(t, "/m/plain.yaml", plainPod),
	}
	tests := []struct {
		devices []string
		running string
		errs    map[string]string // by file
	}{
		{nil, "default/plain-n1", map[string]string{
			"/m/all.yaml": "metadata.annotations[cdi.k8s.io/x]: no CDI spec on this node defines device kind vendor.test/cam; pod default/all-n1 is not run",
			"/m/ann.yaml": "metadata.annotations[cdi.k8s.io/x]: no CDI spec on this node defines device example.test/dev=d1; pod default/ann-n1 is not run",
			"/m/lim.yaml": "spec.containers[0].resources.limits[example.test/dev]: no CDI spec on this node defines device kind example.test/dev; pod default/lim-n1 is not run",
			"/m/big.yaml": "device kind example.test/dev",
		}},
		{[]string{"example.test/dev=d0"}, "default/lim-n1,default/plain-n1", map[string]string{
			"/m/all.yaml": "device kind vendor.test/cam",
			"/m/ann.yaml": "device example.test/dev=d1",
			"/m/big.yaml": "spec.containers[0].resources.limits[example.test/dev]: asks for 2 devices of kind example.test/dev, and the node's CDI specs define 1; pod default/big-n1 is not run",
		}},
		{[]string{"example.test/dev=d0", "example.test/dev=d1", "vendor.test/cam=front"}, "default/all-n1,default/ann-n1,default/big-n1,default/lim-n1,default/plain-n1", nil},
	}
	for _, tt := range tests {
		c := &catalog{}
		c.set(tt.devices...)
		pods, out, _ := refuseUnknownDevices(podsOf(files), files, c, nil)
		if got := keys(pods); got != tt.running {
			t.Errorf("devices %v: running %s, want %s", tt.devices, got, tt.running)
		}
		for _, f := range out {
			want := tt.errs[f.Path]
			if got := errText(f.Err); want == "" && got != "" || !strings.Contains(got, want) {
				t.Errorf("devices %v: %s: error %q, want %q", tt.devices, f.Path, got, want)
			}
		}
	}
}

// TestDevicesChanged: a pod refused for a device kind the node lacks
// runs once a CDI spec defines it, without any manifest being read again.
func TestDevicesChanged(t *testing.T) {
	c := &catalog{}
	changed := make(chan struct{})
	sink := discardManifests{}
	m := NewMerger(MergerConfig{Sources: []string{dirSource}, Manifests: sink, Devices: c, DevicesChanged: changed, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	in, out := make(chan watch.Snapshot), make(chan []*pod.Pod)
	done := make(chan error)
	go func() { done <- m.Run(ctx, in, out) }()
	defer func() { cancel(); <-done }()
	in <- snap(dirSource, decoded(t, "/m/lim.yaml", limitPod))
	if got := keys(<-out); got != "" {
		t.Fatalf("first set %q, want no pod", got)
	}
	c.set("example.test/dev=d0")
	changed <- struct{}{}
	if got := keys(<-out); got != "default/lim-n1" {
		t.Fatalf("after the specs changed: %q, want the pod", got)
	}
}

// TestUnknownDevicesKeepRunning: a pod that passed keeps running when the
// specs no longer define its devices, its file showing the error; edited,
// it is refused.
func TestUnknownDevicesKeepRunning(t *testing.T) {
	c := &catalog{}
	c.set("example.test/dev=d0")
	files := []watch.FileResult{decoded(t, "/m/lim.yaml", limitPod)}
	_, _, passed := refuseUnknownDevices(podsOf(files), files, c, nil)
	c.set()
	for _, tt := range []struct {
		name, manifest, running string
	}{
		{"unchanged", limitPod, "default/lim-n1"},
		{"edited", strings.Replace(limitPod, "image: busybox", "image: busybox:2", 1), ""},
	} {
		files := []watch.FileResult{decoded(t, "/m/lim.yaml", tt.manifest)}
		pods, out, _ := refuseUnknownDevices(podsOf(files), files, c, passed)
		if got := keys(pods); got != tt.running || len(out[0].Pods) != len(pods) {
			t.Errorf("%s, its devices gone: running %q (its file's pods %d), want %q", tt.name, got, len(out[0].Pods), tt.running)
		}
		if got, want := errText(out[0].Err), "no CDI spec on this node defines device kind example.test/dev"; !strings.Contains(got, want) {
			t.Errorf("%s, its devices gone: file error %q, want %q", tt.name, got, want)
		}
	}
}

func podsOf(files []watch.FileResult) []*pod.Pod {
	var out []*pod.Pod
	for _, f := range files {
		out = append(out, f.Pods...)
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// discardManifests is a ManifestSink that keeps nothing.
type discardManifests struct{}

func (discardManifests) SetManifests([]Manifest) {}
