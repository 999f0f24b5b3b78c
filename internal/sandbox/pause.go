package sandbox

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/install"
	"github.com/staticlet/staticlet/internal/sandbox/pauseprog"
)

// pauseRoot is the read-only root every pause sandbox runs from.
func pauseRoot(rootDir string) string { return filepath.Join(rootDir, "pause", "rootfs") }

// pauseProgram is the pause program's path inside its root.
const pauseProgram = "/pause"

// preparePauseRoot makes dir a root holding the pause program and the
// empty mount points runc needs. The program is the built-in one (prog)
// when bin is empty, and otherwise a copy of program bin; a dynamically
// linked bin gets its program interpreter and libraries beside it, at
// their host paths (dynamicNeeds), and the LD_LIBRARY_PATH it needs is
// returned, empty for a static program. Each file is refreshed only when
// it changed, through a rename, so that running sandboxes keep theirs.
func preparePauseRoot(prog []byte, bin, dir string) (libPath string, err error) {
	for _, d := range []string{"proc", "dev", "sys", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", fmt.Errorf("preparing the pause root: %w", err)
		}
	}
	if bin == "" {
		if err := install.Bytes(prog, filepath.Join(dir, pauseProgram)); err != nil {
			return "", fmt.Errorf("writing the pause program: %w", err)
		}
		return "", nil
	}
	needs, err := dynamicNeeds(bin)
	if err != nil {
		return "", err
	}
	for _, f := range needs {
		if err := install.File(f, filepath.Join(dir, filepath.Clean(f))); err != nil {
			return "", fmt.Errorf("copying what the pause program needs into its root: %w", err)
		}
	}
	if err := install.File(bin, filepath.Join(dir, pauseProgram)); err != nil {
		return "", fmt.Errorf("copying the pause program: %w", err)
	}
	return libraryPath(needs), nil
}

// pauseReadyName is the name the pause process takes once it handles
// SIGTERM, for StartSandbox to wait for. Before that a stop signal finds
// runc's init or the Go runtime's default, which end the process with
// exit 2, or, sooner still, no handler at all: the kernel discards it for
// the init of a PID namespace, and the sandbox runs on until SIGKILL.
const pauseReadyName = pauseprog.ReadyName

// Pause is the body of a pod's pause sandbox where there is no built-in
// pause program for the architecture (pauseprog) and staticlet runs itself
// instead: it holds the pod's namespaces open, reaps orphans when it is
// the pod's PID 1, and exits 0 on SIGTERM or SIGINT. It returns the exit
// code.
func Pause() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGCHLD)
	// /proc/self is the process's main thread, whose name StartSandbox
	// reads; prctl would name whichever thread runs this.
	if err := os.WriteFile("/proc/self/comm", []byte(pauseReadyName), 0); err != nil {
		fmt.Fprintf(os.Stderr, "pause: telling that SIGTERM is handled: %v\n", err)
		return 1
	}
	for s := range sigs {
		if s != unix.SIGCHLD {
			return 0
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}
