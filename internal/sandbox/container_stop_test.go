package sandbox

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/staticlet/staticlet/internal/pod"
)

// waitTrapped waits until the script of container process pid has set its
// traps, which it tells by creating trappedFile. The process's signal masks
// cannot tell it: StartContainer returns once runc has let its init go on,
// and until that init executes the script's shell pid is runc's init, a Go
// program that catches every signal. A stop signal sent then either ends
// that init (exit 2) or reaches the shell before its trap, at the default
// action, which the kernel discards for the init of a PID namespace: the
// container runs on until SIGKILL.
func waitTrapped(t *testing.T, pid uint32) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/root%s", pid, trappedFile)
	waitFor(t, 10*time.Second, fmt.Sprintf("process %d to set its traps", pid), func() (bool, string) {
		_, err := os.Stat(path)
		return err == nil, fmt.Sprint(err)
	})
}

// taskStatus returns the status of container id's task.
func (h *harness) taskStatus(id string) (client.Status, error) {
	c, err := h.client.LoadContainer(h.nsCtx(), id)
	if err != nil {
		return client.Status{}, err
	}
	task, err := c.Task(h.nsCtx(), nil)
	if err != nil {
		return client.Status{}, err
	}
	return task.Status(h.nsCtx())
}

func TestStopContainer(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/stop.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: stop
spec:
  containers:
  - name: polite
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
  - name: stubborn
    image: localhost/busybox:test
    command: [/bin/sh, -c, "trap '' TERM; : > %s; while true; do sleep 1; done"]
  - name: done
    image: localhost/busybox:test
    command: [/bin/sh, -c, "exit 0"]
`, idleScript, trappedFile))
	sb := h.pauseSandbox(p) // an earlier build's: its pause is stopped below

	t.Run("exits on TERM within grace", func(t *testing.T) {
		h := *h
		h.t = t
		c := h.start(p, sb, "polite", 0)
		waitTrapped(t, c.Pid)
		const grace = 10 * time.Second
		start := time.Now()
		if err := h.rt.StopContainer(h.ctx(), c.ID, grace); err != nil {
			t.Fatalf("StopContainer(polite): %v", err)
		}
		if elapsed := time.Since(start); elapsed >= grace/2 {
			t.Errorf("StopContainer(polite) took %s, want well under the grace of %s", elapsed, grace)
		}
		st, err := h.taskStatus(c.ID)
		if err != nil || st.Status != client.Stopped || st.ExitStatus != 0 {
			t.Errorf("task after StopContainer(polite) = %+v, %v, want stopped with status 0", st, err)
		}
		waitFor(t, 10*time.Second, "the process to go", func() (bool, string) {
			return gone(c.Pid), fmt.Sprintf("process %d still there", c.Pid)
		})
	})

	t.Run("killed after grace when TERM is ignored", func(t *testing.T) {
		h := *h
		h.t = t
		c := h.start(p, sb, "stubborn", 0)
		waitTrapped(t, c.Pid)
		const grace = 2 * time.Second
		start := time.Now()
		if err := h.rt.StopContainer(h.ctx(), c.ID, grace); err != nil {
			t.Fatalf("StopContainer(stubborn): %v", err)
		}
		if elapsed := time.Since(start); elapsed < grace || elapsed > grace+killWait {
			t.Errorf("StopContainer(stubborn) took %s, want between the grace %s and %s", elapsed, grace, grace+killWait)
		}
		st, err := h.taskStatus(c.ID)
		if err != nil || st.Status != client.Stopped || st.ExitStatus != 128+uint32(syscall.SIGKILL) {
			t.Errorf("task after StopContainer(stubborn) = %+v, %v, want stopped by SIGKILL (status 137)", st, err)
		}
		waitFor(t, 10*time.Second, "the process to go", func() (bool, string) {
			return gone(c.Pid), fmt.Sprintf("process %d still there", c.Pid)
		})
	})

	t.Run("already exited", func(t *testing.T) {
		h := *h
		h.t = t
		c := h.start(p, sb, "done", 0)
		waitFor(t, 10*time.Second, "the container to exit", func() (bool, string) {
			st, err := h.taskStatus(c.ID)
			return err == nil && st.Status == client.Stopped, fmt.Sprintf("task %+v, %v", st, err)
		})
		start := time.Now()
		if err := h.rt.StopContainer(h.ctx(), c.ID, time.Minute); err != nil {
			t.Errorf("StopContainer(exited) = %v, want nil", err)
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("StopContainer(exited) took %s, want it at once", elapsed)
		}
	})

	t.Run("task already deleted", func(t *testing.T) {
		h := *h
		h.t = t
		c := h.start(p, sb, "done", 1)
		ctr, err := h.client.LoadContainer(h.nsCtx(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the container to exit", func() (bool, string) {
			st, err := h.taskStatus(c.ID)
			return err == nil && st.Status == client.Stopped, fmt.Sprintf("task %+v, %v", st, err)
		})
		if err := h.rt.deleteTask(h.nsCtx(), ctr); err != nil {
			t.Fatalf("deleting the task: %v", err)
		}
		if err := h.rt.StopContainer(h.ctx(), c.ID, time.Minute); err != nil {
			t.Errorf("StopContainer(no task) = %v, want nil", err)
		}
	})

	t.Run("missing", func(t *testing.T) {
		if err := h.rt.StopContainer(h.ctx(), "0123456789abcdef", time.Minute); err != nil {
			t.Errorf("StopContainer(missing) = %v, want nil", err)
		}
	})

	t.Run("sandbox", func(t *testing.T) {
		const grace = 10 * time.Second
		start := time.Now()
		if err := h.rt.StopContainer(h.ctx(), sb.ID, grace); err != nil {
			t.Fatalf("StopContainer(sandbox): %v", err)
		}
		if elapsed := time.Since(start); elapsed >= grace/2 {
			t.Errorf("StopContainer(sandbox) took %s, want well under the grace of %s", elapsed, grace)
		}
		waitFor(t, 10*time.Second, "the pause process to go", func() (bool, string) {
			return gone(sb.Pid), fmt.Sprintf("process %d still there", sb.Pid)
		})
	})
}

func TestRemoveContainer(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/remove.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: remove
spec:
  containers:
  - name: run
    image: localhost/busybox:test
    command: [sleep, "3600"]
  - name: exit
    image: localhost/busybox:test
    command: [/bin/sh, -c, "exit 1"]
`)
	sb := h.sandbox(p)
	tests := []struct {
		name      string
		container string
		exited    bool
	}{
		{"running", "run", false},
		{"exited", "exit", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := *h
			h.t = t
			c := h.start(p, sb, tt.container, 0)
			if tt.exited {
				waitFor(t, 10*time.Second, "the container to exit", func() (bool, string) {
					st, err := h.taskStatus(c.ID)
					return err == nil && st.Status == client.Stopped, fmt.Sprintf("task %+v, %v", st, err)
				})
			}
			snaps := h.client.SnapshotService(h.env.Snapshotter)
			if _, err := snaps.Stat(h.nsCtx(), c.ID); err != nil {
				t.Fatalf("the container's snapshot before RemoveContainer: %v", err)
			}
			for i := 0; i < 2; i++ {
				if err := h.rt.RemoveContainer(h.ctx(), c.ID); err != nil {
					t.Fatalf("RemoveContainer(%s) #%d: %v", tt.container, i+1, err)
				}
			}
			if _, err := h.client.LoadContainer(h.nsCtx(), c.ID); !errdefs.IsNotFound(err) {
				t.Errorf("loading the container after RemoveContainer: %v, want not found", err)
			}
			if _, err := snaps.Stat(h.nsCtx(), c.ID); !errdefs.IsNotFound(err) {
				t.Errorf("the container's snapshot after RemoveContainer: %v, want not found", err)
			}
			tasks, err := h.client.TaskService().List(h.nsCtx(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range tasks.Tasks {
				if task.ID == c.ID {
					t.Errorf("task %s still listed after RemoveContainer", c.ID)
				}
			}
			waitFor(t, 10*time.Second, "the process to go", func() (bool, string) {
				return gone(c.Pid), fmt.Sprintf("process %d still there", c.Pid)
			})
			recs, err := h.rt.PodContainers(h.ctx(), p.Key())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.ID == c.ID {
					t.Errorf("PodContainers lists %s after RemoveContainer: %+v", c.ID, r)
				}
			}
		})
	}
	if err := h.rt.RemoveContainer(h.ctx(), "0123456789abcdef"); err != nil {
		t.Errorf("RemoveContainer(missing) = %v, want nil", err)
	}
	if recs, err := h.rt.PodContainers(h.ctx(), p.Key()); err != nil || len(recs) != 1 || recs[0].Kind != pod.KindSandbox {
		t.Errorf("PodContainers after removing the containers = %+v, %v, want only the sandbox", recs, err)
	}
}

// TestStopSandboxJustStarted stops sandboxes as soon as StartSandbox has
// returned, as the reconciler does when a pod's containers are all done
// by then: the pause process is to take the SIGTERM and exit 0, not die
// of it by the Go runtime's default (exit 2) nor lose it and run on until
// SIGKILL (exit 137). Each start is a chance to catch the pause before it
// handles SIGTERM.
func TestStopSandboxJustStarted(t *testing.T) {
	h := newHarness(t)
	for i := range 20 {
		p := h.decode(fmt.Sprintf("/m/quick%d.yaml", i), fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: quick%d
spec:
  shareProcessNamespace: true
  containers:
  - name: c
    image: localhost/busybox:test
`, i))
		sb := h.sandbox(p)
		if err := h.rt.StopContainer(h.ctx(), sb.ID, time.Minute); err != nil {
			t.Fatalf("StopContainer(sandbox %d): %v", i, err)
		}
		st, err := h.taskStatus(sb.ID)
		if err != nil || st.Status != client.Stopped || st.ExitStatus != 0 {
			t.Errorf("sandbox %d stopped right after its start = %+v, %v; want exited 0 on SIGTERM", i, st, err)
		}
	}
}

// TestStopContainerShimGone stops and removes containers whose stopped
// task is being deleted meanwhile, as the exit handler does while a pod
// is stopped. When the task is its shim's last, the shim exits with it,
// and until containerd has finished with the task it answers calls on it
// with the shim's closed connection: the task stopped and is going, so
// the stop or the removal is done, not an error; so is the exit
// handler's deletion, when the removal wins. Each iteration is a chance
// to call in that window (about one in four hit it before these calls
// allowed for it).
func TestStopContainerShimGone(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/racing.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: racing
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, "exit 0"]
`)
	sb := h.sandbox(p)
	for i := range 20 {
		c := h.start(p, sb, "c", i)
		ctr, err := h.client.LoadContainer(h.nsCtx(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		h.waitStopped(ctr)
		task, err := ctr.Task(h.nsCtx(), nil)
		if err != nil {
			t.Fatal(err)
		}
		deleted := make(chan error, 1)
		go func() { deleted <- h.rt.deleteLoadedTask(h.nsCtx(), ctr, task) }() // as the exit handler does
		if i%2 == 0 {
			if err := h.rt.StopContainer(h.ctx(), c.ID, time.Minute); err != nil {
				t.Errorf("StopContainer while its task is deleted = %v, want nil", err)
			}
		} else if err := h.rt.RemoveContainer(h.ctx(), c.ID); err != nil {
			t.Errorf("RemoveContainer while its task is deleted = %v, want nil", err)
		}
		if err := <-deleted; err != nil {
			t.Errorf("deleting the task as the exit handler does: %v", err)
		}
	}
}
