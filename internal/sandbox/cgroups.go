package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/api/types/runc/options"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// cgroupHost is the node's cgroup hierarchies as runc with cgroupfs uses
// them: either one cgroup v2 hierarchy (unified mode), or one v1 hierarchy
// per controller, plus in hybrid mode an empty v2 one that runc only puts
// processes in.
type cgroupHost struct {
	// unified is true when /sys/fs/cgroup is cgroup v2, so runc uses v2.
	unified bool
	// v2Root is the mount of the v2 hierarchy in unified mode.
	v2Root string
	// v2Mount is where a v2 hierarchy is mounted, in any mode.
	v2Mount string
	// v1 maps each v1 controller (cpu, memory, hugetlb, ...) to its mount.
	v1 map[string]string
	// all are the mounts of every hierarchy, where a pod's cgroup has a
	// directory to remove.
	all []string
}

// detectCgroups reads the node's cgroup mounts from mountinfo.
func detectCgroups() (cgroupHost, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroupHost{}, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	h := cgroupHost{v1: map[string]string{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) {
			continue
		}
		mnt, fstype, opts := unescapeMount(fields[4]), fields[sep+1], fields[sep+3]
		switch fstype {
		case "cgroup2":
			h.all = append(h.all, mnt)
			h.v2Mount = mnt
			if mnt == "/sys/fs/cgroup" {
				h.unified, h.v2Root = true, mnt
			}
		case "cgroup":
			h.all = append(h.all, mnt)
			for _, o := range strings.Split(opts, ",") {
				if _, ok := h.v1[o]; !ok {
					h.v1[o] = mnt
				}
			}
		}
	}
	return h, sc.Err()
}

// mode names the node's cgroup mode: unified (v2 alone), hybrid (v1
// controllers, and v2 with none beside them, where it is mounted) or
// legacy (v1 alone).
func (h cgroupHost) mode() string {
	switch {
	case h.unified:
		return "v2 (unified)"
	case h.v2Mount != "":
		return "hybrid (v1, with v2 at " + h.v2Mount + ")"
	}
	return "v1 (legacy)"
}

// CgroupMode names the cgroup mode of the node staticlet runs on, as read
// from its mounts: "v2 (unified)", "hybrid (...)" or "v1 (legacy)".
func CgroupMode() (string, error) {
	h, err := detectCgroups()
	if err != nil {
		return "", err
	}
	return h.mode(), nil
}

// CgroupMode names the cgroup mode of the node, as found at New.
func (r *Runtime) CgroupMode() string { return r.cgroups.mode() }

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// resourceFacts reads what the node lets specs ask for: the floor of
// oom_score_adj (staticlet's own unless it may lower it, CAP_SYS_RESOURCE),
// whether memory limits can cover swap, and which huge page sizes the
// hugetlb cgroup runc uses can limit.
func (h cgroupHost) resourceFacts(caps []string) (spec.ResourceFacts, error) {
	f := spec.ResourceFacts{MinOOMScoreAdj: spec.MinOOMScoreAdj}
	if !slices.Contains(caps, "CAP_SYS_RESOURCE") {
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			return f, fmt.Errorf("reading own oom_score_adj: %w", err)
		}
		if f.MinOOMScoreAdj, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return f, fmt.Errorf("reading own oom_score_adj: %w", err)
		}
	}
	hugetlb := false
	if h.unified {
		// runc writes memory.swap.max only where it exists.
		f.Swap = true
		b, _ := os.ReadFile(filepath.Join(h.v2Root, "cgroup.controllers"))
		hugetlb = slices.Contains(strings.Fields(string(b)), "hugetlb")
	} else {
		if mem, ok := h.v1["memory"]; ok {
			_, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes"))
			f.Swap = err == nil
		}
		_, hugetlb = h.v1["hugetlb"]
	}
	if hugetlb {
		f.HugePageSizes = hugePageSizes()
	}
	return f, nil
}

// hugePageSizes lists the node's huge page sizes as runc names them.
func hugePageSizes() []string {
	entries, _ := os.ReadDir("/sys/kernel/mm/hugepages")
	var out []string
	for _, e := range entries {
		kb, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), "hugepages-"), "kB")
		n, err := strconv.ParseInt(kb, 10, 64)
		if !ok || err != nil {
			continue
		}
		if name, err := spec.HugePageSizeName(n * 1024); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// cgroupRoot is the cgroup every pod's cgroup is under, with cgroupfs.
func (r *Runtime) cgroupRoot() string { return "/" + r.cfg.Namespace }

// rootSlice is the first part of the names of staticlet's slices, with
// the systemd driver: its root slice is rootSlice()+".slice".
func (r *Runtime) rootSlice() string { return escapeSliceName(r.cfg.Namespace) }

// podCgroup is the cgroup of the pod p whose sandbox has uid (which a
// container edit does not change): the cgroup root itself without pod
// cgroups. With the systemd driver, it is a slice's name.
func (r *Runtime) podCgroup(p *pod.Pod, uid string) string {
	switch {
	case r.slices != nil && r.cfg.NoPodCgroups:
		return r.rootSlice() + ".slice"
	case r.slices != nil:
		return spec.PodSlice(r.rootSlice(), pod.QOSClass(&p.Spec), escapeSliceName(uid))
	case r.cfg.NoPodCgroups:
		return r.cgroupRoot()
	}
	return spec.PodCgroup(r.cgroupRoot(), pod.QOSClass(&p.Spec), uid)
}

// containerCgroup is the cgroupsPath of container id whose pod's cgroup is
// podCgroup: a path below it, or with the systemd driver runc's
// "slice:prefix:name", for the scope <root>-<id>.scope in the pod's slice.
func (r *Runtime) containerCgroup(podCgroup, id string) string {
	if r.slices != nil {
		return podCgroup + ":" + r.rootSlice() + ":" + id
	}
	return path.Join(podCgroup, id)
}

// runtimeOptions are the runc shim's options for staticlet's containers:
// runc's systemd cgroup driver with staticlet's, else its default.
func (r *Runtime) runtimeOptions() any {
	if r.slices != nil {
		return &options.Options{SystemdCgroup: true}
	}
	return nil
}

// cgroupFile is one value to write into a cgroup.
type cgroupFile struct{ controller, name, value string }

// cgroupFiles are the files that set r, in the order to write them (the
// CFS period before the quota), in v1's or v2's names. runc does the same
// for a container's cgroup; this is for the pod's, which runc only makes.
func cgroupFiles(v2 bool, r *specs.LinuxResources) []cgroupFile {
	var out []cgroupFile
	add := func(controller, name, value string) { out = append(out, cgroupFile{controller, name, value}) }
	if c := r.CPU; c != nil {
		switch {
		case v2 && c.Shares != nil:
			add("cpu", "cpu.weight", strconv.FormatUint(sharesToWeight(*c.Shares), 10))
		case c.Shares != nil:
			add("cpu", "cpu.shares", strconv.FormatUint(*c.Shares, 10))
		}
		period, quota := uint64(spec.CFSPeriod), "max"
		if c.Period != nil {
			period = *c.Period
		}
		if c.Quota != nil && *c.Quota > 0 {
			quota = strconv.FormatInt(*c.Quota, 10)
		}
		switch {
		case v2:
			add("cpu", "cpu.max", quota+" "+strconv.FormatUint(period, 10))
		case quota == "max":
			add("cpu", "cpu.cfs_quota_us", "-1")
		default:
			add("cpu", "cpu.cfs_period_us", strconv.FormatUint(period, 10))
			add("cpu", "cpu.cfs_quota_us", quota)
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil {
		if v2 {
			add("memory", "memory.max", strconv.FormatInt(*m.Limit, 10))
		} else {
			add("memory", "memory.limit_in_bytes", strconv.FormatInt(*m.Limit, 10))
		}
	}
	if r.Pids != nil && r.Pids.Limit != nil {
		add("pids", "pids.max", strconv.FormatInt(*r.Pids.Limit, 10))
	}
	for _, h := range r.HugepageLimits {
		if v2 {
			add("hugetlb", "hugetlb."+h.Pagesize+".max", strconv.FormatUint(h.Limit, 10))
		} else {
			add("hugetlb", "hugetlb."+h.Pagesize+".limit_in_bytes", strconv.FormatUint(h.Limit, 10))
		}
	}
	return out
}

// sharesToWeight converts cpu.shares to cgroup v2's cpu.weight as runc
// does, so a pod's weight compares with its containers'.
func sharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// ensurePodCgroup creates the cgroup of p, whose sandbox has uid, with the
// pod's limits, as the kubelet does before it starts a pod's containers,
// and returns its path (a slice's name with the systemd driver). runc
// creates the directories a container's cgroup is in but sets only the
// container's own limits. The limits are written again before each
// container starts, so they follow edits of the pod's containers: a
// container's CFS quota above its parent's fails to start on cgroup v1.
// The path is returned also with an error.
func (r *Runtime) ensurePodCgroup(ctx context.Context, p *pod.Pod, uid string) (string, error) {
	path := r.podCgroup(p, uid)
	if r.slices != nil {
		return path, r.ensurePodSlice(ctx, p, path)
	}
	if r.cfg.NoPodCgroups {
		// runc makes the root; the pod's limits are its containers'.
		return path, nil
	}
	res, err := spec.PodResources(p, r.resources)
	if err != nil {
		return path, err
	}
	files := cgroupFiles(r.cgroups.unified, res)
	if pod.QOSClass(&p.Spec) == v1.PodQOSBestEffort {
		// The kubelet gives all BestEffort pods together the least weight.
		if err := r.cgroups.write(filepath.Dir(path), cgroupFiles(r.cgroups.unified, bestEffortResources())); err != nil {
			return path, err
		}
	}
	return path, r.cgroups.write(path, files)
}

// bestEffortResources are the limits of the cgroup all BestEffort pods
// share: the least CPU weight.
func bestEffortResources() *specs.LinuxResources {
	return &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: &[]uint64{spec.MinShares}[0]}}
}

// ensurePodSlice starts the slice of pod p with its limits, and the slices
// above it. runc's systemd driver would have systemd make missing parents
// implicitly, but with default dependencies: stopped, and the pods in them
// killed, at the start of every shutdown.
func (r *Runtime) ensurePodSlice(ctx context.Context, p *pod.Pod, slice string) error {
	ctx, cancel := r.call(ctx)
	defer cancel()
	root := r.rootSlice() + ".slice"
	if err := r.slices.ensureOnce(ctx, root, "staticlet's pods", nil); err != nil {
		return err
	}
	if r.cfg.NoPodCgroups {
		return nil
	}
	switch qos := pod.QOSClass(&p.Spec); qos {
	case v1.PodQOSBurstable:
		if err := r.slices.ensureOnce(ctx, r.rootSlice()+"-burstable.slice", "staticlet's Burstable pods", nil); err != nil {
			return err
		}
	case v1.PodQOSBestEffort:
		if err := r.slices.ensureOnce(ctx, r.rootSlice()+"-besteffort.slice", "staticlet's BestEffort pods", bestEffortResources()); err != nil {
			return err
		}
	}
	res, err := spec.PodResources(p, r.resources)
	if err != nil {
		return err
	}
	if err := r.slices.ensure(ctx, slice, "staticlet pod "+p.String(), res); err != nil {
		return err
	}
	if kills, err := r.cgroups.sliceOOMKills(slice); err == nil {
		r.ooms.baseline(slice, kills)
	}
	// systemd has no property for huge pages, and keeps the CPU quota in
	// steps of 10ms a second: the exact values go in the files.
	dir, err := SliceDir(slice)
	if err != nil {
		return err
	}
	return r.cgroups.writeExisting(dir, cgroupFiles(r.cgroups.unified, res))
}

// write creates cgroup path where files go and writes them.
func (h cgroupHost) write(path string, files []cgroupFile) error {
	if h.unified {
		if err := h.enableControllers(path); err != nil {
			return err
		}
	}
	return h.writeFiles(path, files, true)
}

// writeExisting writes files into cgroup path, those of them that exist:
// a cgroup systemd made, whose controllers are its to enable.
func (h cgroupHost) writeExisting(path string, files []cgroupFile) error {
	return h.writeFiles(path, files, false)
}

// writeFiles writes files into cgroup path in each controller's hierarchy,
// creating its directories if create is set. A file that does not exist
// is skipped where it can be missing: on v2, where its controller is not
// enabled, and in a cgroup not created here.
func (h cgroupHost) writeFiles(path string, files []cgroupFile, create bool) error {
	for _, f := range files {
		dir := filepath.Join(h.v2Root, path)
		if !h.unified {
			mnt, ok := h.v1[f.controller]
			if !ok {
				continue
			}
			dir = filepath.Join(mnt, path)
		}
		if create {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
		}
		file := filepath.Join(dir, f.name)
		if _, err := os.Stat(file); (h.unified || !create) && errors.Is(err, fs.ErrNotExist) {
			continue // the controller is not available here
		}
		if err := os.WriteFile(file, []byte(f.value), 0o644); err != nil {
			return fmt.Errorf("setting %s of cgroup %s to %s: %w", f.name, path, f.value, err)
		}
	}
	return nil
}

// enableControllers creates path in the v2 hierarchy and enables the
// controllers whose files a pod's cgroup needs in each of its ancestors,
// as runc does for a container's.
func (h cgroupHost) enableControllers(path string) error {
	dir := h.v2Root
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("reading the controllers of cgroup %s: %w", dir, err)
		}
		var enable []string
		for _, c := range strings.Fields(string(b)) {
			if c == "cpu" || c == "memory" || c == "hugetlb" || c == "pids" {
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) > 0 {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
				return fmt.Errorf("enabling controllers in cgroup %s: %w", dir, err)
			}
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// removePodCgroups removes the cgroups of the pod with uid from every
// hierarchy: runc removes a container's own cgroup, not the pod's it made
// on the way. A cgroup that still holds a process stays, with an error.
// Without pod cgroups there is none, and the node's cgroups may not be
// writable. With the systemd driver, the pod's slice is stopped, which
// removes its cgroups.
func (r *Runtime) removePodCgroups(ctx context.Context, uid string) error {
	if r.cfg.NoPodCgroups {
		return nil
	}
	var errs []error
	if r.slices != nil {
		ctx, cancel := r.call(context.WithoutCancel(ctx))
		defer cancel()
		for _, slice := range spec.PodSliceCandidates(r.rootSlice(), escapeSliceName(uid)) {
			errs = append(errs, r.slices.stop(ctx, slice))
			r.ooms.forget(slice)
		}
		return errors.Join(errs...)
	}
	for _, mnt := range r.cgroups.all {
		for _, path := range spec.PodCgroupCandidates(r.cgroupRoot(), uid) {
			errs = append(errs, removeCgroupTree(filepath.Join(mnt, path)))
		}
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes cgroup dir and those below it, deepest first; a
// cgroup directory goes with rmdir only, its files with it.
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing cgroup %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeCgroupTree(filepath.Join(dir, e.Name())))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
	}
	return errors.Join(errs...)
}
