package systemd

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/testutil/ctrdtest"
	"github.com/staticlet/staticlet/internal/testutil/debroot"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// A machine is a Debian system booted with a real systemd as PID 1 of a
// systemd-nspawn container, for tests of what staticlet does under
// systemd: its unit, its package, sd_notify, the watchdog, the journal.
// The container shares the host's network; the directories a test binds
// into it have the same path inside and out, so staticlet inside talks to
// the test's containerd on the host.

// rootfsPackages are installed into the root beyond debootstrap's
// minbase: enough for systemd to boot as PID 1 and for systemctl.
var rootfsPackages = []string{"systemd", "systemd-sysv", "dbus"}

// requireMachineTools fails (with CI=true) or skips the test without
// root, debootstrap, systemd-nspawn, nsenter or tar.
func requireMachineTools(t *testing.T) {
	t.Helper()
	debroot.Require(t, "debootstrap systemd-container", "systemd-nspawn", "nsenter", "tar")
}

// debianRoot extracts a fresh Debian root (the host's release, minbase
// plus rootfsPackages) into a temp dir removed when the test ends. The
// first run debootstraps it from the host's own apt mirror and caches it
// as a tarball in debroot's cache.
func debianRoot(t *testing.T) string {
	t.Helper()
	suite, err := debroot.HostCodename()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	name := fmt.Sprintf("debian-%s-minbase-%s", suite, debroot.Hash(suite, strings.Join(rootfsPackages, ",")))
	entry, err := debroot.Cached(ctx, name, func(ctx context.Context, dir string) error {
		t.Logf("debootstrapping %s into the cache %s (once)", suite, debroot.CacheDir)
		return buildRootTarball(ctx, suite, dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(entry, "root.tar")

	root, err := os.MkdirTemp("", "sl-machine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Nothing should be mounted in it on the host: nspawn's mounts
		// live in its own namespace. Unmount first all the same, so that
		// RemoveAll never walks into a bound directory.
		if err := ctrdtest.UnmountUnder(root); err != nil {
			t.Errorf("unmounting under %s: %v", root, err)
			return
		}
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("removing the machine's root: %v", err)
		}
	})
	if out, err := exec.Command("tar", "-C", root, "--numeric-owner", "-xpf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("extracting %s: %v\n%s", tarball, err, out)
	}
	return root
}

// buildRootTarball debootstraps suite and archives it as dir/root.tar.
func buildRootTarball(ctx context.Context, suite, dir string) error {
	root := filepath.Join(dir, "root")
	if err := debroot.Debootstrap(ctx, root, suite, rootfsPackages); err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if out, err := exec.CommandContext(ctx, "tar", "-C", root, "--numeric-owner", "-cpf", filepath.Join(dir, "root.tar"), ".").CombinedOutput(); err != nil {
		return fmt.Errorf("archiving the debootstrapped root: %w\n%s", err, out)
	}
	return nil
}

// nspawnRuntimeDir makes /run/systemd/nspawn a tmpfs, which nspawn needs
// for its mount propagation, unless it is one; it is unmounted when the
// test ends if this mounted it.
func nspawnRuntimeDir(t *testing.T) {
	t.Helper()
	const dir = "/run/systemd/nspawn"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		return
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		// Another test's container may still use it: then it stays.
		if err := unix.Unmount(dir, 0); err != nil && !errors.Is(err, unix.EBUSY) {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
}

// machineOptions configure bootMachine.
type machineOptions struct {
	// Binds are host directories bound into the machine at the same path.
	Binds []string
}

// machine is a booted systemd-nspawn container.
type machine struct {
	t    *testing.T
	root string
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// leader is the container's PID 1 (systemd) as the host sees it.
	leader int
	// console is the file the container's console (boot log) goes to.
	console string
}

// bootMachine boots root with systemd as PID 1 and waits until systemd has
// reached its default target. The container is killed, if it still runs,
// when the test ends.
func bootMachine(t *testing.T, root string, opts machineOptions) *machine {
	t.Helper()
	nspawnRuntimeDir(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	m := &machine{t: t, root: root, name: "stl" + hex.EncodeToString(b[:]), done: make(chan struct{})}
	m.console = filepath.Join(t.TempDir(), "console.log")
	console, err := os.Create(m.console)
	if err != nil {
		t.Fatal(err)
	}
	defer console.Close()
	args := []string{"--register=no", "--keep-unit", "--quiet", "-b", "-D", root, "-M", m.name,
		// A pseudo TTY whose output (the boot log) nspawn copies to its
		// stdout; nothing reads the test's stdin.
		"--console=read-only",
		// As a node agent on a host has: staticlet makes links and
		// nftables tables in the host's network namespace.
		"--capability=all"}
	for _, d := range opts.Binds {
		args = append(args, "--bind="+d)
	}
	start := time.Now()
	m.cmd = exec.Command("systemd-nspawn", args...)
	m.cmd.Stdout, m.cmd.Stderr = console, console
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting systemd-nspawn: %v", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(m.kill)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(m.console)
			t.Logf("machine console:\n%s", debroot.LastLines(string(b), 60))
		}
	})
	harness.WaitFor(t, 60*time.Second, "the container's systemd", func() (bool, string) {
		select {
		case <-m.done:
			b, _ := os.ReadFile(m.console)
			t.Fatalf("systemd-nspawn exited: %v\n%s", m.cmd.ProcessState, debroot.LastLines(string(b), 30))
		default:
		}
		m.leader = nsLeader(m.cmd.Process.Pid)
		return m.leader > 0, "no child in a PID namespace"
	})
	m.waitRunning(120 * time.Second)
	t.Logf("machine %s booted in %s", m.name, time.Since(start).Round(100*time.Millisecond))
	return m
}

// nsLeader returns the child of nspawn that is PID 1 of its own PID
// namespace, or 0.
func nsLeader(nspawn int) int {
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var ppid int
		var nspid []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
				ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if v, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
				nspid = strings.Fields(v)
			}
		}
		f.Close()
		if ppid == nspawn && len(nspid) > 1 && nspid[len(nspid)-1] == "1" {
			return pid
		}
	}
	return 0
}

// Exec runs a command inside the machine (in its mount, UTS, IPC and PID
// namespaces) and returns its combined output.
func (m *machine) Exec(ctx context.Context, args ...string) (string, error) {
	nsargs := []string{"-t", strconv.Itoa(m.leader), "-m", "-u", "-i", "-p", "-r", "-w",
		"env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}
	out, err := exec.CommandContext(ctx, "nsenter", append(nsargs, args...)...).CombinedOutput()
	return string(out), err
}

// run is Exec with a bounded wait, for tests.
func (m *machine) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Exec(ctx, args...)
}

// waitRunning waits until systemd has booted: is-system-running says
// running, or degraded (a unit failed, which the test may look into).
func (m *machine) waitRunning(timeout time.Duration) {
	m.t.Helper()
	harness.WaitFor(m.t, timeout, "systemctl is-system-running: running", func() (bool, string) {
		out, _ := m.run("systemctl", "is-system-running")
		state := strings.TrimSpace(out)
		return state == "running" || state == "degraded", state
	})
}

// WriteFile writes a file into the machine's root, making its directory.
func (m *machine) WriteFile(path string, data []byte) {
	m.t.Helper()
	writeRootFile(m.t, m.root, path, data)
}

// writeRootFile writes path, absolute inside root, into root.
func writeRootFile(t *testing.T, root, path string, data []byte) {
	t.Helper()
	full := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Poweroff shuts the machine down through systemd and waits for nspawn to
// exit.
func (m *machine) Poweroff(timeout time.Duration) {
	m.t.Helper()
	if out, err := m.run("systemctl", "poweroff", "--no-block"); err != nil {
		m.t.Errorf("systemctl poweroff: %v\n%s", err, out)
	}
	select {
	case <-m.done:
	case <-time.After(timeout):
		m.t.Errorf("the machine did not power off within %s", timeout)
		m.kill()
	}
}

// kill ends the container at once: SIGKILL to its PID 1 ends its whole
// PID namespace, then nspawn.
func (m *machine) kill() {
	select {
	case <-m.done:
		return
	default:
	}
	if m.leader > 0 {
		_ = syscall.Kill(m.leader, syscall.SIGKILL)
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// installDeb installs the .deb at path into root with dpkg, run in root
// by systemd-nspawn without booting it, and fails the test unless dpkg
// succeeds.
func installDeb(t *testing.T, root, deb string) string {
	t.Helper()
	nspawnRuntimeDir(t)
	data, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	// Not in /tmp, which nspawn mounts a tmpfs on.
	const inside = "/root/staticlet.deb"
	writeRootFile(t, root, inside, data)
	defer os.Remove(filepath.Join(root, inside))
	out, err := exec.Command("systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "-D", root,
		"--setenv=DPKG_COLORS=never", "dpkg", "-i", inside).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg -i staticlet's .deb: %v\n%s", err, out)
	}
	return string(out)
}
