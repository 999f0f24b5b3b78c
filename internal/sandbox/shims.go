package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/opencontainers/image-spec/identity"

	"github.com/staticlet/staticlet/internal/pod"
)

// Shim groups: which runc shim process serves which pod. containerd's runc
// v2 shim serves every task whose spec carries the same shimGroup
// annotation; the group is only the key of the shim's socket. A critical
// pod (pod.Critical) has a shim of its own, keyed by its sandbox's ID;
// every other pod shares a shim of its QoS class and containerd release,
// at most shimGroupPods pods each, spread over Config.ShimSpread shims
// (shimGroupOf); a pod's containers join their sandbox's group
// (sandboxShimGroup), so a pod is never split over two shims. A task that
// joins a shim in the instant it shuts down is created again (newTask).
// Why, what sharing risks, and the measurements: docs/design/shims.md.

// shimGroup is the spec annotation that names the runc shim group a task
// joins.
const shimGroup = "io.containerd.runc.v2.group"

// shimGroupOf is the shim group of the sandbox id of p, whose ordinary pods
// share a shim per QoS class and containerd release.
func shimGroupOf(p *pod.Pod, id, release string) string {
	if pod.Critical(&p.Spec) {
		return id
	}
	return "staticlet-" + strings.ToLower(string(pod.QOSClass(&p.Spec))) + "-" + release
}

// releaseKey names containerd's release v in a shim group: its version and
// revision, with any character but letters, digits and ".~+-" made '_' (the
// runc shim joins the group into a path before hashing it).
func releaseKey(v client.Version) string {
	return strings.Map(func(c rune) rune {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.ContainsRune(".~+-", c):
			return c
		}
		return '_'
	}, v.Version+"-"+v.Revision)
}

// shimGroupPods is the most pods a shared shim serves.
const shimGroupPods = 16

// podShimGroup is the shim group of p's new sandbox id: for an ordinary
// pod, the first of its class's shared groups (the class's key, then that
// key with -1, -2...) that has fewer than shimGroupPods sandboxes, as the
// sandboxes' LabelShimGroup tell, with the sandboxes being made meanwhile
// (shimGroups). The caller calls done once the sandbox is made, or failed.
func (r *Runtime) podShimGroup(ctx context.Context, p *pod.Pod, id string) (group string, done func(made bool), err error) {
	if pod.Critical(&p.Spec) {
		return id, func(bool) {}, nil
	}
	ctx, cancel := r.call(ctx)
	defer cancel()
	release, err := r.release(ctx)
	if err != nil {
		return "", nil, err
	}
	base := shimGroupOf(p, id, release)
	g := &r.groups
	g.mu.Lock()
	defer g.mu.Unlock()
	cs, err := r.client.ContainerService().List(ctx, fmt.Sprintf("labels.%q", LabelShimGroup))
	if err != nil {
		return "", nil, fmt.Errorf("counting the pods of shim group %s: %w", base, err)
	}
	count := map[string]int{}
	listed := make(map[string]bool, len(cs))
	for _, c := range cs {
		count[c.Labels[LabelShimGroup]]++
		listed[c.ID] = true
	}
	for sid, pg := range g.making {
		switch {
		case pg.made:
			// Made before this listing: in it, or removed since.
			delete(g.making, sid)
		case !listed[sid]:
			count[pg.group]++
		}
	}
	group = pickGroup(base, count, shimGroupPods, r.cfg.ShimSpread)
	if g.making == nil {
		g.making = map[string]*pendingSandbox{}
	}
	pg := &pendingSandbox{group: group}
	g.making[id] = pg
	return group, func(made bool) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if made {
			pg.made = true // until a listing shows it
		} else {
			delete(g.making, id)
		}
	}, nil
}

// releaseTTL is how long containerd's release is taken as known: it
// changes only with a restart of containerd, after which new pods go to
// shims of the new release within that time.
const releaseTTL = 5 * time.Second

// release is the key of containerd's release (releaseKey), asked at most
// every releaseTTL.
func (r *Runtime) release(ctx context.Context) (string, error) {
	g := &r.groups
	g.mu.Lock()
	if g.release != "" && time.Since(g.releaseAt) < releaseTTL {
		defer g.mu.Unlock()
		return g.release, nil
	}
	g.mu.Unlock()
	v, err := r.client.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("asking containerd for its version: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release, g.releaseAt = releaseKey(v), time.Now()
	return g.release, nil
}

// shimGroups counts the sandboxes being made in each shim group, which no
// listing shows yet, so that sandboxes are made at once, each in a group
// with room. A sandbox counts from its group's choice until a listing
// shows it; once its creation is over, the next choice's listing, made
// after that under mu, counts it, and it is forgotten.
type shimGroups struct {
	mu     sync.Mutex
	making map[string]*pendingSandbox // by sandbox ID
	// release is containerd's release key, asked at releaseAt.
	release   string
	releaseAt time.Time
}

// pendingSandbox is a sandbox whose shim group was chosen.
type pendingSandbox struct {
	group string
	made  bool // its container exists
}

// pickGroup is the group of base, base-1, base-2... that a new member
// joins, count telling each one's members: the one with fewest among the
// first spread, or among as many more as it takes to find one with fewer
// than limit; the first of those tied.
func pickGroup(base string, count map[string]int, limit, spread int) string {
	name := func(n int) string {
		if n == 0 {
			return base
		}
		return fmt.Sprintf("%s-%d", base, n)
	}
	best := ""
	for n := 0; n < max(spread, 1) || count[best] >= limit; n++ {
		if g := name(n); best == "" || count[g] < count[best] {
			best = g
		}
	}
	return best
}

// sandboxShimGroup is the shim group of the sandbox id, which its pod's
// containers join: the annotation of its spec, else (a sandbox made before
// staticlet grouped shims) its ID, the key of a shim of its own. It is
// read once, if this staticlet did not make the sandbox.
func (r *Runtime) sandboxShimGroup(ctx context.Context, id string) (string, error) {
	if g, ok := r.sandboxGroups.get(id); ok {
		return g, nil
	}
	g, err := r.readShimGroup(ctx, id)
	if err == nil {
		r.sandboxGroups.put(id, g)
	}
	return g, err
}

// readShimGroup reads the shim group of sandbox id from its spec.
func (r *Runtime) readShimGroup(ctx context.Context, id string) (string, error) {
	ctx, cancel := r.call(ctx)
	defer cancel()
	c, err := r.client.ContainerService().Get(ctx, id)
	if err != nil {
		return "", fmt.Errorf("loading sandbox %s: %w", id, err)
	}
	var s struct {
		Annotations map[string]string `json:"annotations"`
	}
	if c.Spec != nil {
		if err := json.Unmarshal(c.Spec.GetValue(), &s); err != nil {
			return "", fmt.Errorf("reading the spec of sandbox %s: %w", id, err)
		}
	}
	if g := s.Annotations[shimGroup]; g != "" {
		return g, nil
	}
	return id, nil
}

// newTaskPatience bounds the retries of a task's creation.
const newTaskPatience = 3 * time.Second

// newTask creates the task of container c with ioc, and tries again, for
// up to newTaskPatience, while the failure is one that retry accepts: the
// shim it joined shutting down (shimGone), say.
func (r *Runtime) newTask(ctx context.Context, c client.Container, ioc cio.Creator, retry func(error) bool) (client.Task, error) {
	var t client.Task
	err := r.retryTask(ctx, c.ID(), retry, func() (err error) {
		t, err = c.NewTask(ctx, ioc)
		return err
	})
	return t, err
}

// retryTask calls create, which creates the task of container id, until it
// succeeds or fails in a way retry does not accept, for up to
// newTaskPatience.
func (r *Runtime) retryTask(ctx context.Context, id string, retry func(error) bool, create func() error) error {
	deadline := time.Now().Add(newTaskPatience)
	for attempt := 1; ; attempt++ {
		err := create()
		if err == nil || !retry(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		r.cfg.Logger.Debug("creating a task; trying again", "container", id, "err", err)
		select {
		case <-time.After(min(time.Duration(attempt)*25*time.Millisecond, 250*time.Millisecond)):
		case <-ctx.Done():
		}
	}
}

// withNewSnapshot is the client's WithNewSnapshot for an image staticlet
// runs, keeping the mounts the snapshotter's Prepare answers in rootfs,
// for createTask. The client would ask containerd which snapshotter
// features it has (for ID-mapped user namespaces, which no static pod
// uses) and, creating the task, for the mounts again.
func (r *Runtime) withNewSnapshot(key string, img client.Image, rootfs *[]mount.Mount) client.NewContainerOpts {
	return func(ctx context.Context, _ *client.Client, c *containers.Container) error {
		diffIDs, err := img.RootFS(ctx) // the image's, read once
		if err != nil {
			return fmt.Errorf("reading the layers of image %s: %w", img.Name(), err)
		}
		mounts, err := r.client.SnapshotService(c.Snapshotter).Prepare(ctx, key, identity.ChainID(diffIDs).String())
		if err != nil {
			return err
		}
		*rootfs = mounts
		c.SnapshotKey = key
		c.Image = img.Name()
		return nil
	}
}

// createdTask is a task createTask made, to be started.
type createdTask struct {
	tasks tasks.TasksClient
	id    string
	io    cio.IO
}

// createTask creates the task of container id, just created with rootfs
// (withNewSnapshot), with output ioc, through containerd's task service:
// the client's NewTask would read the container's record three times
// and ask the snapshotter for rootfs, which is at hand. A failure for the
// shim it joined going away is tried again (shimGone).
func (r *Runtime) createTask(ctx context.Context, id string, rootfs []mount.Mount, ioc cio.Creator) (*createdTask, error) {
	t := &createdTask{tasks: r.client.TaskService(), id: id}
	err := r.retryTask(ctx, id, shimGone, func() error {
		i, err := ioc(id)
		if err != nil {
			return err
		}
		cfg := i.Config()
		_, err = t.tasks.Create(ctx, &tasks.CreateTaskRequest{
			ContainerID: id,
			Rootfs:      mount.ToProto(rootfs),
			Stdin:       cfg.Stdin,
			Stdout:      cfg.Stdout,
			Stderr:      cfg.Stderr,
			Terminal:    cfg.Terminal,
		})
		if err != nil {
			i.Cancel()
			i.Close()
			return errgrpc.ToNative(err)
		}
		t.io = i
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// start starts the task and returns its process's pid.
func (t *createdTask) start(ctx context.Context) (uint32, error) {
	resp, err := t.tasks.Start(ctx, &tasks.StartRequest{ContainerID: t.id})
	if err != nil {
		t.io.Cancel()
		t.io.Close()
		return 0, errgrpc.ToNative(err)
	}
	return resp.Pid, nil
}

// shimGone tells whether err, from a call on a task, says that the task's
// shim went away meanwhile (its last other task deleted, or this one; see
// getTask), which passes. Creating a task, anything else, a spec runc
// refuses say, would fail again. A bundle that exists already ("file
// exists") is not retried: it is another creation of the same task under
// way, one a staticlet killed in the middle left to containerd, and the
// container is dealt with as a half-started one.
func shimGone(err error) bool {
	msg := err.Error()
	for _, s := range []string{"ttrpc: closed", "connection refused", "connection reset"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// shimGonePatience bounds getTask's wait for containerd to finish with a
// task whose shim went away.
const shimGonePatience = 5 * time.Second

// getTask asks containerd for container id's task and returns its process
// as containerd tells it, or the error it answers: NotFound when there is
// none. While the answer is only that the task's shim went away
// (shimGone), it asks again, for up to shimGonePatience. That happens
// when a shim shared by a pod's tasks exits as its last task is deleted
// (by the exit handler, say), or dies: containerd lists the task until it
// has finished with the shim, and answers for it with the shim's error.
func (r *Runtime) getTask(ctx context.Context, id string) (*task.Process, error) {
	ts := r.client.TaskService()
	deadline := time.Now().Add(shimGonePatience)
	for attempt := 1; ; attempt++ {
		resp, err := ts.Get(ctx, &tasks.GetRequest{ContainerID: id})
		if err = errgrpc.ToNative(err); err == nil {
			return resp.Process, nil
		}
		if !shimGone(err) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-time.After(min(time.Duration(attempt)*10*time.Millisecond, 100*time.Millisecond)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// loadTask loads container c's task, through its shim going away with it
// (getTask): NotFound once it is gone.
func (r *Runtime) loadTask(ctx context.Context, c client.Container) (client.Task, error) {
	t, err := c.Task(ctx, nil)
	if err == nil || !shimGone(err) {
		return t, err
	}
	if _, err := r.getTask(ctx, c.ID()); err != nil {
		return nil, err
	}
	return c.Task(ctx, nil)
}

// stoppedWithShim tells whether err, from a call on container id's task,
// says only that its shim went away with a task that has stopped or is
// gone (getTask): for a caller stopping the task, the work is done.
func (r *Runtime) stoppedWithShim(ctx context.Context, id string, err error) bool {
	if !shimGone(err) {
		return false
	}
	p, err := r.getTask(ctx, id)
	if errdefs.IsNotFound(err) {
		return true
	}
	return err == nil && p.Status == task.Status_STOPPED
}
