package desired

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/watch"
)

// decoded decodes manifest as the file path, failing the test on error.
func decoded(t *testing.T, path, manifest string) watch.FileResult {
	t.Helper()
	m, err := pod.DecodeFile(path, []byte(manifest), pod.Options{NodeName: "n1", Seen: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return watch.FileResult{Path: path, Pods: m.Pods, Objects: m.Objects}
}

const (
	appPod = "apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    envFrom:\n    - configMapRef: {name: cfg}\n"
	cfgV1  = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: one}\n"
	cfgV2  = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: two}\n"
	cfgIm1 = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\nimmutable: true\ndata: {a: one}\n"
	cfgIm2 = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\nimmutable: true\ndata: {a: two}\n"
	cfgIm0 = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\nimmutable: false\ndata: {a: one}\n"
)

// TestObjectsReachPods follows a pod and the ConfigMap it uses, in files
// of their own, through snapshots: the pod sees the object, its edits and
// its removal in ObjectsHash, never in its own hashes.
func TestObjectsReachPods(t *testing.T) {
	s := newMergeState([]string{dirSource}, slog.New(slog.DiscardHandler))
	step := func(files ...watch.FileResult) (*pod.Pod, []Manifest) {
		t.Helper()
		pods, ms, _ := s.add(snap(dirSource, files...))
		if len(pods) != 1 {
			t.Fatalf("%d pods", len(pods))
		}
		return pods[0], ms
	}
	missing, _ := step(decoded(t, "/m/app.yaml", appPod))
	if missing.Object(pod.KindConfigMap, "cfg") != nil || missing.ObjectsHash == "" {
		t.Fatalf("a pod whose ConfigMap is missing: objects %v, hash %q", missing.Objects, missing.ObjectsHash)
	}
	v1, ms := step(decoded(t, "/m/app.yaml", appPod), decoded(t, "/m/cfg.yaml", cfgV1))
	if o := v1.Object(pod.KindConfigMap, "cfg"); o == nil || o.Source != "/m/cfg.yaml" {
		t.Fatalf("the pod does not see the ConfigMap: %v", v1.Objects)
	}
	if v1.ObjectsHash == missing.ObjectsHash || v1.SandboxHash != missing.SandboxHash || v1.UID != missing.UID {
		t.Error("the ConfigMap's arrival left ObjectsHash, or changed the pod's own hashes")
	}
	if got := ms[1].Objects; len(got) != 1 || got[0] != "configmap/default/cfg" {
		t.Errorf("manifest objects = %v", got)
	}
	v2, _ := step(decoded(t, "/m/app.yaml", appPod), decoded(t, "/m/cfg.yaml", cfgV2))
	if v2.ObjectsHash == v1.ObjectsHash {
		t.Error("an edit of the ConfigMap left ObjectsHash")
	}
	if gone, _ := step(decoded(t, "/m/app.yaml", appPod)); gone.ObjectsHash != missing.ObjectsHash {
		t.Error("the ConfigMap's removal did not bring the hash of a missing one back")
	}
}

func TestImmutableObjects(t *testing.T) {
	tests := []struct {
		name        string
		first, next string
		refused     bool
	}{
		{"mutable edited", cfgV1, cfgV2, false},
		{"made immutable", cfgV1, cfgIm1, false},
		{"immutable unchanged", cfgIm1, cfgIm1, false},
		{"immutable edited", cfgIm1, cfgIm2, true},
		{"immutable made mutable", cfgIm1, cfgIm0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMergeState([]string{dirSource}, slog.New(slog.DiscardHandler))
			s.add(snap(dirSource, decoded(t, "/m/cfg.yaml", tt.first)))
			before := s.objects[pod.ObjectKey{Kind: pod.KindConfigMap, Namespace: "default", Name: "cfg"}]
			_, ms, _ := s.add(snap(dirSource, decoded(t, "/m/cfg.yaml", tt.next)))
			after := s.objects[pod.ObjectKey{Kind: pod.KindConfigMap, Namespace: "default", Name: "cfg"}]
			if tt.refused != (after == before) {
				t.Errorf("object in force changed: %v, want %v", after != before, !tt.refused)
			}
			if got := ms[0].Error; tt.refused != strings.Contains(got, `ConfigMap "default/cfg" is immutable`) {
				t.Errorf("manifest error = %q", got)
			}
			if tt.refused {
				// Removing it, then adding it again, takes the new one.
				s.add(snap(dirSource))
				s.add(snap(dirSource, decoded(t, "/m/cfg.yaml", tt.next)))
				if o := s.objects[after.Key()]; o == nil || o.Hash == before.Hash && o.Immutable() == before.Immutable() {
					t.Error("the object removed and added again is still the old one")
				}
			}
		})
	}
}

func TestDuplicateObjects(t *testing.T) {
	a := decoded(t, "/m/a.yaml", cfgV1)
	b := decoded(t, "/m/b.yaml", cfgV2+"---\napiVersion: v1\nkind: Secret\nmetadata: {name: cfg}\n")
	_, files := Combine([]watch.Snapshot{snap(dirSource, b, a)})
	var de *watch.DuplicateObjectError
	if files[0].Err != nil || len(files[0].Objects) != 1 {
		t.Errorf("a.yaml: %v, %d objects", files[0].Err, len(files[0].Objects))
	}
	if !errors.As(files[1].Err, &de) || de.Winner != "/m/a.yaml" || len(files[1].Objects) != 1 || files[1].Objects[0].Kind() != pod.KindSecret {
		t.Errorf("b.yaml: %v, %d objects", files[1].Err, len(files[1].Objects))
	}
	if want := `ConfigMap "default/cfg" is also defined in /m/a.yaml; this definition is ignored`; files[1].Err.Error() != want {
		t.Errorf("error = %q, want %q", files[1].Err, want)
	}
}
