package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/reconcile"
	"github.com/staticlet/staticlet/internal/sandbox"
	"github.com/staticlet/staticlet/internal/status"
)

// What the status server serves beyond the store: container logs, exec,
// restarts and usage, each from the component that has it.

// logOpener serves `staticlet logs` from the container log files under
// podLogsDir: the instance of the container that the pod's status names
// (its restartCount), or the one before it.
func logOpener(store *status.Store, podLogsDir string) status.LogOpener {
	return func(ctx context.Context, key, container string, opts status.LogOptions) (io.ReadCloser, error) {
		p, ok := store.Pod(key)
		if !ok {
			return nil, fmt.Errorf("pod %s: %w", key, fs.ErrNotExist)
		}
		cs, ok := containerStatus(p, container)
		if !ok {
			return nil, fmt.Errorf("container %q of pod %s has not been created yet: %w", container, key, fs.ErrNotExist)
		}
		instance := int(cs.RestartCount)
		if opts.Previous {
			if instance == 0 {
				return nil, fmt.Errorf("previous terminated container %q in pod %s not found: %w", container, key, fs.ErrNotExist)
			}
			instance--
		}
		path, err := logs.FindLog(podLogsDir, p.Namespace, p.Name, string(p.UID), container, instance)
		if err != nil {
			return nil, err
		}
		q := logs.Query{Path: path, TailLines: opts.TailLines, Timestamps: opts.Timestamps,
			Since: opts.Since(time.Now()), LimitBytes: opts.LimitBytes}
		// A previous instance writes no more; nor does one that is not
		// running, like a kubelet's follow of a terminated container.
		if opts.Follow && !opts.Previous && cs.State.Running != nil {
			q.Follow = true
			id := cs.ContainerID
			q.Running = func() bool {
				p, ok := store.Pod(key)
				if !ok {
					return false
				}
				cur, ok := containerStatus(p, container)
				return ok && cur.ContainerID == id && cur.State.Running != nil
			}
		}
		return logs.Open(ctx, q)
	}
}

// containerStatus finds the status of a container, app or init, that has
// been created.
func containerStatus(p *v1.Pod, name string) (v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name && cs.ContainerID != "" {
				return cs, true
			}
		}
	}
	return v1.ContainerStatus{}, false
}

// execInContainer serves `staticlet exec` through the runtime, the path
// exec probes take.
func execInContainer(rt *sandbox.Runtime) status.ExecFunc {
	return func(ctx context.Context, id string, opts status.ExecOptions) (int, error) {
		s := sandbox.ExecStreams{
			Stdin:  opts.Stdin,
			Stdout: opts.Stdout,
			Stderr: opts.Stderr,
			TTY:    opts.TTY,
			Size:   sandbox.ConsoleSize{Width: opts.Size.Cols, Height: opts.Size.Rows},
		}
		if opts.Resize != nil {
			resize := make(chan sandbox.ConsoleSize)
			s.Resize = resize
			fctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			wg.Go(func() { forwardSizes(fctx, opts.Resize, resize) })
		}
		return rt.ExecStream(ctx, id, opts.Command, s)
	}
}

// forwardSizes passes terminal sizes from the status server to the
// runtime until ctx ends.
func forwardSizes(ctx context.Context, from <-chan status.TermSize, to chan<- sandbox.ConsoleSize) {
	for {
		select {
		case s := <-from:
			select {
			case to <- sandbox.ConsoleSize{Width: s.Cols, Height: s.Rows}:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// restarter serves staticlet restart from the reconciler.
func restarter(rec *reconcile.Reconciler) status.Restarter {
	return func(ctx context.Context, key, container string) error {
		ns, name, _ := strings.Cut(key, "/")
		return rec.Restart(ctx, pod.Key{Namespace: ns, Name: name}, container)
	}
}

// statsReader samples the pods' usage from the runtime for the status
// socket; a sample is taken for each request, none in the background.
func statsReader(rt *sandbox.Runtime) status.StatsReader {
	return func(ctx context.Context, window time.Duration) (*status.PodStatsList, error) {
		s, err := rt.SampleUsage(ctx, window)
		if err != nil {
			return nil, err
		}
		list := &status.PodStatsList{Time: s.Time, Window: s.Window.String(), Pods: make([]status.PodStats, len(s.Pods))}
		for i, p := range s.Pods {
			ps := status.PodStats{
				Namespace:  p.Pod.Namespace,
				Name:       p.Pod.Name,
				Usage:      status.Usage{CPUNanoCores: p.CPUNanoCores, MemoryWorkingSetBytes: p.WorkingSetBytes},
				Containers: make([]status.ContainerStats, len(p.Containers)),
			}
			for j, c := range p.Containers {
				ps.Containers[j] = status.ContainerStats{Name: c.Name, Usage: status.Usage{CPUNanoCores: c.CPUNanoCores, MemoryWorkingSetBytes: c.WorkingSetBytes}}
			}
			list.Pods[i] = ps
		}
		return list, nil
	}
}

// deviceLister lists the CDI devices the specs of reg name, as it read
// them last, for the status socket and the metrics.
func deviceLister(reg *devices.Registry) status.DeviceLister {
	return func() status.DeviceList {
		list := status.DeviceList{SpecDirs: reg.SpecDirs()}
		for _, k := range reg.Kinds() {
			for _, d := range k.Devices {
				list.Devices = append(list.Devices, status.Device{Name: d.Name, Kind: k.Name, Spec: d.Spec})
			}
		}
		return list
	}
}
