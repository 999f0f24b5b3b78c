package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// The tests here that run the built binary (of the configuration file,
// diff, completion and wait) use internal/testutil/harness, which the
// suites under test/ share, through the names below: the names it had
// when it was part of this package's tests.

const testNode = harness.TestNode

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer = harness.SyncBuffer

// env is harness.Env with the fields these tests read.
type env struct {
	*harness.Env
	t                         *testing.T
	ctrd                      *ctrdtest.Env
	dir, manifest, root, logs string
	net                       testNet
}

// testNet is harness.TestNet with the method these tests call.
type testNet struct{ *harness.TestNet }

func (n testNet) flags() []string { return n.Flags() }

func newEnv(t *testing.T) *env {
	t.Helper()
	h := harness.NewEnv(t)
	return &env{Env: h, t: t, ctrd: h.Ctrd, dir: h.Dir, manifest: h.Manifest, root: h.Root, logs: h.Logs, net: testNet{h.Net}}
}

func (e *env) write(name, content string) {
	e.t.Helper()
	e.Write(name, content)
}

func (e *env) remove(name string) {
	e.t.Helper()
	e.Remove(name)
}

func (e *env) start(extra ...string) *daemon {
	e.t.Helper()
	return newDaemon(e.Start(extra...))
}

func (e *env) newDaemon() *daemon { return newDaemon(e.NewDaemon()) }

func (e *env) launch(d *daemon, args []string, env ...string) {
	e.t.Helper()
	e.Launch(d.Daemon, args, env...)
}

// daemon is harness.Daemon with the fields these tests read.
type daemon struct {
	*harness.Daemon
	socket string
	out    *syncBuffer
}

func newDaemon(d *harness.Daemon) *daemon { return &daemon{Daemon: d, socket: d.Socket, out: d.Out} }

func (d *daemon) waitPod(name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	d.T.Helper()
	return d.WaitPod(name, timeout, what, cond)
}

func (d *daemon) pod(name string) (*v1.Pod, error) { return d.Pod(name) }

func (d *daemon) cli(args ...string) (string, error) { return d.CLI(args...) }

func binary(t testing.TB) string {
	t.Helper()
	return harness.Binary(t)
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	harness.WaitFor(t, timeout, what, cond)
}

func running(p *v1.Pod) bool { return harness.Running(p) }

func freePort(t testing.TB) int {
	t.Helper()
	return harness.FreePort(t)
}

func sleeperPod(name, arg string, hostNetwork bool) string {
	return harness.SleeperPod(name, arg, hostNetwork)
}

func exitCodeOf(err error) int { return harness.ExitCodeOf(err) }
