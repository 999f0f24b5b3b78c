package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"

	"github.com/staticlet/staticlet/internal/pod"
)

// ResumeContainer finishes the start of container id, which was created
// and whose start did not finish: staticlet died between creating it and
// starting its task, or while the start was under way. It starts the
// container's task, creating it first if there is none. A start a dead
// staticlet left under way may still land; the shim runs the process once
// either way, and ResumeContainer reports it as it finds it, running or
// exited. Removing the container and starting a new one instead could run
// the process twice, the second time for a restartPolicy Never container.
//
// An error means the container was not started by this call and its
// process never ran, as far as containerd tells; it is the caller's to
// remove it then.
func (r *Runtime) ResumeContainer(ctx context.Context, id string) (pod.Record, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return pod.Record{}, fmt.Errorf("loading container %s: %w", id, err)
	}
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return pod.Record{}, fmt.Errorf("loading container %s: %w", id, err)
	}
	rec := recordFromLabels(id, info.Labels, info.CreatedAt)
	if rec.State == pod.TaskExited {
		return rec, nil // it ran, and its exit is recorded
	}
	t, err := c.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		if lostExit(&rec, info.Labels[LabelStarting]); rec.Lost {
			return rec, nil // it may have run, and must not twice
		}
		t, err = r.newTask(ctx, c, r.containerOutput(rec), shimGone)
	}
	if err != nil {
		return pod.Record{}, fmt.Errorf("creating the task of container %s: %w", id, err)
	}
	// As StartContainer marks a container that runs once; whatever its
	// policy here, a resumed container is marked the same.
	if info.Labels[LabelStarting] == "" {
		if _, err := c.SetLabels(ctx, map[string]string{LabelStarting: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
			return pod.Record{}, fmt.Errorf("starting container %s: %w", id, err)
		}
	}
	startAt := time.Now()
	startErr := t.Start(ctx)
	// Whether this start or the dead staticlet's ran it, the task's
	// status says how it stands now.
	st, err := t.Status(ctx)
	if err != nil {
		return pod.Record{}, fmt.Errorf("reading the state of container %s: %w", id, err)
	}
	switch st.Status {
	case client.Running, client.Paused, client.Pausing:
		rec.State, rec.Pid, rec.StartedAt = pod.TaskRunning, t.Pid(), r.started(ctx, c, startAt)
	case client.Stopped:
		rec.State, rec.Pid = pod.TaskExited, t.Pid()
		rec.ExitCode, rec.FinishedAt = int32(st.ExitStatus), st.ExitTime
	default:
		if startErr == nil {
			startErr = fmt.Errorf("task in state %q", st.Status)
		}
		return pod.Record{}, fmt.Errorf("starting container %s: %w", id, startErr)
	}
	return rec, nil
}

// containerOutput is where the output of container rec goes: its log file,
// <pod logs>/<container>/<attempt>.log, through the log driver when there
// is one.
func (r *Runtime) containerOutput(rec pod.Record) cio.Creator {
	logPath := filepath.Join(r.PodLogDir(rec.Pod.Namespace, rec.Pod.Name, rec.PodUID), rec.Name, strconv.Itoa(rec.Attempt)+".log")
	if r.cfg.Logs.DriverArgs != nil {
		// The shim runs the driver with the container's pipes: output is
		// written while staticlet is away, and never waits on it.
		return r.driverIO(logPath)
	}
	return cio.LogFile(logPath)
}

// driverIO sends a process's output to logPath through the log driver,
// once what the driver needs runs.
func (r *Runtime) driverIO(logPath string) cio.Creator {
	if r.cfg.Logs.Ensure != nil {
		if err := r.cfg.Logs.Ensure(); err != nil {
			r.cfg.Logger.Warn("starting the log daemon; the output waits in the pipes", "log", logPath, "err", err)
		}
	}
	return cio.BinaryIO(r.cfg.Logs.Driver, r.cfg.Logs.DriverArgs(logPath))
}
