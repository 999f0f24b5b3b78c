package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/staticlet/staticlet/internal/sandbox/procfs"
	"github.com/staticlet/staticlet/internal/testutil/metricstest"
)

// metric is one series the soak samples: its name, unit and floor (the
// growth over the run below which it is noise whatever the fit says; see
// fit.growth).
type metric struct {
	name, unit string
	floor      float64
}

// metrics are the series, in the order of a sample's values and of the
// report.
var metrics = []metric{
	{"staticlet RSS", "MiB", 8},
	{"staticlet goroutines", "", 50},
	{"staticlet open files", "", 20},
	{"containerd containers", "", 5},
	{"containerd tasks", "", 5},
	{"containerd snapshots", "", 5},
	{"containerd leases", "", 3},
	{"containerd content blobs", "", 5},
	{"containerd content", "MiB", 5},
	{"containerd images", "", 2},
	{"containerd RSS", "MiB", 10},
	{"shims", "", 5},
	{"shims' RSS", "MiB", 10},
	{"mounts", "", 10},
	{"cgroups", "", 10},
	{"pod directories", "", 5},
	{"pod log directories", "", 5},
	{"log bytes", "MiB", 5},
}

// sampler reads the series of one soak's world.
type sampler struct {
	ctrd        *client.Client
	address     string // containerd's socket, as its shims name it
	config      string // containerd's config file, as its command line names it
	ns          string // staticlet's containerd namespace
	snapshotter string
	mountDirs   []string // mounts under these count
	cgroupDirs  []string // staticlet's cgroups are under these
	root, logs  string   // staticlet's --root-dir, --pod-logs-dir
}

// sample reads every series once, for the staticlet process pid whose
// status socket is socket; the values are in the order of metrics.
func (s *sampler) sample(ctx context.Context, pid int, socket string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rss, err := rssMiB(pid)
	if err != nil {
		return nil, err
	}
	goroutines, err := goroutines(ctx, socket)
	if err != nil {
		return nil, err
	}
	fds, err := count(filepath.Join("/proc", strconv.Itoa(pid), "fd"), false)
	if err != nil {
		return nil, err
	}
	objs, err := s.containerdObjects(ctx)
	if err != nil {
		return nil, err
	}
	procs, err := s.procs()
	if err != nil {
		return nil, err
	}
	mounts, err := s.mounts()
	if err != nil {
		return nil, err
	}
	var cgroups int
	for _, dir := range s.cgroupDirs {
		n, err := count(dir, true)
		if err != nil {
			return nil, err
		}
		cgroups += n
	}
	podDirs, err := count(filepath.Join(s.root, "pods"), false)
	if err != nil {
		return nil, err
	}
	logDirs, err := count(s.logs, false)
	if err != nil {
		return nil, err
	}
	logBytes, err := du(s.logs)
	if err != nil {
		return nil, err
	}
	v := []float64{rss, goroutines, float64(fds)}
	v = append(v, objs...)
	v = append(v, procs...)
	v = append(v, float64(mounts), float64(cgroups), float64(podDirs), float64(logDirs), float64(logBytes)/(1<<20))
	if len(v) != len(metrics) {
		return nil, fmt.Errorf("sampled %d values for %d series", len(v), len(metrics))
	}
	return v, nil
}

// cgroupDirs are the directories staticlet's cgroups are under with
// namespace ns, in every hierarchy: /sys/fs/cgroup/ns with cgroup v2,
// /sys/fs/cgroup/<controller>/ns in each of v1's.
func cgroupDirs(ns string) []string {
	dirs := []string{filepath.Join("/sys/fs/cgroup", ns)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return dirs
	}
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), ns))
		}
	}
	return dirs
}

// rssMiB is process pid's resident set size.
func rssMiB(pid int) (float64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("reading the RSS of process %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("reading the RSS of process %d: %w", pid, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("reading the RSS of process %d: no VmRSS in its status", pid)
}

// goroutines scrapes go_goroutines from the status socket's /metrics.
func goroutines(ctx context.Context, socket string) (float64, error) {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	defer c.CloseIdleConnections()
	samples, err := metricstest.Scrape(ctx, c, "http://staticlet/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping staticlet's metrics: %w", err)
	}
	s, ok := metricstest.Find(samples, "go_goroutines")
	if !ok {
		return 0, errors.New("scraping staticlet's metrics: no go_goroutines")
	}
	return s.Value, nil
}

// containerdObjects counts the containers, tasks, snapshots, leases,
// content blobs, content bytes (MiB) and images of staticlet's namespace.
func (s *sampler) containerdObjects(ctx context.Context) ([]float64, error) {
	ctx = namespaces.WithNamespace(ctx, s.ns)
	cs, err := s.ctrd.ContainerService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	ts, err := s.ctrd.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	var snaps int
	if err := s.ctrd.SnapshotService(s.snapshotter).Walk(ctx, func(context.Context, snapshots.Info) error {
		snaps++
		return nil
	}); err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	ls, err := s.ctrd.LeasesService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	var blobs, size int64
	if err := s.ctrd.ContentStore().Walk(ctx, func(i content.Info) error {
		blobs++
		size += i.Size
		return nil
	}); err != nil {
		return nil, fmt.Errorf("listing content: %w", err)
	}
	imgs, err := s.ctrd.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return []float64{float64(len(cs)), float64(len(ts.Tasks)), float64(snaps), float64(len(ls)),
		float64(blobs), float64(size) / (1 << 20), float64(len(imgs))}, nil
}

// procs reads containerd's RSS (MiB), how many runc shims staticlet's
// namespace has on it, and their RSS (MiB) together.
func (s *sampler) procs() ([]float64, error) {
	procs, err := procfs.List()
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var ctrd, shims, shimRSS float64
	for _, p := range procs {
		if len(p.Args) == 0 {
			continue
		}
		switch {
		case filepath.Base(p.Args[0]) == "containerd" && procfs.ArgValue(p.Args, "config") == s.config:
			if ctrd, err = rssMiB(p.PID); err != nil {
				return nil, err
			}
		case strings.HasPrefix(filepath.Base(p.Args[0]), "containerd-shim") &&
			procfs.ArgValue(p.Args, "namespace") == s.ns && procfs.ArgValue(p.Args, "address") == s.address:
			shims++
			if rss, err := rssMiB(p.PID); err == nil { // or it just exited
				shimRSS += rss
			}
		}
	}
	if ctrd == 0 {
		return nil, fmt.Errorf("no containerd with --config %s", s.config)
	}
	return []float64{ctrd, shims, shimRSS}, nil
}

// mounts counts the mount points under mountDirs: the containers'
// roots, the pods' volumes and network namespaces.
func (s *sampler) mounts() (int, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, fmt.Errorf("reading mounts: %w", err)
	}
	var n int
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := procfs.UnescapeMount(f[4])
		for _, d := range s.mountDirs {
			if strings.HasPrefix(mp, d+"/") {
				n++
				break
			}
		}
	}
	return n, nil
}

// count is how many entries dir holds (every directory below it, if
// dirsBelow); a missing dir holds none.
func count(dir string, dirsBelow bool) (int, error) {
	if !dirsBelow {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("counting %s: %w", dir, err)
		}
		return len(ents), nil
	}
	var n int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a cgroup removed while walking
		}
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("counting the directories under %s: %w", dir, err)
	}
	return n, nil
}

// du is the size of the files under dir.
func du(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // rotated or removed while walking
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if i, err := d.Info(); err == nil {
				n += i.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sizing %s: %w", dir, err)
	}
	return n, nil
}
