package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// Termination messages, as the kubelet does them: each instance of a
// container gets an empty host file bound at its terminationMessagePath;
// once it has exited, what it wrote there is its message or, with
// FallbackToLogsOnError, when it failed and wrote nothing, the tail of its
// log. The file and, for the fallback, the log's path are in the
// container's labels, so a restarted staticlet finds them; the file stays
// until the container is removed.
const (
	// LabelTerminationFile is the host file bound at the container's
	// terminationMessagePath; absent when there is none.
	LabelTerminationFile = labelPrefix + "termination.file"
	// LabelTerminationLog is the container's log file, present when its
	// terminationMessagePolicy is FallbackToLogsOnError.
	LabelTerminationLog = labelPrefix + "termination.log"
)

// The kubelet's limits (kubecontainer.MaxContainerTerminationMessage*).
const (
	// maxMessageBytes is the most of a termination file read: its end.
	maxMessageBytes = 4 * 1024
	// maxLogMessageLines and maxLogMessageBytes bound a message taken from
	// the log: its last lines, and the end of those.
	maxLogMessageLines = 80
	maxLogMessageBytes = 2 * 1024
)

// messageSettle is how long after its exit a container whose task has not
// been deleted yet may still have output on its way to the log (the log
// driver ends when the task is deleted). A message read before then is not
// kept.
const messageSettle = 10 * time.Second

// terminationFile is where the message of container c's instance id is kept
// on the host, the kubelet's layout: <pod dir>/containers/<name>/<id>.
// Empty when c has no terminationMessagePath, or mounts a volume there.
func (r *Runtime) terminationFile(sandboxUID string, c *v1.Container, id string) string {
	dst := c.TerminationMessagePath
	if dst == "" || slices.ContainsFunc(c.VolumeMounts, func(vm v1.VolumeMount) bool { return spec.MountPath(vm) == dst }) {
		return ""
	}
	return filepath.Join(r.PodDir(sandboxUID), "containers", c.Name, id)
}

// prepareTermination creates the empty termination file of container c's
// instance id, world-writable so that any user the container runs as can
// write it, and returns its path; empty when c has none.
func (r *Runtime) prepareTermination(sandboxUID string, c *v1.Container, id string) (string, error) {
	path := r.terminationFile(sandboxUID, c, id)
	if path == "" {
		return "", nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("creating the termination message file of container %q: %w", c.Name, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o666)
	if err == nil {
		err = f.Close()
	}
	// Chmod, as the umask narrowed the mode the file was created with.
	if err == nil {
		err = os.Chmod(path, 0o666)
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("creating the termination message file of container %q: %w", c.Name, err)
	}
	return path, nil
}

// terminationLabels records in labels where container c's message will be
// found: its termination file, and its log when its policy falls back to
// it.
func terminationLabels(labels map[string]string, c *v1.Container, file, logPath string) {
	if file != "" {
		labels[LabelTerminationFile] = file
	}
	if c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
		labels[LabelTerminationLog] = logPath
	}
}

// removeTerminationFile removes a termination file, if path is one staticlet
// made (under its pods' directories).
func (r *Runtime) removeTerminationFile(path string) error {
	if path == "" || !strings.HasPrefix(path, filepath.Join(r.cfg.RootDir, "pods")+string(filepath.Separator)) {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing termination message file %s: %w", path, err)
	}
	return nil
}

// forgetTermination drops what staticlet keeps of the message of container
// id, once the container is removed.
func (r *Runtime) forgetTermination(id string, labels map[string]string) error {
	r.messages.forget(id)
	return r.removeTerminationFile(labels[LabelTerminationFile])
}

// terminationMessage returns the message of the exited container rec, whose
// labels are given; live says its task is still there. Messages are cached
// by container ID, once the container's output cannot change any more.
func (r *Runtime) terminationMessage(ctx context.Context, rec pod.Record, labels map[string]string, live bool) string {
	if rec.State != pod.TaskExited || rec.Kind == pod.KindSandbox {
		return ""
	}
	file := labels[LabelTerminationFile]
	logPath, fallback := labels[LabelTerminationLog]
	if file == "" && !fallback {
		return ""
	}
	if msg, ok := r.messages.get(rec.ID); ok {
		return msg
	}
	msg, fromLogs := readTerminationFile(file, fallback && rec.ExitCode != 0)
	if fromLogs {
		msg = readLogTail(ctx, logPath)
	}
	if !live || time.Since(rec.FinishedAt) > messageSettle {
		r.messages.put(rec.ID, msg)
	}
	return msg
}

// readTerminationFile reads the end of a termination file, and tells
// whether the message is to be taken from the log instead, by the
// kubelet's rule: with fallback, when the file is missing or empty. An
// error reading the file is the message.
func readTerminationFile(path string, fallback bool) (string, bool) {
	if path == "" {
		return "", fallback
	}
	data, err := readEnd(path, maxMessageBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fallback
	}
	if err != nil {
		return fmt.Sprintf("Error on reading termination log %s: %v", path, err), false
	}
	return string(data), fallback && len(data) == 0
}

// readEnd reads the last max bytes of the file at path.
func readEnd(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if size := fi.Size(); size > max {
		if _, err := f.Seek(-max, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// readLogTail returns the last lines of a container's CRI log as the
// kubelet's fallback message has them: at most maxLogMessageLines lines,
// prefixes stripped and partial records joined, and of those the last
// maxLogMessageBytes. An error reading the log is the message.
func readLogTail(ctx context.Context, path string) string {
	rc, err := logs.Open(ctx, logs.Query{Path: path, TailLines: maxLogMessageLines})
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	defer rc.Close()
	w := &lastBytes{max: maxLogMessageBytes}
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(w.b)
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	b   []byte
	max int
}

func (l *lastBytes) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= l.max {
		l.b = append(l.b[:0], p[len(p)-l.max:]...)
		return n, nil
	}
	l.b = append(l.b, p...)
	if over := len(l.b) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...) // append copies like copy: overlap is safe
	}
	return n, nil
}

// idCache holds what is known of containers by container ID, for those
// listed on every sync: the termination messages of exited containers (a
// message from a log costs a read of the log), when running ones started.
// Its zero value is ready to use.
type idCache[V any] struct {
	mu sync.Mutex // guards m
	m  map[string]V
}

func (c *idCache[V]) get(id string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *idCache[V]) put(id string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]V{}
	}
	c.m[id] = v
}

func (c *idCache[V]) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// retain drops the entries of containers not in keep, the IDs of every
// container there is: one removed behind staticlet's back.
func (c *idCache[V]) retain(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.m {
		if !keep[id] {
			delete(c.m, id)
		}
	}
}
