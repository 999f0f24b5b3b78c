package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const volumesPod = `apiVersion: v1
kind: Pod
metadata:
  name: vols
  labels: {app: vols, tier: back-end}
  annotations: {note: 'say "hi"'}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: writer
    image: localhost/busybox:test
    command: ["sh", "-c", "echo boot >> /scratch/boots; echo boot >> /mem/boots; if touch /ro/x 2>/dev/null; then echo writable; else echo refused; fi > /scratch/ro; if touch /etc/podinfo/x 2>/dev/null; then echo writable; else echo refused; fi > /scratch/podinfo; exec sleep 100000"]
    resources:
      requests: {cpu: 250m}
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: mem, mountPath: /mem}
    - {name: ro, mountPath: /ro, readOnly: true}
    - {name: podinfo, mountPath: /etc/podinfo}
  - name: reader
    image: localhost/busybox:test
    command: ["sleep", "100000"]
    volumeMounts:
    - {name: scratch, mountPath: /shared}
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 8Mi}}
  - {name: ro, hostPath: {path: RODIR, type: Directory}}
  - name: podinfo
    downwardAPI:
      items:
      - {path: name, fieldRef: {fieldPath: metadata.name}}
      - {path: namespace, fieldRef: {fieldPath: metadata.namespace}}
      - {path: uid, fieldRef: {fieldPath: metadata.uid}}
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: annotations, mode: 0400, fieldRef: {fieldPath: metadata.annotations}}
      - {path: cpu-request, resourceFieldRef: {containerName: writer, resource: requests.cpu, divisor: 1m}}
`

// memoryPod has a Memory emptyDir sized by its container's memory limit.
const memoryPod = `apiVersion: v1
kind: Pod
metadata:
  name: memkill
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:test
    # Stops at once: a staticlet that adopted the pod without its manifest
    # does not know its grace period.
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    resources:
      limits: {memory: 64Mi}
    volumeMounts:
    - {name: mem, mountPath: /mem}
  volumes:
  - {name: mem, emptyDir: {medium: Memory}}
`

// TestVolumes checks emptyDir, Memory emptyDir, read-only and downwardAPI
// volumes from the host and through the containers' roots: an emptyDir
// shared by two containers keeps what was written across a container's
// restart; a Memory emptyDir is a tmpfs of the right size; both are gone
// with the pod, also when the pod is removed by a staticlet started after
// one was killed.
func TestVolumes(t *testing.T) {
	e := harness.NewEnv(t)
	roDir := filepath.Join(e.Dir, "ro")
	if err := os.Mkdir(roDir, 0o777); err != nil {
		t.Fatal(err)
	}
	d := e.Start()
	e.Write("vols.yaml", strings.Replace(volumesPod, "RODIR", roDir, 1))
	e.Write("memkill.yaml", memoryPod)
	p := d.WaitPod("vols-"+harness.TestNode, 30*time.Second, "vols running", harness.Running)
	writer, reader := containerPid(t, e, p, "writer"), containerPid(t, e, p, "reader")
	inRoot := func(pid int, path string) string { return fmt.Sprintf("/proc/%d/root%s", pid, path) }
	harness.WaitFor(t, 5*time.Second, "the writer's files", func() (bool, string) {
		b, err := os.ReadFile(inRoot(reader, "/shared/podinfo"))
		return err == nil && len(b) > 0, fmt.Sprint(err)
	})

	// Read-only mounts refuse writes: a hostPath with readOnly, and a
	// downwardAPI volume always.
	for file, what := range map[string]string{"/shared/ro": "readOnly hostPath", "/shared/podinfo": "downwardAPI volume"} {
		if b, _ := os.ReadFile(inRoot(reader, file)); strings.TrimSpace(string(b)) != "refused" {
			t.Errorf("writing into the %s: %q, want refused", what, b)
		}
	}
	if entries, _ := os.ReadDir(roDir); len(entries) != 0 {
		t.Errorf("the read-only hostPath got %d entries, want none", len(entries))
	}

	// The downwardAPI files, as the container reads them.
	podinfo := func(name string) string {
		b, err := os.ReadFile(inRoot(writer, "/etc/podinfo/"+name))
		if err != nil {
			t.Errorf("reading /etc/podinfo/%s in the container: %v", name, err)
		}
		return string(b)
	}
	for name, want := range map[string]string{
		"name":        "vols-" + harness.TestNode,
		"namespace":   "default",
		"uid":         string(p.UID),
		"labels":      "app=\"vols\"\ntier=\"back-end\"",
		"cpu-request": "250",
	} {
		if got := podinfo(name); got != want {
			t.Errorf("/etc/podinfo/%s = %q, want %q", name, got, want)
		}
	}
	annotations := podinfo("annotations")
	lines := strings.Split(annotations, "\n")
	if !sortedStrings(lines) || !contains(lines, `note="say \"hi\""`) || !contains(lines, fmt.Sprintf("kubernetes.io/config.source=%q", "file")) {
		t.Errorf("/etc/podinfo/annotations = %q, want sorted key=\"value\" lines with the note and the config source", annotations)
	}
	if fi, err := os.Stat(inRoot(writer, "/etc/podinfo/annotations")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("/etc/podinfo/annotations mode %v (%v), want 0400", fi.Mode(), err)
	}
	if fi, err := os.Lstat(inRoot(writer, "/etc/podinfo/..data")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("/etc/podinfo/..data: %v (%v), want a symlink (the kubelet's atomic writer)", fi.Mode(), err)
	}

	// The Memory emptyDir is a tmpfs of its sizeLimit, in the container
	// and in the pod's directory on the host.
	memDir := filepath.Join(e.Root, "pods", string(p.UID), "volumes", "empty-dir", "mem")
	if m := mountOn(t, fmt.Sprintf("/proc/%d/mountinfo", writer), "/mem"); m.fsType != "tmpfs" || !strings.Contains(m.options, "size=8192k") {
		t.Errorf("/mem in the container is %+v, want a tmpfs with size=8192k", m)
	}
	if m := mountOn(t, "/proc/self/mountinfo", memDir); m.fsType != "tmpfs" || !strings.Contains(m.options, "size=8192k") {
		t.Errorf("%s on the host is %+v, want a tmpfs with size=8192k", memDir, m)
	}

	// Both containers see one emptyDir; what it holds survives a restart.
	if b, _ := os.ReadFile(inRoot(reader, "/shared/boots")); string(b) != "boot\n" {
		t.Errorf("the reader's /shared/boots = %q, want the writer's one line", b)
	}
	if err := syscall.Kill(writer, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p = d.WaitPod("vols-"+harness.TestNode, 30*time.Second, "writer restarted", func(p *v1.Pod) bool {
		return harness.Running(p) && statusOf(p, "writer").RestartCount == 1
	})
	writer = containerPid(t, e, p, "writer")
	harness.WaitFor(t, 10*time.Second, "both boots in the emptyDirs", func() (bool, string) {
		disk, _ := os.ReadFile(inRoot(reader, "/shared/boots"))
		mem, _ := os.ReadFile(inRoot(writer, "/mem/boots"))
		return string(disk) == "boot\nboot\n" && string(mem) == "boot\nboot\n", fmt.Sprintf("disk %q, memory %q", disk, mem)
	})

	// A Memory emptyDir without sizeLimit is the size of the pod's limit.
	mk := d.WaitPod("memkill-"+harness.TestNode, 30*time.Second, "memkill running", harness.Running)
	mkDir := filepath.Join(e.Root, "pods", string(mk.UID), "volumes", "empty-dir", "mem")
	if m := mountOn(t, "/proc/self/mountinfo", mkDir); m.fsType != "tmpfs" || !strings.Contains(m.options, "size=65536k") {
		t.Errorf("%s on the host is %+v, want a tmpfs with size=65536k (the pod's memory limit)", mkDir, m)
	}

	// Removed with the pod: the directory, and no mount left.
	e.Remove("vols.yaml")
	harness.WaitFor(t, 30*time.Second, "vols gone", func() (bool, string) {
		_, err := d.Pod("vols-" + harness.TestNode)
		return err != nil, "still listed"
	})
	podDir := filepath.Join(e.Root, "pods", string(p.UID))
	harness.WaitFor(t, 10*time.Second, "the pod's directory removed", func() (bool, string) {
		_, err := os.Stat(podDir)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	if m := mountsUnder(t, podDir); len(m) > 0 {
		t.Errorf("mounts left of a removed pod: %q", m)
	}

	// A staticlet killed while a pod with a Memory emptyDir ran: the next
	// one removes the pod and its mount.
	d.Kill()
	e.Remove("memkill.yaml")
	d2 := e.Start()
	harness.WaitFor(t, 30*time.Second, "memkill removed by the new staticlet", func() (bool, string) {
		_, err := os.Stat(filepath.Join(e.Root, "pods", string(mk.UID)))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	if m := mountsUnder(t, filepath.Join(e.Root, "pods")); len(m) > 0 {
		t.Errorf("mounts left after the pods were removed: %q", m)
	}
	if _, err := d2.Pod("memkill-" + harness.TestNode); err == nil {
		t.Errorf("memkill still listed after its manifest was removed")
	}
}

// TestHostPathVolumes checks each hostPath type against what the test
// makes on the host, the failures as a waiting container with the reason,
// and mount propagation: a HostToContainer mount sees a mount made on the
// host after the container started, a None mount does not.
func TestHostPathVolumes(t *testing.T) {
	e := harness.NewEnv(t)
	base := filepath.Join(e.Dir, "hp")
	dir, file, sock := filepath.Join(base, "dir"), filepath.Join(base, "file"), filepath.Join(base, "sock")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// A shared mount to propagate from, and a private one that cannot.
	prop, private := filepath.Join(base, "prop"), filepath.Join(base, "private")
	bindMount(t, prop, unix.MS_SHARED)
	bindMount(t, private, unix.MS_PRIVATE)
	if err := os.Mkdir(filepath.Join(prop, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	type volume struct{ name, typ, path, in string }
	vols := []volume{
		{"unset", "", filepath.Join(base, "unset"), "/v/unset"},
		{"dir-or-create", "DirectoryOrCreate", filepath.Join(base, "made", "dir"), "/v/dir-or-create"},
		{"dir", "Directory", dir, "/v/dir"},
		{"file-or-create", "FileOrCreate", filepath.Join(base, "made", "deep", "file"), "/v/file-or-create"},
		{"file", "File", file, "/v/file"},
		{"socket", "Socket", sock, "/v/socket"},
		{"char", "CharDevice", "/dev/null", "/v/char"},
	}
	if dev := blockDevice(); dev != "" {
		vols = append(vols, volume{"block", "BlockDevice", dev, "/v/block"})
	}
	var manifest strings.Builder
	manifest.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: hostpaths\nspec:\n  terminationGracePeriodSeconds: 2\n" +
		"  containers:\n  - name: main\n    image: localhost/busybox:test\n    command: [sleep, '100000']\n    volumeMounts:\n")
	for _, v := range vols {
		fmt.Fprintf(&manifest, "    - {name: %s, mountPath: %s}\n", v.name, v.in)
	}
	manifest.WriteString("    - {name: prop, mountPath: /slave, mountPropagation: HostToContainer}\n" +
		"    - {name: prop, mountPath: /private, mountPropagation: None}\n  volumes:\n")
	for _, v := range vols {
		fmt.Fprintf(&manifest, "  - {name: %s, hostPath: {path: %s, type: %q}}\n", v.name, v.path, v.typ)
	}
	fmt.Fprintf(&manifest, "  - {name: prop, hostPath: {path: %s, type: Directory}}\n", prop)

	d := e.Start()
	e.Write("hostpaths.yaml", manifest.String())
	refused := func(name, typ, path, mountExtra string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n"+
			"  - name: main\n    image: localhost/busybox:test\n    command: [sleep, '100000']\n"+
			"    volumeMounts:\n    - {name: v, mountPath: /v%s}\n  volumes:\n  - {name: v, hostPath: {path: %s, type: %q}}\n",
			name, mountExtra, path, typ)
	}
	failures := []struct{ name, manifest, want string }{
		{"not-block", refused("not-block", "BlockDevice", file, ""), `volume "v": hostPath ` + file + " is not a block device"},
		{"missing-dir", refused("missing-dir", "Directory", filepath.Join(base, "missing"), ""), `volume "v": hostPath ` + filepath.Join(base, "missing") + " is not a directory"},
		{"not-socket", refused("not-socket", "Socket", file, ""), `volume "v": hostPath ` + file + " is not a socket"},
		{"private-prop", refused("private-prop", "Directory", private, ", mountPropagation: HostToContainer"), "is not a shared or slave mount"},
	}
	for _, f := range failures {
		e.Write(f.name+".yaml", f.manifest)
	}

	p := d.WaitPod("hostpaths-"+harness.TestNode, 30*time.Second, "hostpaths running", harness.Running)
	pid := containerPid(t, e, p, "main")
	inRoot := func(path string) string { return fmt.Sprintf("/proc/%d/root%s", pid, path) }
	for _, c := range []struct {
		path string
		want os.FileMode
	}{
		{filepath.Join(base, "made", "dir"), os.ModeDir | 0o755},
		{filepath.Join(base, "made", "deep", "file"), 0o644},
		{filepath.Join(base, "unset"), os.ModeDir | 0o755}, // made by the runtime, as containerd's CRI does
	} {
		if fi, err := os.Stat(c.path); err != nil || fi.Mode() != c.want {
			t.Errorf("%s on the host: %v (%v), want %v", c.path, fi.Mode(), err, c.want)
		}
	}
	for _, v := range vols {
		hostFi, err := os.Stat(v.path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(inRoot(v.in))
		if err != nil || fi.Mode().Type() != hostFi.Mode().Type() {
			t.Errorf("%s (%s) in the container: %v (%v), want a %v like the host's", v.in, v.typ, fi.Mode(), err, hostFi.Mode().Type())
		}
	}
	if b, err := os.ReadFile(inRoot("/v/file")); string(b) != "content" {
		t.Errorf("/v/file in the container = %q (%v), want the host file's content", b, err)
	}

	for _, f := range failures {
		d.WaitPod(f.name+"-"+harness.TestNode, 30*time.Second, f.name+" refused", func(p *v1.Pod) bool {
			w := p.Status.ContainerStatuses[0].State.Waiting
			return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, f.want)
		})
	}
	if _, err := os.Stat(filepath.Join(base, "missing")); !os.IsNotExist(err) {
		t.Errorf("a Directory hostPath that was missing was created (stat: %v)", err)
	}

	// Propagation: a tmpfs mounted on the host after the start.
	sub := filepath.Join(prop, "sub")
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "marker"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 5*time.Second, "the host's mount seen through the HostToContainer mount", func() (bool, string) {
		b, err := os.ReadFile(inRoot("/slave/sub/marker"))
		return string(b) == "from the host", fmt.Sprint(err)
	})
	if _, err := os.Stat(inRoot("/private/sub/marker")); !os.IsNotExist(err) {
		t.Errorf("the host's mount is seen through a None mount (stat: %v)", err)
	}
}

// bindMount makes dir a mount of itself with the given propagation, and
// unmounts it when the test ends.
func bindMount(t *testing.T, dir string, propagation uintptr) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", propagation, ""); err != nil {
		t.Fatal(err)
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

// statusOf is the status of container name of p.
func statusOf(p *v1.Pod, name string) v1.ContainerStatus {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

// containerPid is the process of container name of p.
func containerPid(t *testing.T, e *harness.Env, p *v1.Pod, name string) int {
	t.Helper()
	pid, err := e.PidOf(statusOf(p, name))
	if err != nil {
		t.Fatalf("process of container %s: %v", name, err)
	}
	return pid
}

// mountInfo is what a test checks of a mount.
type mountInfo struct{ fsType, options string }

// mountOn is the last mount on point in a mountinfo file.
func mountOn(t *testing.T, mountinfo, point string) mountInfo {
	t.Helper()
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	var m mountInfo
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		sep := indexOf(f, "-")
		if sep > 4 && sep+3 < len(f) && f[4] == point {
			m = mountInfo{fsType: f[sep+1], options: f[sep+3]}
		}
	}
	return m
}

// mountsUnder lists the host's mount points at or under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func sortedStrings(list []string) bool {
	for i := 1; i < len(list); i++ {
		if list[i-1] > list[i] {
			return false
		}
	}
	return true
}
