// Package testvm boots a Debian guest under QEMU for tests that need a real
// machine of their own: systemd as PID 1 on the unified cgroup hierarchy
// (cgroup v2) whatever the host runs, its own kernel and containerd. A test
// hands over files and a script; the guest runs them once it is up, and the
// test gets back the exit code, the output and a results directory.
//
// It owns the guest image (a root file system, kernel and initrd built once
// per recipe into debroot's cache, under vm-<hash>), the QEMU process of
// each Run (killed by its PID when the test's timeout passes) and the
// temporary disks and logs of a Run (removed when the test ends). Files go
// in and results come out on a second virtual disk, an ext4 image made with
// mkfs.ext4 -d and read back with debugfs, so the host mounts nothing; the
// root image is opened with snapshot=on, so a guest never changes the cache.
// The guest has no network: only a dummy link with NodeAddress and the
// default route, for what looks for the node's address. It does not decide what runs in the guest:
// the Spec does, and GoTest runs a package's own tests there.
//
// QEMU emulates the CPU (TCG) unless STATICLET_VM_ACCEL=kvm: /dev/kvm may
// exist where KVM does not work, and then the guest hangs rather than
// failing. Run may be called from parallel tests; each boots its own guest.
package testvm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/debroot"
)

// InGuestEnv is set to "1" in the environment of GoTests run in the guest,
// so that a test that boots the guest skips there instead of recursing.
const InGuestEnv = "STATICLET_IN_VM"

// AccelEnv chooses QEMU's accelerator: "tcg" (the default) or "kvm".
const AccelEnv = "STATICLET_VM_ACCEL"

// DefaultTimeout bounds a Run whose Spec has no Timeout.
const DefaultTimeout = 10 * time.Minute

// Names of the data disk's files that Spec.Files may not take.
const (
	runFile     = "run"       // the script the guest runs
	scriptFile  = "script"    // Spec.Script
	resultsDir  = "results"   // $RESULTS, copied back as Result.Dir
	exitFile    = "exit-code" // run's exit code, written by the guest
	journalFile = "journal"   // the guest's journal, written by the guest
)

// Spec says what a Run hands over to the guest and runs there.
type Spec struct {
	// Files are copied onto the data disk, which the guest mounts at
	// GuestDir: name there (a relative path) to path on the host. Modes
	// are kept.
	Files map[string]string
	// Script is a bash script run as root in GuestDir once the guest is
	// up (multi-user.target and containerd.service reached). Its
	// environment has RESULTS, a directory whose content comes back in
	// Result.Dir. Its exit code is Result.ExitCode; it may be empty.
	Script string
	// GoTests run after Script, whatever its exit code. Run fails the test
	// with their failures.
	GoTests []GoTest
	// Timeout bounds the guest from boot to power-off; DefaultTimeout if
	// zero. Building the image the first time is not part of it.
	Timeout time.Duration
}

// Result is what came back from the guest.
type Result struct {
	// ExitCode is Spec.Script's exit code.
	ExitCode int
	// Output is what Script and GoTests wrote to stdout and stderr, as it
	// came over the second serial port, after lines of the guest's own
	// ("vmtest: booted in 21.3s").
	Output string
	// Dir holds what the guest left in RESULTS.
	Dir string
	// Console is the guest's console: the kernel's and systemd's messages.
	Console string
	// Journal is the guest's journal of the boot, as journalctl prints it.
	Journal string
	// GoTests are the results of Spec.GoTests, in order.
	GoTests []GoTestResult
}

// InGuest tells whether this process runs in a testvm guest.
func InGuest() bool { return os.Getenv(InGuestEnv) == "1" }

// Run boots a guest, hands it spec's files, runs spec's script and Go
// tests, and returns the results once the guest has powered off. It fails
// the test if the guest did not get that far or a GoTest failed; a
// non-zero exit of Script is for the caller to judge. It skips (fails with
// CI=true) without root, QEMU, debootstrap or e2fsprogs, and skips inside
// a guest.
func Run(t testing.TB, spec Spec) Result {
	t.Helper()
	if InGuest() {
		t.Skip("testvm: already inside a test VM")
	}
	debroot.Require(t, "--no-install-recommends qemu-system-x86 debootstrap e2fsprogs", "qemu-system-x86_64", "mkfs.ext4", "debugfs")
	accel, err := accelArgs(os.Getenv(AccelEnv))
	if err != nil {
		t.Fatalf("testvm: %v", err)
	}
	img := cachedImage(t)
	work := t.TempDir()
	disk := filepath.Join(work, "data.img")
	if err := prepareDisk(disk, spec, t.TempDir()); err != nil {
		t.Fatalf("testvm: %v", err)
	}
	timeout := spec.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g := guest{img: img, disk: disk, console: filepath.Join(work, "console.log"), output: filepath.Join(work, "output.log"), accel: accel}
	res := Result{Dir: filepath.Join(work, resultsDir)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testvm: guest console (last lines):\n%s", debroot.LastLines(res.Console, 60))
			t.Logf("testvm: guest output (last lines):\n%s", debroot.LastLines(res.Output, 100))
		}
	})
	start := time.Now()
	err = g.boot(ctx)
	res.Console, res.Output = g.logs()
	if err != nil {
		t.Fatalf("testvm: %v", err)
	}
	t.Logf("testvm: the guest ran for %s (%s)", time.Since(start).Round(100*time.Millisecond), firstLine(res.Output))
	if err := collect(disk, work, &res); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			t.Logf("testvm: guest journal (last lines):\n%s", debroot.LastLines(res.Journal, 60))
		}
		t.Fatalf("testvm: %v", err)
	}
	res.GoTests = checkGoTests(t, spec.GoTests, res.Dir)
	return res
}

// prepareDisk compiles spec's Go tests and writes the data disk for spec
// at path, using tmp for what goes onto it.
func prepareDisk(path string, spec Spec, tmp string) error {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	var bins []string
	for i, gt := range spec.GoTests {
		dir := filepath.Join(tmp, fmt.Sprintf("gotest-%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("compiling the tests of %s: %w", gt.Package, err)
		}
		bin, err := buildTests(ctx, gt.Package, dir)
		if err != nil {
			return err
		}
		bins = append(bins, bin)
	}
	data := filepath.Join(tmp, "data")
	if err := writeDataDir(data, spec, bins); err != nil {
		return err
	}
	return makeDataDisk(ctx, path, data)
}

// collect reads into res what the guest left on the data disk at path,
// the results into work. If the payload did not run to its end, the error
// wraps fs.ErrNotExist.
func collect(path, work string, res *Result) error {
	// The guest has powered off: the disk is ours again.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res.Journal, _ = readDiskFile(ctx, path, "/"+journalFile)
	code, err := readDiskFile(ctx, path, "/"+exitFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the guest powered off without running the payload to its end: %w", err)
	}
	if err != nil {
		return err
	}
	if res.ExitCode, err = strconv.Atoi(strings.TrimSpace(code)); err != nil {
		return fmt.Errorf("the payload's exit code %q: %w", code, err)
	}
	return copyDiskDir(ctx, path, "/"+resultsDir, work)
}

// writeDataDir lays out in dir what the data disk carries: spec's files,
// its script, the binaries of its Go tests, and the run script that runs
// the script and then the Go tests.
func writeDataDir(dir string, spec Spec, testBinaries []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("laying out the data disk: %w", err)
	}
	reserved := []string{runFile, scriptFile, resultsDir, exitFile, journalFile}
	files := map[string]string{}
	for name, src := range spec.Files {
		clean := filepath.Clean(name)
		if !filepath.IsLocal(clean) || slices.Contains(reserved, strings.Split(clean, "/")[0]) {
			return fmt.Errorf("handing %s over as %q: want a relative path, not one of %v", src, name, reserved)
		}
		files[clean] = src
	}
	for i, bin := range testBinaries {
		name := spec.GoTests[i].name(i)
		if _, ok := files[name]; ok {
			return fmt.Errorf("handing %s over as %q: the name of a GoTest's binary", files[name], name)
		}
		files[name] = bin
	}
	for name, src := range files {
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("handing %s over: %w", src, err)
		}
		// A link costs nothing when the file is on the same file system.
		if err := os.Link(src, dst); err != nil {
			if err := copyFile(src, dst); err != nil {
				return fmt.Errorf("handing %s over: %w", src, err)
			}
		}
	}
	script := spec.Script
	if !strings.HasPrefix(script, "#!") {
		script = "#!/bin/bash\n" + script
	}
	if err := os.WriteFile(filepath.Join(dir, scriptFile), []byte(script), 0o755); err != nil {
		return fmt.Errorf("writing the guest's script: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, runFile), []byte(runScript(spec.GoTests)), 0o755); err != nil {
		return fmt.Errorf("writing the guest's run script: %w", err)
	}
	return nil
}

// runScript runs the spec's script, then each Go test, and exits with the
// script's exit code.
func runScript(tests []GoTest) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# Written by testvm: the spec's script, then its Go tests.\n")
	b.WriteString("./" + scriptFile + "\ncode=$?\n")
	for i, gt := range tests {
		b.WriteString(gt.command(i))
	}
	b.WriteString("exit $code\n")
	return b.String()
}

// guest is one boot of the image with a data disk.
type guest struct {
	img             image
	disk            string
	console, output string // the files the serial ports write to
	accel           []string
}

// boot runs QEMU until the guest powers off, and returns an error if it
// fails or ctx ends first, when QEMU is killed.
func (g guest) boot(ctx context.Context) error {
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", g.args()...)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// A test binary that dies takes QEMU with it (see ctrdtest: the signal
	// fires when the starting thread exits, which Go threads do only with
	// the process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// CommandContext kills QEMU by its PID when ctx ends.
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("the guest did not power off in time (QEMU pid %d killed): %w", cmd.Process.Pid, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("qemu-system-x86_64: %w\n%s", err, stderr.String())
	}
	return nil
}

// args are QEMU's arguments: no display, no network, no reboot (a reboot
// or a kernel panic ends QEMU), the console on the first serial port and
// the payload's output on the second, the cached root read-only under a
// temporary overlay.
func (g guest) args() []string {
	args := append(slices.Clone(g.accel),
		"-m", "2048", "-smp", "2",
		"-nographic", "-monitor", "none", "-no-reboot", "-nic", "none",
		"-kernel", g.img.kernel, "-initrd", g.img.initrd, "-append", strings.Join(kernelArgs, " "),
		"-drive", "file="+g.img.root+",if=virtio,format=raw,snapshot=on",
		"-drive", "file="+g.disk+",if=virtio,format=raw",
		"-serial", "file:"+g.console, "-serial", "file:"+g.output,
	)
	return args
}

// logs returns the console, with terminal escapes removed, and the
// output, as far as they were written.
func (g guest) logs() (console, output string) {
	c, _ := os.ReadFile(g.console)
	o, _ := os.ReadFile(g.output)
	return plain(string(c)), string(o)
}

// accelArgs are QEMU's arguments for the accelerator AccelEnv names.
func accelArgs(name string) ([]string, error) {
	switch name {
	case "", "tcg":
		return []string{"-accel", "tcg"}, nil
	case "kvm":
		return []string{"-accel", "kvm", "-cpu", "host"}, nil
	}
	return nil, fmt.Errorf("%s=%q: want tcg or kvm", AccelEnv, name)
}

// escapes are the terminal control sequences systemd colours its status
// lines with.
var escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\r`)

// plain is s without terminal escapes.
func plain(s string) string { return escapes.ReplaceAllString(s, "") }

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
