package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// Where a pod's volumes live in its directory, by type.
const (
	emptyDirVolumes    = "volumes/empty-dir"
	downwardAPIVolumes = "volumes/downward-api"
	configMapVolumes   = "volumes/configmap"
	secretVolumes      = "volumes/secret"
	projectedVolumes   = "volumes/projected"
)

// prepareVolumes resolves each volume of p to a path on the host, creating
// what the volume's type says to create: a hostPath checked or created as
// its type asks, an emptyDir directory (a tmpfs for medium Memory), the
// files of a configMap, secret, projected or downwardAPI volume (see
// writeAPIVolume). Pod state lives under the sandbox's UID, the directory
// created with the sandbox. It is idempotent, called before each container
// start: an emptyDir keeps its content across container restarts.
// Calls for one pod must not run at once (its worker makes them in turn).
func (r *Runtime) prepareVolumes(p *pod.Pod, sandboxUID string) (map[string]string, error) {
	out := make(map[string]string, len(p.Spec.Volumes))
	podDir := r.PodDir(sandboxUID)
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		if dir, ok := apiVolumeDir(podDir, v); ok {
			if err := r.writeAPIVolume(p, v, dir); err != nil {
				return nil, err
			}
			out[v.Name] = dir
			continue
		}
		var err error
		switch {
		case v.HostPath != nil:
			err = prepareHostPath(v.HostPath)
			out[v.Name] = v.HostPath.Path
		case v.EmptyDir != nil:
			dir := filepath.Join(podDir, emptyDirVolumes, v.Name)
			err = r.prepareEmptyDir(p, v.EmptyDir, dir)
			out[v.Name] = dir
		default:
			// Validation refuses every other type.
			err = errors.New("unsupported volume type")
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return out, nil
}

// apiVolumeDir is the directory of a volume whose files staticlet writes
// from the pod and its objects (configMap, secret, projected,
// downwardAPI); ok is false for other types.
func apiVolumeDir(podDir string, v *v1.Volume) (string, bool) {
	var typ string
	switch {
	case v.ConfigMap != nil:
		typ = configMapVolumes
	case v.Secret != nil:
		typ = secretVolumes
	case v.Projected != nil:
		typ = projectedVolumes
	case v.DownwardAPI != nil:
		typ = downwardAPIVolumes
	default:
		return "", false
	}
	return filepath.Join(podDir, typ, v.Name), true
}

// writeAPIVolume writes the files of volume v of p into dir as the
// kubelet does: through the atomic ..data layout (writeVolumeFiles), in a
// directory made as the emptyDir the kubelet wraps such a volume in, for
// secret and projected volumes a tmpfs mounted on dir first, so that
// their values never touch a disk. An error is a
// pod.WaitingError (CreateContainerConfigError) worded as the kubelet's
// mount failures; it quotes no value. When the files cannot be made
// (a missing ConfigMap, say), dir keeps those it had.
func (r *Runtime) writeAPIVolume(p *pod.Pod, v *v1.Volume, dir string) error {
	files, _, err := spec.VolumeFiles(p, v, r.node)
	if err == nil {
		wrapped := &v1.EmptyDirVolumeSource{}
		if spec.VolumeOnTmpfs(v) {
			wrapped.Medium = v1.StorageMediumMemory
		}
		err = r.prepareEmptyDir(p, wrapped, dir)
	}
	if err == nil {
		err = writeVolumeFiles(dir, files, spec.FSGroup(p))
	}
	if err != nil {
		return &pod.WaitingError{Reason: "CreateContainerConfigError",
			Err: fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", v.Name, err)}
	}
	return nil
}

// prepareEmptyDir makes an emptyDir volume's directory, world-writable as
// the kubelet's so that any user of the pod can use it; for medium Memory,
// a tmpfs mounted there and sized as the kubelet sizes it; for a HugePages
// medium, a hugetlbfs of the page size the pod requests. The pod's fsGroup
// owns it, and what is made in it (setgid).
func (r *Runtime) prepareEmptyDir(p *pod.Pod, ed *v1.EmptyDirVolumeSource, dir string) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	mode := fs.FileMode(0o777)
	if ed.Medium == v1.StorageMediumMemory || pod.IsHugePagesMedium(ed.Medium) {
		mounted, err := isMountPoint(dir)
		if err != nil {
			return err
		}
		if !mounted {
			if err := r.mountMedium(p, ed, dir); err != nil {
				return err
			}
		}
		// A tmpfs's root is 1777, as with the kubelet.
		if ed.Medium == v1.StorageMediumMemory {
			mode = 0o777 | fs.ModeSticky
		}
	}
	if g := spec.FSGroup(p); g != nil {
		if err := os.Chown(dir, -1, int(*g)); err != nil {
			return err
		}
		mode |= fs.ModeSetgid
	}
	return os.Chmod(dir, mode)
}

// mountMedium mounts the file system of an emptyDir of medium Memory or
// HugePages on dir, with the kubelet's options.
func (r *Runtime) mountMedium(p *pod.Pod, ed *v1.EmptyDirVolumeSource, dir string) error {
	if ed.Medium == v1.StorageMediumMemory {
		var opts string
		if size := spec.MemoryVolumeSize(p, ed, r.node.Memory.Value()); size > 0 {
			opts = "size=" + strconv.FormatInt(size, 10)
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
			return fmt.Errorf("mounting a tmpfs on %s: %w", dir, err)
		}
		return nil
	}
	size, err := pod.HugePageSize(&p.Spec, ed.Medium)
	if err != nil {
		return err // validation refuses it
	}
	if err := unix.Mount("nodev", dir, "hugetlbfs", 0, "pagesize="+size.String()); err != nil {
		return fmt.Errorf("mounting a hugetlbfs of %s pages on %s: %w", size.String(), dir, err)
	}
	return nil
}

// writeVolumeFiles makes dir hold files and nothing else, as the kubelet's
// atomic writer does, so a container never sees half an update: the files
// go into a new timestamped directory (..2006_01_02_15_04_05.NNN), the
// ..data symlink is switched to it with a rename, and each top-level name
// is a symlink through ..data. Files already as wanted are left alone.
// With an fsGroup, the group owns the files and can read them.
func writeVolumeFiles(dir string, files map[string]spec.VolumeFile, fsGroup *int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dataLink := filepath.Join(dir, "..data")
	if old, err := os.Readlink(dataLink); err == nil && sameVolumeFiles(filepath.Join(dir, old), files, fsGroup) {
		return nil
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	if err := writeVolumePayload(ts, files, fsGroup); err != nil {
		return errors.Join(err, os.RemoveAll(ts))
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Join(err, os.RemoveAll(ts))
	}
	if err := os.Symlink(filepath.Base(ts), tmpLink); err != nil {
		return errors.Join(err, os.RemoveAll(ts))
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		return errors.Join(err, os.Remove(tmpLink), os.RemoveAll(ts))
	}
	// ..data now points at the new files: make the visible names point
	// through it, and remove what the old payload had that this one lacks.
	top := map[string]bool{}
	for path := range files {
		top[strings.Split(path, string(filepath.Separator))[0]] = true
	}
	for name := range top {
		link, target := filepath.Join(dir, name), filepath.Join("..data", name)
		if got, err := os.Readlink(link); err == nil && got == target {
			continue
		}
		if err := os.RemoveAll(link); err != nil {
			return err
		}
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == "..data" || name == filepath.Base(ts) || top[name]:
		case strings.HasPrefix(name, "..") || e.Type()&fs.ModeSymlink != 0:
			errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
		}
	}
	return errors.Join(errs...)
}

// writeVolumePayload writes files into the timestamped directory ts.
func writeVolumePayload(ts string, files map[string]spec.VolumeFile, fsGroup *int64) error {
	// 0755 whatever the umask, so that any user of the pod can get in.
	if err := os.Chmod(ts, 0o755); err != nil {
		return err
	}
	for path, f := range files {
		full := filepath.Join(ts, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.Data, f.Mode); err != nil {
			return err
		}
		if err := os.Chmod(full, volumeFileMode(f.Mode, fsGroup)); err != nil {
			return err
		}
	}
	if fsGroup == nil {
		return nil
	}
	// As the kubelet's SetVolumeOwnership for a read-only volume: the group
	// owns everything, can read the files and enter the directories.
	return filepath.WalkDir(ts, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(*fsGroup)); err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(path, 0o755|fs.ModeSetgid)
		}
		return nil
	})
}

// volumeFileMode is the mode a volume file ends with.
func volumeFileMode(m fs.FileMode, fsGroup *int64) fs.FileMode {
	if fsGroup != nil {
		return m | 0o440
	}
	return m
}

// sameVolumeFiles tells whether the timestamped directory ts holds exactly
// files, with their modes.
func sameVolumeFiles(ts string, files map[string]spec.VolumeFile, fsGroup *int64) bool {
	n := 0
	err := filepath.WalkDir(ts, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(ts, path)
		f, ok := files[rel]
		if !ok {
			return fs.ErrExist
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode() != volumeFileMode(f.Mode, fsGroup) {
			return fs.ErrExist
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, f.Data) {
			return fs.ErrExist
		}
		n++
		return nil
	})
	return err == nil && n == len(files)
}

// prepareMounts makes ready on the host what c's mounts in spec s need: a
// source that is missing is created as a directory (0755), as the kubelet
// does for a subPath and containerd's CRI for any bind mount (a hostPath
// of no type that does not exist); and, for a mount that propagates
// mounts (HostToContainer, Bidirectional), a source on a shared mount (or
// a slave one, for HostToContainer), without which nothing would
// propagate; containerd's CRI refuses those too.
func prepareMounts(c *v1.Container, s *specs.Spec) error {
	var mounts []mountEntry
	for _, vm := range c.VolumeMounts {
		m, ok := volumeBind(s, spec.MountPath(vm))
		if !ok {
			continue
		}
		if _, err := os.Lstat(m.Source); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(m.Source, 0o755); err != nil {
				return fmt.Errorf("volume mount %s: %w", vm.MountPath, err)
			}
		}
		shared, slave := slices.Contains(m.Options, "rshared"), slices.Contains(m.Options, "rslave")
		if !shared && !slave {
			continue
		}
		if mounts == nil {
			var err error
			if mounts, err = readMountInfo(); err != nil {
				return err
			}
		}
		src, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return fmt.Errorf("volume mount %s: %w", vm.MountPath, err)
		}
		on := mountOf(mounts, src)
		switch {
		case on == nil:
			return fmt.Errorf("volume mount %s: no mount holds %s", vm.MountPath, src)
		case shared && !on.shared:
			return fmt.Errorf("volume mount %s: path %q is mounted on %q but it is not a shared mount", vm.MountPath, src, on.point)
		case slave && !on.shared && !on.slave:
			return fmt.Errorf("volume mount %s: path %q is mounted on %q but it is not a shared or slave mount", vm.MountPath, src, on.point)
		}
	}
	return nil
}

// volumeBind is the bind mount of a volume at dest in s: the last mount
// there, as a volume may cover a base mount (an emptyDir on /dev/shm).
func volumeBind(s *specs.Spec, dest string) (specs.Mount, bool) {
	for i := len(s.Mounts) - 1; i >= 0; i-- {
		if m := s.Mounts[i]; m.Destination == dest {
			return m, m.Type == "bind"
		}
	}
	return specs.Mount{}, false
}

// prepareHostPath checks or creates a hostPath volume's path as its type
// asks, as the kubelet does: DirectoryOrCreate makes the directory (0755)
// and FileOrCreate the file (0644) with its parent directories; the other
// types only check what is there.
func prepareHostPath(hp *v1.HostPathVolumeSource) error {
	typ := v1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	fi, statErr := os.Stat(hp.Path)
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if statErr != nil {
			if err := os.MkdirAll(hp.Path, 0o755); err != nil {
				return fmt.Errorf("creating hostPath directory %s: %w", hp.Path, err)
			}
			// 0755 whatever the umask, as the kubelet makes it.
			return os.Chmod(hp.Path, 0o755)
		}
		if !fi.IsDir() {
			return fmt.Errorf("hostPath %s exists and is not a directory", hp.Path)
		}
	case v1.HostPathFileOrCreate:
		if statErr != nil {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return fmt.Errorf("creating the directory of hostPath file %s: %w", hp.Path, err)
			}
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return fmt.Errorf("creating hostPath file %s: %w", hp.Path, err)
			}
			if err := f.Close(); err != nil {
				return err
			}
			return os.Chmod(hp.Path, 0o644)
		}
		if fi.IsDir() {
			return fmt.Errorf("hostPath %s exists and is a directory", hp.Path)
		}
	case v1.HostPathDirectory:
		if statErr != nil || !fi.IsDir() {
			return fmt.Errorf("hostPath %s is not a directory", hp.Path)
		}
	case v1.HostPathFile:
		if statErr != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath %s is not a file", hp.Path)
		}
	case v1.HostPathSocket:
		if statErr != nil || fi.Mode()&fs.ModeSocket == 0 {
			return fmt.Errorf("hostPath %s is not a socket", hp.Path)
		}
	case v1.HostPathCharDev:
		if statErr != nil || fi.Mode()&fs.ModeCharDevice == 0 {
			return fmt.Errorf("hostPath %s is not a character device", hp.Path)
		}
	case v1.HostPathBlockDev:
		if statErr != nil || fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
			return fmt.Errorf("hostPath %s is not a block device", hp.Path)
		}
	default:
		return fmt.Errorf("hostPath %s: unknown type %q", hp.Path, typ)
	}
	return nil
}

// unmountPodVolumes unmounts whatever is mounted in a pod's directory (the
// tmpfs of its Memory emptyDirs, secret and projected volumes), deepest
// first, so that removing the directory removes files rather than
// emptying live mounts and leaving them behind. It reads the host's mounts rather than trusting the pod's
// manifest, so a pod whose staticlet was killed, or whose manifest is gone,
// leaks nothing.
func unmountPodVolumes(podDir string) error {
	dir, err := filepath.EvalSymlinks(podDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	mounts, err := readMountInfo()
	if err != nil {
		return err
	}
	var points []string
	for _, m := range mounts {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			points = append(points, m.point)
		}
	}
	// Deepest first; a point mounted twice appears twice, and goes twice.
	slices.SortStableFunc(points, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	var errs []error
	for _, p := range points {
		err := unix.Unmount(p, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(p, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point  string
	fsType string
	// shared and slave are the mount's propagation (shared:N, master:N).
	shared, slave bool
}

// readMountInfo reads the mounts staticlet's mount namespace has, in the
// order they were mounted.
func readMountInfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 6 || sep+1 >= len(fields) {
			continue
		}
		m := mountEntry{point: procfs.UnescapeMount(fields[4]), fsType: fields[sep+1]}
		for _, opt := range fields[6:sep] {
			m.shared = m.shared || strings.HasPrefix(opt, "shared:")
			m.slave = m.slave || strings.HasPrefix(opt, "master:")
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	return out, nil
}

// mountOf is the mount that holds path: the one with the longest mount
// point above it, the last mounted of those on the same point.
func mountOf(mounts []mountEntry, path string) *mountEntry {
	var best *mountEntry
	for i := range mounts {
		m := &mounts[i]
		if m.point != "/" && m.point != path && !strings.HasPrefix(path, m.point+"/") {
			continue
		}
		if best == nil || len(m.point) >= len(best.point) {
			best = m
		}
	}
	return best
}

// isMountPoint tells whether something is mounted on dir, as the
// kubelet's IsLikelyNotMountPoint tells it: dir is on another device than
// its parent. That costs two stats where the mount table, which grows with
// the pods, would be read and parsed at every container start and volume
// sync; a bind mount from the same filesystem would go unseen, and
// staticlet makes none on the directories it asks about.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	// "/.." is taken in the directory dir leads to, symlinks followed.
	if err := unix.Stat(dir+"/..", &parent); err != nil {
		return false, fmt.Errorf("stat %s/..: %w", dir, err)
	}
	return st.Dev != parent.Dev, nil
}
