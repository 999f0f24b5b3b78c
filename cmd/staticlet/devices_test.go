package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/metrics"
	"github.com/staticlet/staticlet/internal/status"
)

// TestDeviceLister: the status socket's devices are the registry's, each
// with its kind and spec file; the metrics count them by kind and state
// from the pods' statuses.
func TestDeviceLister(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "test.yaml")
	content := "cdiVersion: 0.6.0\nkind: example.test/dev\ndevices:\n" +
		"- name: d0\n  containerEdits:\n    env: [D=0]\n" +
		"- name: d1\n  containerEdits:\n    env: [D=1]\n" +
		"- name: d2\n  containerEdits:\n    env: [D=2]\n"
	if err := os.WriteFile(spec, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	list := deviceLister(devices.New(devices.Config{SpecDirs: []string{dir}}))()
	want := status.DeviceList{SpecDirs: []string{dir}, Devices: []status.Device{
		{Name: "example.test/dev=d0", Kind: "example.test/dev", Spec: spec},
		{Name: "example.test/dev=d1", Kind: "example.test/dev", Spec: spec},
		{Name: "example.test/dev=d2", Kind: "example.test/dev", Spec: spec},
	}}
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("deviceLister() = %+v, want %+v", list, want)
	}

	holds := func(resource string, ids ...string) v1.ContainerStatus {
		rs := v1.ResourceStatus{Name: v1.ResourceName(resource)}
		for _, id := range ids {
			rs.Resources = append(rs.Resources, v1.ResourceHealth{ResourceID: v1.ResourceID(id), Health: v1.ResourceHealthStatusUnknown})
		}
		return v1.ContainerStatus{Name: "c", AllocatedResourcesStatus: []v1.ResourceStatus{rs}}
	}
	pods := []v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{holds("example.test/dev", "example.test/dev=d1")}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b"},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{holds("cdi.k8s.io/x", "example.test/dev=d2", "other.test/gone=z")}}},
	}
	got := deviceCounts(status.HeldDevices(list.Devices, pods))
	wantCounts := []metrics.DeviceCounts{{Kind: "example.test/dev", Free: 1, Allocated: 1, Shared: 1}, {Kind: "other.test/gone", Shared: 1}}
	if !reflect.DeepEqual(got, wantCounts) {
		t.Errorf("deviceCounts() = %+v, want %+v", got, wantCounts)
	}
}

// TestWakeForDevices: the reconciler is told the kinds the runtime
// freed, and every kind the specs name when they changed.
func TestWakeForDevices(t *testing.T) {
	freed, changed, out := make(chan []string), make(chan struct{}), make(chan []string)
	kinds := func() []devices.Kind { return []devices.Kind{{Name: "a.test/x"}, {Name: "b.test/y"}} }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- wakeForDevices(ctx, freed, changed, kinds, out) }()
	freed <- []string{"b.test/y"}
	if got := <-out; !reflect.DeepEqual(got, []string{"b.test/y"}) {
		t.Errorf("after a release: %v, want [b.test/y]", got)
	}
	changed <- struct{}{}
	if got := <-out; !reflect.DeepEqual(got, []string{"a.test/x", "b.test/y"}) {
		t.Errorf("after the specs changed: %v, want every kind", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("wakeForDevices = %v once its context ended", err)
	}
}
