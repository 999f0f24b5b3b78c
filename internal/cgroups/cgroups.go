// Package cgroups owns the node's cgroups as staticlet's pods use them:
// it finds the node's hierarchies (v1, hybrid or v2), makes and removes
// each pod's cgroup with its limits, with the cgroupfs driver or the
// systemd one (slices through systemd's D-Bus API), names the cgroups of
// containers for runc, counts OOM kills, and reads CPU and memory usage.
// It does not talk to containerd: package sandbox hands it the cgroup
// paths of containers' specs, and gives runc the names and options it
// returns.
//
// A Manager is safe for concurrent use. What it keeps open is the
// systemd driver's D-Bus connection, which Close ends.
package cgroups

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
	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// Config configures the pods' cgroups.
type Config struct {
	// NoPodCgroups, as the kubelet's --cgroups-per-qos=false, makes no
	// QoS-class or pod cgroups: each container's cgroup is directly under
	// the cgroup root, with only its own limits. For a staticlet that
	// cannot write the node's cgroups (in a container of its own) while
	// containerd's runc can.
	NoPodCgroups bool
	// PodPidsLimit caps the processes of each pod's cgroup, as the
	// kubelet's podPidsLimit; 0 or less is no cap.
	PodPidsLimit int64
	// Systemd is the kubelet's systemd cgroup driver: pods' cgroups are
	// slices systemd makes, under <root>.slice, and containers' are
	// scopes runc's systemd driver makes. It needs systemd as PID 1.
	Systemd bool
}

// Manager makes, removes and reads the cgroups of staticlet's pods.
type Manager struct {
	cfg Config
	// root names the cgroup every pod's is under: /<root> with cgroupfs,
	// the slice <root>.slice (escaped) with the systemd driver.
	root string
	// host is the node's cgroup hierarchies, and resources what they and
	// staticlet's privileges let a spec ask for.
	host      cgroupHost
	resources spec.ResourceFacts
	// slices makes pods' slices with the systemd driver; nil with cgroupfs.
	slices *systemdSlices
	// ooms accounts for the OOM kills pods' slices counted.
	ooms oomLedger
}

// New reads the node's cgroup hierarchies and what specs may ask of them
// with the capabilities caps; pods' cgroups go under root. It starts
// nothing: the systemd driver connects to systemd on first use.
func New(cfg Config, root string, caps []string) (*Manager, error) {
	host, err := detectCgroups()
	if err != nil {
		return nil, err
	}
	resources, err := host.resourceFacts(caps)
	if err != nil {
		return nil, err
	}
	resources.PodPidsLimit = cfg.PodPidsLimit
	m := &Manager{cfg: cfg, root: root, host: host, resources: resources}
	if cfg.Systemd {
		if !SystemdBooted() {
			return nil, errors.New("the systemd cgroup driver needs systemd as the init system (no /run/systemd/system); use cgroupfs")
		}
		m.slices = &systemdSlices{v2: host.unified}
	}
	return m, nil
}

// Close ends the connection to systemd, if there is one.
func (m *Manager) Close() {
	if m.slices != nil {
		m.slices.close()
	}
}

// Resources are what the node's cgroups and staticlet's privileges let a
// spec ask for, with the pods' process cap.
func (m *Manager) Resources() spec.ResourceFacts { return m.resources }

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
		mnt, fstype, opts := procfs.UnescapeMount(fields[4]), fields[sep+1], fields[sep+3]
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

// Mode names the cgroup mode of the node staticlet runs on, as read from
// its mounts: "v2 (unified)", "hybrid (...)" or "v1 (legacy)".
func Mode() (string, error) {
	h, err := detectCgroups()
	if err != nil {
		return "", err
	}
	return h.mode(), nil
}

// Mode names the cgroup mode of the node, as found at New.
func (m *Manager) Mode() string { return m.host.mode() }

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
func (m *Manager) cgroupRoot() string { return "/" + m.root }

// rootSlice is the first part of the names of staticlet's slices, with
// the systemd driver: its root slice is rootSlice()+".slice".
func (m *Manager) rootSlice() string { return escapeSliceName(m.root) }

// podCgroup is the cgroup of the pod p whose sandbox has uid (which a
// container edit does not change): the cgroup root itself without pod
// cgroups. With the systemd driver, it is a slice's name.
func (m *Manager) podCgroup(p *pod.Pod, uid string) string {
	switch {
	case m.slices != nil && m.cfg.NoPodCgroups:
		return m.rootSlice() + ".slice"
	case m.slices != nil:
		return spec.PodSlice(m.rootSlice(), pod.QOSClass(&p.Spec), escapeSliceName(uid))
	case m.cfg.NoPodCgroups:
		return m.cgroupRoot()
	}
	return spec.PodCgroup(m.cgroupRoot(), pod.QOSClass(&p.Spec), uid)
}

// ContainerCgroup is the cgroupsPath of container id whose pod's cgroup is
// podCgroup: a path below it, or with the systemd driver runc's
// "slice:prefix:name", for the scope <root>-<id>.scope in the pod's slice.
func (m *Manager) ContainerCgroup(podCgroup, id string) string {
	if m.slices != nil {
		return podCgroup + ":" + m.rootSlice() + ":" + id
	}
	return path.Join(podCgroup, id)
}

// RuntimeOptions are the runc shim's options for staticlet's containers:
// runc's systemd cgroup driver with staticlet's, else its default.
func (m *Manager) RuntimeOptions() any {
	if m.slices != nil {
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

// EnsurePod creates the cgroup of p, whose sandbox has uid, with the
// pod's limits, as the kubelet does before it starts a pod's containers,
// and returns its path (a slice's name with the systemd driver). runc
// creates the directories a container's cgroup is in but sets only the
// container's own limits. The limits are written again before each
// container starts, so they follow edits of the pod's containers: a
// container's CFS quota above its parent's fails to start on cgroup v1.
// The path is returned also with an error. ctx bounds the calls to
// systemd.
func (m *Manager) EnsurePod(ctx context.Context, p *pod.Pod, uid string) (string, error) {
	path := m.podCgroup(p, uid)
	if m.slices != nil {
		return path, m.ensurePodSlice(ctx, p, path)
	}
	if m.cfg.NoPodCgroups {
		// runc makes the root; the pod's limits are its containers'.
		return path, nil
	}
	res, err := spec.PodResources(p, m.resources)
	if err != nil {
		return path, err
	}
	files := cgroupFiles(m.host.unified, res)
	if pod.QOSClass(&p.Spec) == v1.PodQOSBestEffort {
		// The kubelet gives all BestEffort pods together the least weight.
		if err := m.host.write(filepath.Dir(path), cgroupFiles(m.host.unified, bestEffortResources())); err != nil {
			return path, err
		}
	}
	return path, m.host.write(path, files)
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
func (m *Manager) ensurePodSlice(ctx context.Context, p *pod.Pod, slice string) error {
	root := m.rootSlice() + ".slice"
	if err := m.slices.ensureOnce(ctx, root, "staticlet's pods", nil); err != nil {
		return err
	}
	if m.cfg.NoPodCgroups {
		return nil
	}
	switch qos := pod.QOSClass(&p.Spec); qos {
	case v1.PodQOSBurstable:
		if err := m.slices.ensureOnce(ctx, m.rootSlice()+"-burstable.slice", "staticlet's Burstable pods", nil); err != nil {
			return err
		}
	case v1.PodQOSBestEffort:
		if err := m.slices.ensureOnce(ctx, m.rootSlice()+"-besteffort.slice", "staticlet's BestEffort pods", bestEffortResources()); err != nil {
			return err
		}
	}
	res, err := spec.PodResources(p, m.resources)
	if err != nil {
		return err
	}
	if err := m.slices.ensure(ctx, slice, "staticlet pod "+p.String(), res); err != nil {
		return err
	}
	if kills, err := m.host.sliceOOMKills(slice); err == nil {
		m.ooms.baseline(slice, kills)
	}
	// systemd has no property for huge pages, and keeps the CPU quota in
	// steps of 10ms a second: the exact values go in the files.
	dir, err := SliceDir(slice)
	if err != nil {
		return err
	}
	return m.host.writeExisting(dir, cgroupFiles(m.host.unified, res))
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

// RemovePod removes the cgroups of the pod with uid from every
// hierarchy: runc removes a container's own cgroup, not the pod's it made
// on the way. A cgroup that still holds a process stays, with an error.
// Without pod cgroups there is none, and the node's cgroups may not be
// writable. With the systemd driver, the pod's slice is stopped, which
// removes its cgroups; ctx bounds the calls to systemd.
func (m *Manager) RemovePod(ctx context.Context, uid string) error {
	if m.cfg.NoPodCgroups {
		return nil
	}
	var errs []error
	if m.slices != nil {
		for _, slice := range spec.PodSliceCandidates(m.rootSlice(), escapeSliceName(uid)) {
			errs = append(errs, m.slices.stop(ctx, slice))
			m.ooms.forget(slice)
		}
		return errors.Join(errs...)
	}
	for _, mnt := range m.host.all {
		for _, path := range spec.PodCgroupCandidates(m.cgroupRoot(), uid) {
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
