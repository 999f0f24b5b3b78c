package sandbox

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

func TestPrepareHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(dir, "missing")
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	tests := []struct {
		name    string
		path    string
		typ     *v1.HostPathType
		wantErr string
		check   func(t *testing.T, path string)
	}{
		{name: "unset: anything, even missing", path: missing},
		{name: "unset type string", path: missing, typ: typ(v1.HostPathUnset)},
		{name: "DirectoryOrCreate makes it", path: filepath.Join(dir, "new", "deep"), typ: typ(v1.HostPathDirectoryOrCreate),
			check: isExactMode(os.ModeDir | 0o755)},
		{name: "DirectoryOrCreate existing", path: dir, typ: typ(v1.HostPathDirectoryOrCreate)},
		{name: "DirectoryOrCreate on a file", path: file, typ: typ(v1.HostPathDirectoryOrCreate), wantErr: "not a directory"},
		{name: "FileOrCreate makes it", path: filepath.Join(dir, "newdir", "f"), typ: typ(v1.HostPathFileOrCreate),
			check: isExactMode(0o644)},
		{name: "FileOrCreate existing", path: file, typ: typ(v1.HostPathFileOrCreate)},
		{name: "FileOrCreate on a directory", path: dir, typ: typ(v1.HostPathFileOrCreate), wantErr: "is a directory"},
		{name: "Directory", path: dir, typ: typ(v1.HostPathDirectory)},
		{name: "Directory missing", path: missing, typ: typ(v1.HostPathDirectory), wantErr: "not a directory"},
		{name: "Directory on a file", path: file, typ: typ(v1.HostPathDirectory), wantErr: "not a directory"},
		{name: "File", path: file, typ: typ(v1.HostPathFile)},
		{name: "File on a directory", path: dir, typ: typ(v1.HostPathFile), wantErr: "not a file"},
		{name: "Socket", path: sock, typ: typ(v1.HostPathSocket)},
		{name: "Socket on a file", path: file, typ: typ(v1.HostPathSocket), wantErr: "not a socket"},
		{name: "CharDevice", path: "/dev/null", typ: typ(v1.HostPathCharDev)},
		{name: "CharDevice on a file", path: file, typ: typ(v1.HostPathCharDev), wantErr: "not a character device"},
		{name: "BlockDevice on a char device", path: "/dev/null", typ: typ(v1.HostPathBlockDev), wantErr: "not a block device"},
		{name: "BlockDevice on a file", path: file, typ: typ(v1.HostPathBlockDev), wantErr: "not a block device"},
		{name: "BlockDevice missing", path: missing, typ: typ(v1.HostPathBlockDev), wantErr: "not a block device"},
		{name: "Socket missing", path: missing, typ: typ(v1.HostPathSocket), wantErr: "not a socket"},
		{name: "File missing", path: missing, typ: typ(v1.HostPathFile), wantErr: "not a file"},
		{name: "CharDevice missing", path: missing, typ: typ(v1.HostPathCharDev), wantErr: "not a character device"},
		{name: "unknown type", path: dir, typ: typ(v1.HostPathType("Folder")), wantErr: "unknown type"},
	}
	if dev := blockDevice(); dev != "" {
		tests = append(tests, struct {
			name    string
			path    string
			typ     *v1.HostPathType
			wantErr string
			check   func(t *testing.T, path string)
		}{name: "BlockDevice " + dev, path: dev, typ: typ(v1.HostPathBlockDev)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Created paths get the kubelet's modes whatever the umask.
			old := unix.Umask(0o077)
			err := prepareHostPath(&v1.HostPathVolumeSource{Path: tt.path, Type: tt.typ})
			unix.Umask(old)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.path) {
					t.Errorf("prepareHostPath(%s) = %v, want an error naming the path and containing %q", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepareHostPath(%s) = %v, want nil", tt.path, err)
			}
			if tt.check != nil {
				tt.check(t, tt.path)
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("stat %s: %v, want it never created", missing, err)
	}
}

// isExactMode checks that a path exists with the given type and permissions.
func isExactMode(want os.FileMode) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
	}
}

// blockDevice is a block device of the host, or "" if /dev has none.
func blockDevice() string {
	entries, _ := os.ReadDir("/dev")
	for _, e := range entries {
		if e.Type()&os.ModeDevice != 0 && e.Type()&os.ModeCharDevice == 0 {
			return filepath.Join("/dev", e.Name())
		}
	}
	return ""
}

// needRoot skips a test that mounts, unless CI demands it runs.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		tier.Missing(t, "this test mounts and needs root")
	}
}

// volumeRuntime is a Runtime with no containerd, enough for preparing and
// removing a pod's volumes under a temp root.
func volumeRuntime(t *testing.T) *Runtime {
	t.Helper()
	root := t.TempDir()
	return &Runtime{
		cfg:     Config{RootDir: filepath.Join(root, "root"), Logs: LogConfig{Dir: filepath.Join(root, "logs")}},
		node:    spec.NodeFacts{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")},
		cgroups: noCgroups{},
	}
}

// noCgroups stands in for the pods' cgroups where a test makes none: a
// pod has none to remove. Its other methods are not to be called.
type noCgroups struct{ podCgroups }

func (noCgroups) RemovePod(context.Context, string) error { return nil }

func decodeVolumePod(t *testing.T, manifest string) *pod.Pod {
	t.Helper()
	pods, err := pod.Decode("v.yaml", []byte(manifest), pod.Options{NodeName: "n"})
	if err != nil || len(pods) != 1 {
		t.Fatalf("pod.Decode: %d pods, %v\n%s", len(pods), err, manifest)
	}
	return pods[0]
}

// preparedVolumes prepares the volumes of the pod of manifest, as root,
// unmounting them when the test ends.
func preparedVolumes(t *testing.T, manifest string) (*Runtime, *pod.Pod, map[string]string) {
	t.Helper()
	needRoot(t)
	r := volumeRuntime(t)
	p := decodeVolumePod(t, manifest)
	t.Cleanup(func() { _ = unmountPodVolumes(r.PodDir(string(p.UID))) })
	vols, err := r.prepareVolumes(p, string(p.UID))
	if err != nil {
		t.Fatal(err)
	}
	return r, p, vols
}

// TestPrepareVolumesErrorNamesVolume checks that a hostPath that fails its
// check is an error naming the volume and the path.
func TestPrepareVolumesErrorNamesVolume(t *testing.T) {
	r := volumeRuntime(t)
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := decodeVolumePod(t, `apiVersion: v1
kind: Pod
metadata: {name: v}
spec:
  containers: [{name: c, image: busybox}]
  volumes:
  - {name: disk, hostPath: {path: `+file+`, type: BlockDevice}}
`)
	_, err := r.prepareVolumes(p, string(p.UID))
	if err == nil || !strings.Contains(err.Error(), `volume "disk"`) || !strings.Contains(err.Error(), file+" is not a block device") {
		t.Errorf("prepareVolumes = %v, want an error naming volume \"disk\" and %s", err, file)
	}
}

// TestWriteVolumeFiles checks the kubelet's atomic layout: ..data a link
// to a timestamped directory, each name a link through ..data, modes, and
// that a rewrite swaps the whole set and leaves no old file behind.
func TestWriteVolumeFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "info")
	files := map[string]spec.VolumeFile{
		"name":        {Data: []byte("web"), Mode: 0o644},
		"secret":      {Data: []byte("s"), Mode: 0o400},
		"meta/labels": {Data: []byte(`app="web"`), Mode: 0o644},
	}
	if err := writeVolumeFiles(dir, files, nil); err != nil {
		t.Fatal(err)
	}
	ts, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !strings.HasPrefix(ts, "..") || strings.Contains(ts, "/") {
		t.Fatalf("..data links to %q (%v), want a timestamped directory beside it", ts, err)
	}
	for name, target := range map[string]string{"name": "..data/name", "secret": "..data/secret", "meta": "..data/meta"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != target {
			t.Errorf("%s links to %q (%v), want %q", name, got, err, target)
		}
	}
	for path, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil || string(b) != string(f.Data) {
			t.Errorf("%s = %q (%v), want %q", path, b, err, f.Data)
		}
		fi, err := os.Stat(filepath.Join(dir, path))
		if err != nil || fi.Mode() != f.Mode {
			t.Errorf("%s mode %v (%v), want %v", path, fi.Mode(), err, f.Mode)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, ts)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("timestamped directory mode %v (%v), want 0755", fi.Mode(), err)
	}

	// The same files again: nothing changes.
	if err := writeVolumeFiles(dir, files, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != ts {
		t.Errorf("..data moved from %s to %s for the same files", ts, again)
	}

	// Different files: a new directory, the old one and its names gone.
	changed := map[string]spec.VolumeFile{"name": {Data: []byte("api"), Mode: 0o644}}
	if err := writeVolumeFiles(dir, changed, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "name")); string(b) != "api" {
		t.Errorf("name after the update = %q, want api", b)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 || !slices.Contains(names, "..data") || !slices.Contains(names, "name") {
		t.Errorf("volume holds %q after the update, want ..data, one timestamped directory and name", names)
	}
}

// TestWriteVolumeFilesFSGroup checks that with an fsGroup the group owns
// the files and can read them.
func TestWriteVolumeFilesFSGroup(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "info")
	gid := int64(2345)
	if err := writeVolumeFiles(dir, map[string]spec.VolumeFile{"name": {Data: []byte("web"), Mode: 0o600}}, &gid); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "name"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Gid != 2345 || st.Mode&0o777 != 0o640 {
		t.Errorf("file gid %d mode %o, want gid 2345 mode 0640", st.Gid, st.Mode&0o777)
	}
	// Unchanged files are not rewritten.
	ts, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := writeVolumeFiles(dir, map[string]spec.VolumeFile{"name": {Data: []byte("web"), Mode: 0o600}}, &gid); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != ts {
		t.Errorf("..data moved from %s to %s for the same files", ts, again)
	}
}

// TestMemoryEmptyDir mounts a Memory emptyDir, checks its size and that a
// second preparation (a container restart) keeps it and its content, and
// that removing the pod's files unmounts it, even by a Runtime that never
// prepared it (a staticlet killed and started again).
func TestMemoryEmptyDir(t *testing.T) {
	r, p, vols := preparedVolumes(t, `apiVersion: v1
kind: Pod
metadata: {name: v}
spec:
  containers: [{name: c, image: busybox}]
  volumes:
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 8Mi}}
  - {name: disk, emptyDir: {}}
`)
	uid := string(p.UID)
	mem := vols["mem"]
	if want := filepath.Join(r.PodDir(uid), "volumes", "empty-dir", "mem"); mem != want {
		t.Errorf("Memory emptyDir at %s, want %s", mem, want)
	}
	m := mountsAt(t, mem)
	if len(m) != 1 || m[0].fsType != "tmpfs" {
		t.Fatalf("mounts at %s = %+v, want one tmpfs", mem, m)
	}
	if opts := superOptions(t, mem); !strings.Contains(opts, "size=8192k") {
		t.Errorf("tmpfs options %q, want size=8192k", opts)
	}
	if err := os.WriteFile(filepath.Join(mem, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.prepareVolumes(p, uid); err != nil {
		t.Fatal(err)
	}
	if m := mountsAt(t, mem); len(m) != 1 {
		t.Errorf("mounts at %s after a second preparation = %+v, want still one", mem, m)
	}
	if _, err := os.Stat(filepath.Join(mem, "kept")); err != nil {
		t.Errorf("content of the Memory emptyDir lost by a second preparation: %v", err)
	}
	if fi, err := os.Stat(vols["disk"]); err != nil || fi.Mode() != os.ModeDir|0o777 {
		t.Errorf("disk emptyDir mode %v (%v), want drwxrwxrwx", fi.Mode(), err)
	}

	fresh := &Runtime{cfg: r.cfg, cgroups: r.cgroups}
	if err := fresh.RemovePodFiles(t.Context(), p.Namespace, p.Name, uid); err != nil {
		t.Fatalf("RemovePodFiles: %v", err)
	}
	if m := mountsAt(t, mem); len(m) != 0 {
		t.Errorf("mounts at %s after RemovePodFiles = %+v, want none", mem, m)
	}
	if _, err := os.Stat(r.PodDir(uid)); !os.IsNotExist(err) {
		t.Errorf("pod directory after RemovePodFiles: %v, want it gone", err)
	}
}

// TestHugePagesEmptyDir mounts a HugePages emptyDir as the kubelet does: a
// hugetlbfs of the page size the pod requests, unmounted with the pod.
func TestHugePagesEmptyDir(t *testing.T) {
	r, p, vols := preparedVolumes(t, `apiVersion: v1
kind: Pod
metadata: {name: v}
spec:
  containers:
  - name: c
    image: busybox
    resources:
      limits: {memory: 64Mi, hugepages-2Mi: 2Mi}
  volumes:
  - {name: huge, emptyDir: {medium: HugePages}}
`)
	uid := string(p.UID)
	huge := vols["huge"]
	m := mountsAt(t, huge)
	if len(m) != 1 || m[0].fsType != "hugetlbfs" {
		t.Fatalf("mounts at %s = %+v, want one hugetlbfs", huge, m)
	}
	if opts := superOptions(t, huge); !strings.Contains(opts, "pagesize=2M") {
		t.Errorf("hugetlbfs options %q, want pagesize=2M", opts)
	}
	if err := r.RemovePodFiles(t.Context(), p.Namespace, p.Name, uid); err != nil {
		t.Fatalf("RemovePodFiles: %v", err)
	}
	if m := mountsAt(t, huge); len(m) != 0 {
		t.Errorf("mounts at %s after RemovePodFiles = %+v, want none", huge, m)
	}
}

// TestPrepareMountsPropagation checks that a HostToContainer mount needs a
// source on a shared or slave mount, and a Bidirectional one a shared
// mount, as containerd's CRI checks.
func TestPrepareMountsPropagation(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	private, shared := filepath.Join(dir, "private"), filepath.Join(dir, "shared")
	for _, d := range []string{private, shared} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(d, unix.MNT_DETACH) })
	}
	if err := unix.Mount("", private, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		source  string
		option  string
		wantErr string
	}{
		{"private source, rprivate", private, "rprivate", ""},
		{"private source, rslave", private, "rslave", "is not a shared or slave mount"},
		{"private source, rshared", private, "rshared", "is not a shared mount"},
		{"shared source, rslave", shared, "rslave", ""},
		{"shared source, rshared", shared, "rshared", ""},
		{"below a shared mount", filepath.Join(shared, "sub"), "rslave", ""},
	}
	_ = os.Mkdir(filepath.Join(shared, "sub"), 0o755)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "h", MountPath: "/h"}}}
			s := &specs.Spec{Mounts: []specs.Mount{{Destination: "/h", Type: "bind", Source: tt.source, Options: []string{"rbind", tt.option, "rw"}}}}
			err := prepareMounts(c, s)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("prepareMounts = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "/h") {
				t.Errorf("prepareMounts = %v, want an error naming the mount and %q", err, tt.wantErr)
			}
		})
	}
}

// mountsAt lists the mounts on path.
func mountsAt(t *testing.T, path string) []mountEntry {
	t.Helper()
	mounts, err := readMountInfo()
	if err != nil {
		t.Fatal(err)
	}
	var out []mountEntry
	for _, m := range mounts {
		if m.point == path {
			out = append(out, m)
		}
	}
	return out
}

// superOptions are the filesystem options of the mount on path.
func superOptions(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			return f[len(f)-1]
		}
	}
	return ""
}

// TestPrepareMountsSources checks that a missing bind source is made a
// directory (a subPath, or a hostPath of no type, as containerd's CRI
// does), and that a volume covering a base mount is what is looked at.
func TestPrepareMountsSources(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // a relative "shm" made by mistake would land here
	vol := filepath.Join(dir, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{
		{Name: "shm", MountPath: "/dev/shm"},
		{Name: "v", MountPath: "/sub", SubPath: "a/b"},
		{Name: "h", MountPath: "/h"},
	}}
	s := &specs.Spec{Mounts: []specs.Mount{
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm"},
		{Destination: "/dev/shm", Type: "bind", Source: vol, Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/sub", Type: "bind", Source: filepath.Join(vol, "a", "b"), Options: []string{"rbind", "rprivate", "rw"}},
		{Destination: "/h", Type: "bind", Source: filepath.Join(dir, "missing", "host"), Options: []string{"rbind", "rprivate", "rw"}},
	}}
	if err := prepareMounts(c, s); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(vol, "a", "b"), filepath.Join(dir, "missing", "host")} {
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Errorf("%s after prepareMounts: %v, want a directory", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "shm")); !os.IsNotExist(err) {
		t.Errorf("prepareMounts made the base mount's source %q (stat: %v)", "shm", err)
	}
}
