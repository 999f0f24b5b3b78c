package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
)

// plantedSecret is the value of the tests' Secret: it must show in no
// error, and on the host only in a tmpfs.
const plantedSecret = "planted-s3cret-7f1c"

// objectsManifest is a ConfigMap, a Secret and a pod using them through
// volumes, env and envFrom, as podman kube play takes them in one file.
// appConf is the ConfigMap's app.conf.
func objectsManifest(appConf string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: ns}
data:
  app.conf: %q
  LEVEL: debug
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: ns}
stringData: {password: %s, user: admin}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: ns}
spec:
  volumes:
  - name: cfg
    configMap: {name: app-config, defaultMode: 0640}
  - name: sec
    secret: {secretName: creds, defaultMode: 0400, items: [{key: password, path: db/password}]}
  - name: proj
    projected:
      sources:
      - configMap: {name: app-config, items: [{key: LEVEL, path: level, mode: 0600}]}
      - secret: {name: creds, items: [{key: user, path: user}]}
      - downwardAPI: {items: [{path: ns, fieldRef: {fieldPath: metadata.namespace}}]}
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
    envFrom:
    - {prefix: CFG_, configMapRef: {name: app-config}}
    env:
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
    - {name: LOG, value: "level-$(CFG_LEVEL)"}
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
    - {name: sec, mountPath: /etc/creds}
    - {name: proj, mountPath: /etc/proj}
`, appConf, plantedSecret, idleScript)
}

// decodeResolved decodes manifest, which holds one pod and the objects it
// may refer to, and resolves the pod's references to those objects, as
// the desired set does.
func decodeResolved(t *testing.T, path, manifest string) *pod.Pod {
	t.Helper()
	m, err := pod.DecodeFile(path, []byte(manifest), pod.Options{NodeName: "n"})
	if err != nil || len(m.Pods) != 1 {
		t.Fatalf("pod.DecodeFile(%s): %v", path, err)
	}
	return pod.Resolve(m.Pods[0], func(k pod.ObjectKey) *pod.Object {
		for _, o := range m.Objects {
			if o.Key() == k {
				return o
			}
		}
		return nil
	})
}

// TestObjectVolumesAndEnv runs a container with configMap, secret and
// projected volumes and variables from a ConfigMap and a Secret: the files
// with their modes and the kubelet's ..data layout as the container sees
// them, the secret and projected volumes on tmpfs, read-only mounts, the
// variables; then SyncVolumes brings an edited ConfigMap to the running
// container, keeps the files of a ConfigMap gone missing, and the pod's
// tmpfs go with its files.
func TestObjectVolumesAndEnv(t *testing.T) {
	h := newHarness(t)
	p := decodeResolved(t, "/m/app.yaml", objectsManifest("v1"))
	podDir := h.rt.PodDir(string(p.UID))
	// Registered first, so it runs last, once the containers are gone.
	t.Cleanup(func() {
		if err := h.rt.RemovePodFiles(t.Context(), p.Namespace, p.Name, string(p.UID)); err != nil {
			t.Errorf("RemovePodFiles: %v", err)
		}
		mounts, _ := readMountInfo()
		for _, m := range mounts {
			if strings.HasPrefix(m.point, podDir+"/") {
				t.Errorf("%s still mounted after RemovePodFiles", m.point)
			}
		}
	})
	sb := h.sandbox(p)
	c := h.start(p, sb, "c", 0)
	root := fmt.Sprintf("/proc/%d/root", c.Pid)

	// The files and their modes, inside the container.
	for _, f := range []struct {
		path, data string
		mode       os.FileMode
	}{
		{"/etc/app/app.conf", "v1", 0o640},
		{"/etc/app/LEVEL", "debug", 0o640},
		{"/etc/creds/db/password", plantedSecret, 0o400},
		{"/etc/proj/level", "debug", 0o600},
		{"/etc/proj/user", "admin", 0o644},
		{"/etc/proj/ns", "ns", 0o644},
	} {
		b, err := os.ReadFile(root + f.path)
		if err != nil || string(b) != f.data {
			t.Errorf("%s in the container = %q (%v), want %q", f.path, b, err, f.data)
		}
		if fi, err := os.Stat(root + f.path); err != nil || fi.Mode() != f.mode {
			t.Errorf("%s in the container has mode %v (%v), want %v", f.path, fi.Mode(), err, f.mode)
		}
	}
	ts, err := os.Readlink(root + "/etc/app/..data")
	if err != nil || !strings.HasPrefix(ts, "..20") {
		t.Errorf("/etc/app/..data links to %q (%v), want a timestamped directory", ts, err)
	}
	for path, want := range map[string]string{"/etc/app/app.conf": "..data/app.conf", "/etc/creds/db": "..data/db"} {
		if got, err := os.Readlink(root + path); err != nil || got != want {
			t.Errorf("%s links to %q (%v), want %q", path, got, err, want)
		}
	}
	// The volumes' directories are the kubelet's: an emptyDir's, 0777 on
	// disk, 1777 on tmpfs.
	for path, want := range map[string]os.FileMode{
		"/etc/app":   os.ModeDir | 0o777,
		"/etc/creds": os.ModeDir | os.ModeSticky | 0o777,
		"/etc/proj":  os.ModeDir | os.ModeSticky | 0o777,
	} {
		if fi, err := os.Stat(root + path); err != nil || fi.Mode() != want {
			t.Errorf("%s in the container has mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	if _, err := os.Stat(root + "/etc/creds/user"); !os.IsNotExist(err) {
		t.Errorf("stat /etc/creds/user: %v, want none: the volume names only password", err)
	}

	// The secret and projected volumes are tmpfs, on the host and in the
	// container, and every such volume is mounted read-only.
	for _, vol := range []string{"secret/sec", "projected/proj"} {
		dir := filepath.Join(podDir, "volumes", vol)
		if m := mountsAt(t, dir); len(m) != 1 || m[0].fsType != "tmpfs" {
			t.Errorf("mounts at %s = %+v, want one tmpfs", dir, m)
		}
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", c.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"/etc/app", "/etc/creds", "/etc/proj"} {
		fields := containerMount(string(mountinfo), dest)
		if fields == nil {
			t.Errorf("no mount at %s in the container", dest)
			continue
		}
		if !slices.Contains(strings.Split(fields[5], ","), "ro") {
			t.Errorf("mount at %s has options %s, want ro", dest, fields[5])
		}
		tmpfs := slices.Contains(fields, "tmpfs")
		if want := dest != "/etc/app"; tmpfs != want {
			t.Errorf("mount at %s on tmpfs: %v, want %v", dest, tmpfs, want)
		}
	}

	// The variables: envFrom's with their prefix, env's after them.
	env := environ(t, c.Pid)
	for _, want := range []string{"CFG_LEVEL=debug", "CFG_app.conf=v1", "PASSWORD=" + plantedSecret, "LOG=level-debug"} {
		if !slices.Contains(env, want) {
			t.Errorf("the container's environment %q lacks %q", env, want)
		}
	}

	// An edited ConfigMap reaches the running container's files, through a
	// new ..data; the variables stay as they were.
	edited := decodeResolved(t, "/m/app.yaml", objectsManifest("v2"))
	if edited.UID != p.UID || edited.ObjectsHash == p.ObjectsHash {
		t.Fatalf("the edited ConfigMap changed the pod's UID or not its ObjectsHash")
	}
	if err := h.rt.SyncVolumes(h.ctx(), edited, sb); err != nil {
		t.Fatalf("SyncVolumes: %v", err)
	}
	if b, _ := os.ReadFile(root + "/etc/app/app.conf"); string(b) != "v2" {
		t.Errorf("/etc/app/app.conf after SyncVolumes = %q, want v2", b)
	}
	newTS, _ := os.Readlink(root + "/etc/app/..data")
	if newTS == ts {
		t.Errorf("..data still links to %s after an update", ts)
	}
	if gone(c.Pid) || !slices.Contains(environ(t, c.Pid), "CFG_app.conf=v1") {
		t.Errorf("container %s restarted or changed its environment on SyncVolumes", c.ID)
	}
	// Nothing changed: nothing is written.
	secTS, _ := os.Readlink(root + "/etc/creds/..data")
	if err := h.rt.SyncVolumes(h.ctx(), edited, sb); err != nil {
		t.Fatalf("SyncVolumes again: %v", err)
	}
	for path, want := range map[string]string{"/etc/app/..data": newTS, "/etc/creds/..data": secTS} {
		if got, _ := os.Readlink(root + path); got != want {
			t.Errorf("%s moved from %s to %s on a SyncVolumes that changed nothing", path, want, got)
		}
	}

	// A ConfigMap gone missing: its volumes keep their files, and the
	// error names the volumes and the object, never a value.
	missing := pod.Resolve(edited, func(k pod.ObjectKey) *pod.Object {
		if k.Kind == pod.KindConfigMap {
			return nil
		}
		return edited.Objects[k]
	})
	err = h.rt.SyncVolumes(h.ctx(), missing, sb)
	var we *pod.WaitingError
	if !errors.As(err, &we) || we.Reason != "CreateContainerConfigError" ||
		!strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "cfg": configmap "app-config" not found`) ||
		!strings.Contains(err.Error(), `volume "proj"`) {
		t.Errorf("SyncVolumes without the ConfigMap = %v, want a CreateContainerConfigError naming volumes cfg and proj", err)
	}
	if err != nil && strings.Contains(err.Error(), plantedSecret) {
		t.Errorf("SyncVolumes error %q shows the Secret's value", err)
	}
	if b, _ := os.ReadFile(root + "/etc/app/app.conf"); string(b) != "v2" {
		t.Errorf("/etc/app/app.conf once its ConfigMap is missing = %q, want v2 kept", b)
	}
}

// containerMount is the mountinfo line (split in fields) of the mount at
// dest, the last one there, or nil.
func containerMount(mountinfo, dest string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == dest {
			out = f
		}
	}
	return out
}

// TestObjectsMissing checks that a container whose volume or variable
// refers to a missing ConfigMap, Secret or key waits with the kubelet's
// CreateContainerConfigError and message, and leaves nothing behind.
func TestObjectsMissing(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name      string
		container string // lines of the container, indented by four
		volumes   string // lines of spec.volumes, indented by two
		want      string
	}{
		{
			name:      "configMap volume",
			container: "    volumeMounts: [{name: cfg, mountPath: /cfg}]\n",
			volumes:   "  - {name: cfg, configMap: {name: app-config}}\n",
			want:      `MountVolume.SetUp failed for volume "cfg": configmap "app-config" not found`,
		},
		{
			name:      "secret volume key",
			container: "    volumeMounts: [{name: sec, mountPath: /sec}]\n",
			volumes:   "  - {name: sec, secret: {secretName: creds, items: [{key: token, path: t}]}}\n",
			want:      `MountVolume.SetUp failed for volume "sec": references non-existent secret key: token`,
		},
		{
			name:      "secretKeyRef",
			container: "    env: [{name: T, valueFrom: {secretKeyRef: {name: creds, key: token}}}]\n",
			want:      "couldn't find key token in Secret ns/creds",
		},
		{
			name:      "envFrom",
			container: "    envFrom: [{configMapRef: {name: app-config}}]\n",
			want:      `configmap "app-config" not found`,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			volumes := ""
			if tt.volumes != "" {
				volumes = "  volumes:\n" + tt.volumes
			}
			p := decodeResolved(t, fmt.Sprintf("/m/missing-%d.yaml", i), fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: ns}
stringData: {password: %s}
---
apiVersion: v1
kind: Pod
metadata: {name: missing-%d, namespace: ns}
spec:
%s  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
%s`, plantedSecret, i, volumes, idleScript, tt.container))
			t.Cleanup(func() { _ = h.rt.RemovePodFiles(t.Context(), p.Namespace, p.Name, string(p.UID)) })
			sb := h.sandbox(p)
			before := len(h.containers())
			_, err := h.rt.StartContainer(h.ctx(), h.request(p, sb, "c", 0))
			var we *pod.WaitingError
			if !errors.As(err, &we) || we.Reason != "CreateContainerConfigError" || err.Error() != tt.want {
				t.Errorf("StartContainer = %v, want a CreateContainerConfigError %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), plantedSecret) {
				t.Errorf("StartContainer error %q shows the Secret's value", err)
			}
			if after := len(h.containers()); after != before {
				t.Errorf("%d containers after a failed start, want %d", after, before)
			}
		})
	}
}

// TestSyncVolumesNoPodDir checks that SyncVolumes leaves a pod whose
// directory is gone alone rather than making it again, and writes nothing
// for a sandbox record without a pod UID.
func TestSyncVolumesNoPodDir(t *testing.T) {
	r := volumeRuntime(t)
	p := decodeResolved(t, "/m/app.yaml", objectsManifest("v1"))
	if err := r.SyncVolumes(t.Context(), p, pod.Record{PodUID: string(p.UID)}); err != nil {
		t.Fatalf("SyncVolumes: %v", err)
	}
	if _, err := os.Stat(r.PodDir(string(p.UID))); !os.IsNotExist(err) {
		t.Errorf("stat of the pod's directory after SyncVolumes: %v, want none", err)
	}
	// A record with no pod UID names no pod directory at all.
	if err := os.MkdirAll(r.PodDir(""), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := r.SyncVolumes(t.Context(), p, pod.Record{ID: "sb"}); err == nil {
		t.Error("SyncVolumes with no pod UID = nil, want an error")
	}
}

// BenchmarkSyncVolumesUnchanged measures a SyncVolumes that finds every
// volume as wanted: what each change of a pod's objects costs the pods
// whose files it does not change.
func BenchmarkSyncVolumesUnchanged(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("mounts a tmpfs: needs root")
	}
	root := b.TempDir()
	r := &Runtime{cfg: Config{RootDir: root}}
	m, err := pod.DecodeFile("/m/app.yaml", []byte(objectsManifest("v1")), pod.Options{NodeName: "n"})
	if err != nil {
		b.Fatal(err)
	}
	p := pod.Resolve(m.Pods[0], func(k pod.ObjectKey) *pod.Object {
		for _, o := range m.Objects {
			if o.Key() == k {
				return o
			}
		}
		return nil
	})
	sb := pod.Record{PodUID: string(p.UID)}
	b.Cleanup(func() { _ = unmountPodVolumes(r.PodDir(sb.PodUID)) })
	if err := os.MkdirAll(r.PodDir(sb.PodUID), 0o750); err != nil {
		b.Fatal(err)
	}
	if err := r.SyncVolumes(b.Context(), p, sb); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := r.SyncVolumes(b.Context(), p, sb); err != nil {
			b.Fatal(err)
		}
	}
}
