package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/testutil/etcdtest"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// benchElectionFlags shorten etcd's ticks tenfold, so that the random
// part of its first election is 10 to 60 ms rather than 0.1 to 1.1 s.
var benchElectionFlags = []string{"--heartbeat-interval=10", "--election-timeout=50"}

// etcdSamples are starts of etcd: when its process was running and when
// it answered healthy, each from the start.
type etcdSamples struct{ running, healthy []time.Duration }

// benchEtcd: from kubeadm's etcd manifest renamed into the directory to
// etcd's health endpoint (kubeadm's startup probe's, which needs a leader)
// answering OK, polled every millisecond; alongside, the same etcd with
// the same flags and mounts started through raw containerd, and as a plain
// process. Each start bootstraps a new one-member cluster in a new data
// directory, as kubeadm init does, so that each does the same work.
//
// Two things that no runtime has a part in would drown the figure, and
// are taken out on every side alike: etcd waits a random 0.1 to 1.1 s
// before it elects itself (raft's randomized election timeout, less the
// ticks a lone member skips), so every etcd runs with benchElectionFlags;
// and on disk the latency of its fsyncs varies by hundreds of
// milliseconds from one start to the next on a shared machine, so the
// data directories are on tmpfs where there is one (/dev/shm). When
// etcd's process was first seen running splits each figure into the
// runtime's part and etcd's own.
func (be *benchEnv) benchEtcd(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	harness.ImportEtcd(b, be.ctrd, harness.TestNS)
	harness.ImportEtcd(b, be.ctrd, rawNS)
	img, err := be.client.GetImage(rawCtx(ctx), etcdtest.ImageRef)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := etcdtest.Build(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := harness.NewEtcdNode(b, b.TempDir())
	dir := benchDataDir(b)
	var sl, raw, plain etcdSamples
	i := 0
	for b.Loop() {
		i++
		// staticlet; the data directory's volume is DirectoryOrCreate.
		n.Data = filepath.Join(dir, fmt.Sprintf("staticlet-%d", i))
		p := n.Pod()
		p.Spec.Containers[0].Command = append(p.Spec.Containers[0].Command, benchElectionFlags...)
		manifest := harness.EtcdManifest(b, p)
		sl.time(b, n, func() { be.write(b, "etcd.yaml", manifest) })
		be.remove(b, "etcd.yaml")
		be.waitNoPods(b)
		removeAll(b, n.Data)

		// raw containerd
		data := filepath.Join(dir, fmt.Sprintf("raw-%d", i))
		var r *rawCtr
		raw.time(b, n, func() {
			if err := os.Mkdir(data, 0o755); err != nil {
				b.Fatal(err)
			}
			r, err = be.rawStartImage(rawCtx(ctx), img, slices.Concat([]string{"etcd"}, n.Flags(harness.EtcdPKIDir, harness.EtcdDataDir), benchElectionFlags),
				oci.WithMounts([]specs.Mount{
					{Destination: harness.EtcdDataDir, Type: "bind", Source: data, Options: []string{"rbind", "rw"}},
					{Destination: harness.EtcdPKIDir, Type: "bind", Source: n.PKI, Options: []string{"rbind", "rw"}},
				}))
			if err != nil {
				b.Fatal(err)
			}
		})
		if err := r.remove(rawCtx(ctx)); err != nil {
			b.Fatal(err)
		}
		removeAll(b, data)

		// plain process
		data = filepath.Join(dir, fmt.Sprintf("plain-%d", i))
		cmd := exec.Command(bin, append(n.Flags(n.PKI, data), benchElectionFlags...)...)
		plain.time(b, n, func() {
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
		})
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		removeAll(b, data)
	}
	s, r := reportMedians(b, sl.healthy, raw.healthy)
	pl := median(plain.healthy)
	b.ReportMetric(ms(pl), "process-ms")
	b.ReportMetric(ms(s-r), "overhead-ms")
	be.report(b, fmt.Sprintf("etcd→healthy:      staticlet median %s (running at %s), raw containerd %s (running at %s), overhead %s (target ≤ 100ms); plain process %s (n=%d)",
		fmtMS(s), fmtMS(median(sl.running)), fmtMS(r), fmtMS(median(raw.running)), fmtMS(s-r), fmtMS(pl), len(sl.healthy)))
}

// time runs start, which starts an etcd of n, and adds how long after it
// began etcd's process was running and its health endpoint answered OK,
// the endpoint polled every millisecond.
func (ss *etcdSamples) time(b *testing.B, n *harness.EtcdNode, start func()) {
	b.Helper()
	watch := watchProcs(b)
	t0 := time.Now()
	start()
	_, running := watch.waitMarker(b, n.MetricsFlag())
	healthy := waitEtcdHealthy(b, n)
	ss.running = append(ss.running, running.Sub(t0))
	ss.healthy = append(ss.healthy, healthy.Sub(t0))
	trace(b, fmt.Sprintf("%s running at %s, healthy", b.Name(), running.Sub(t0)), t0, healthy.Sub(t0))
}

// waitEtcdHealthy polls n's health endpoint every millisecond until it
// answers OK, and returns when it did.
func waitEtcdHealthy(tb testing.TB, n *harness.EtcdNode) time.Time {
	tb.Helper()
	deadline := time.Now().Add(benchWait)
	url := n.HealthURL()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := etcdtest.Healthy(ctx, url)
		cancel()
		if err == nil {
			return time.Now()
		}
		if time.Now().After(deadline) {
			tb.Fatalf("etcd not healthy after %s: %v", benchWait, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// benchDataDir is a new directory for etcd's data, on tmpfs if /dev/shm is
// one, removed when the benchmark ends.
func benchDataDir(b *testing.B) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != tmpfsMagic {
		b.Logf("etcd's data on disk: /dev/shm is no tmpfs (%v)", err)
		return b.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "slbetcd")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// tmpfsMagic is tmpfs's f_type in statfs (TMPFS_MAGIC).
const tmpfsMagic = 0x01021994

// removeAll removes an etcd's data directory as soon as it has stopped:
// each holds a preallocated 64 MiB write-ahead log, in memory on tmpfs.
func removeAll(b *testing.B, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
}
