package pauseprog

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// TestImage: each program is a well-formed static executable for its
// machine, one loadable segment at its entry, no interpreter, a stack
// that is not executable, and small.
func TestImage(t *testing.T) {
	for _, tt := range []struct {
		arch    string
		machine elf.Machine
	}{{"amd64", elf.EM_X86_64}, {"arm64", elf.EM_AARCH64}} {
		prog, ok := Program(tt.arch)
		if !ok {
			t.Fatalf("no program for %s", tt.arch)
		}
		f, err := elf.NewFile(bytes.NewReader(prog))
		if err != nil {
			t.Fatalf("%s: %v", tt.arch, err)
		}
		if f.Machine != tt.machine || f.Type != elf.ET_EXEC || f.Class != elf.ELFCLASS64 {
			t.Errorf("%s: machine %v type %v class %v", tt.arch, f.Machine, f.Type, f.Class)
		}
		var loads int
		for _, p := range f.Progs {
			switch p.Type {
			case elf.PT_INTERP:
				t.Errorf("%s: has an interpreter", tt.arch)
			case elf.PT_LOAD:
				loads++
				if f.Entry < p.Vaddr || f.Entry >= p.Vaddr+p.Filesz || p.Flags != elf.PF_R|elf.PF_X || p.Filesz != uint64(len(prog)) {
					t.Errorf("%s: segment %+v does not hold the entry %#x, or is not the whole file read+execute", tt.arch, p.ProgHeader, f.Entry)
				}
			case elf.PT_GNU_STACK:
				if p.Flags&elf.PF_X != 0 {
					t.Errorf("%s: executable stack", tt.arch)
				}
			}
		}
		if loads != 1 {
			t.Errorf("%s: %d loadable segments, want 1", tt.arch, loads)
		}
		if len(prog) > 1024 {
			t.Errorf("%s: %d bytes, want a program under 1 KiB", tt.arch, len(prog))
		}
		if !bytes.Contains(prog, []byte(ReadyName+"\x00")) || !bytes.Contains(prog, []byte(failMessage)) {
			t.Errorf("%s: the name or the failure message is missing", tt.arch)
		}
	}
	if _, ok := Program("riscv64"); ok {
		t.Error("a program for riscv64, which has none")
	}
}

// runner runs a program for arch: natively, or through QEMU's user-mode
// emulator for another architecture when it is installed.
func runner(t *testing.T, arch string) (prog string, wrap []string) {
	t.Helper()
	p, _ := Program(arch)
	prog = filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(prog, p, 0o755); err != nil {
		t.Fatal(err)
	}
	if arch == runtime.GOARCH {
		return prog, nil
	}
	for _, q := range []string{"qemu-" + qemuArch(arch), "qemu-" + qemuArch(arch) + "-static"} {
		if path, err := exec.LookPath(q); err == nil {
			return prog, []string{path}
		}
	}
	msg := fmt.Sprintf("no qemu-%s to run the %s program (make deps installs qemu-user)", qemuArch(arch), arch)
	tier.Missing(t, msg)
	return "", nil
}

func qemuArch(arch string) string {
	if arch == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}

// start starts the program for arch and waits until it names itself
// ReadyName.
func start(t *testing.T, arch string, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	prog, wrap := runner(t, arch)
	args := append(wrap, prog, "pause")
	cmd := exec.Command(args[0], args[1:]...)
	// exec copies the program's stderr in a goroutine of its own while
	// the wait below reads it.
	var stderr harness.SyncBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	harness.WaitFor(t, 30*time.Second, "the program to name itself "+ReadyName, func() (bool, string) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		name := strings.TrimSpace(string(b))
		return name == ReadyName, fmt.Sprintf("named %q, stderr %q", name, stderr.String())
	})
	return cmd
}

// TestSignals: for each architecture and each stop signal, the program
// names itself ready with its handlers in place, and the signal ends it
// with status 0.
func TestSignals(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(arch+"/"+sig.String(), func(t *testing.T) {
				cmd := start(t, arch, nil)
				if arch == runtime.GOARCH {
					caught, ignored := sigMasks(t, cmd.Process.Pid)
					for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
						if caught&(1<<(s-1)) == 0 {
							t.Errorf("%v is not caught (SigCgt %#x)", s, caught)
						}
					}
					if ignored&(1<<(syscall.SIGCHLD-1)) == 0 {
						t.Errorf("SIGCHLD is not ignored (SigIgn %#x)", ignored)
					}
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				if err != nil {
					t.Errorf("after %v: %v, want exit status 0", sig, err)
				}
			})
		}
	}
}

// TestReapsOrphans: as the init of a PID namespace the program inherits
// the orphans of the namespace, and none of them stays a zombie.
func TestReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("no nsenter")
	}
	cmd := start(t, runtime.GOARCH, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	pid := cmd.Process.Pid
	// A shell in the namespace leaves a sleep behind and exits: the sleep
	// is the program's, and is then ended.
	out, err := exec.Command(nsenter, "--target", strconv.Itoa(pid), "--pid", "--",
		"/bin/sh", "-c", "sleep 1000 >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	var orphan int
	harness.WaitFor(t, 30*time.Second, "the orphan to be the program's", func() (bool, string) {
		orphan = childOf(pid)
		return orphan != 0, "no child"
	})
	if err := syscall.Kill(orphan, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 30*time.Second, "the orphan to be reaped", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", orphan))
		if errors.Is(err, os.ErrNotExist) {
			return true, ""
		}
		return false, string(b)
	})
}

// childOf returns a child of process pid, 0 for none.
func childOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			return n
		}
	}
	return 0
}

// sigMasks reads the caught and ignored signals of process pid.
func sigMasks(t *testing.T, pid int) (caught, ignored uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		switch k {
		case "SigCgt":
			caught = n
		case "SigIgn":
			ignored = n
		}
	}
	return caught, ignored
}
