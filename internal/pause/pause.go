// Package pause owns the pause program of pods' sandboxes: it prepares
// the read-only root every pause process runs from (the built-in program
// of package pauseprog, or a program of the user's with what a dynamically
// linked one needs), says how to run it, and is the program's body where
// staticlet runs itself as the pause (Main). It starts no process:
// package sandbox creates the sandboxes.
package pause

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"

	"golang.org/x/sys/unix"

	"github.com/staticlet/staticlet/internal/install"
	"github.com/staticlet/staticlet/internal/pause/pauseprog"
)

// Config configures the pause program.
type Config struct {
	// Binary, when set, is the program copied into the pause root and run
	// with Args; a dynamically linked one gets its interpreter and
	// libraries copied there too. By default the pause program is the
	// built-in one for the architecture (pauseprog), a few hundred bytes
	// with no runtime, and where there is none staticlet's own binary.
	Binary string
	// Args are the arguments after the program; default ["pause"].
	Args []string
}

// Root is a prepared pause root: how to run the pause program from it.
type Root struct {
	// Dir is the root's directory.
	Dir string
	// Args are the pause process's arguments, the program first.
	Args []string
	// Env is the pause process's environment beyond PATH: where a
	// dynamically linked pause program finds its libraries in its root.
	Env []string
	// Builtin tells that the program is the built-in one, which says
	// nothing unless its set-up fails.
	Builtin bool
}

// Prepare makes the pause root under rootDir (pause/rootfs/) for the
// program cfg asks for: the built-in one, a program of the user's, or
// staticlet's own binary where there is no built-in one for the
// architecture. Files already there are refreshed only when they changed.
func Prepare(cfg Config, rootDir string) (*Root, error) {
	if len(cfg.Args) == 0 {
		cfg.Args = []string{"pause"}
	}
	builtin, haveBuiltin := pauseprog.Program(goruntime.GOARCH)
	if cfg.Binary == "" && !haveBuiltin {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the pause program: %w", err)
		}
		cfg.Binary = exe
	}
	dir := pauseRoot(rootDir)
	libPath, err := preparePauseRoot(builtin, cfg.Binary, dir)
	if err != nil {
		return nil, err
	}
	r := &Root{Dir: dir, Args: append([]string{pauseProgram}, cfg.Args...), Builtin: cfg.Binary == ""}
	if libPath != "" {
		r.Env = []string{"LD_LIBRARY_PATH=" + libPath}
	}
	return r, nil
}

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

// ReadyName is the name the pause process takes once it handles
// SIGTERM, for StartSandbox to wait for. Before that a stop signal finds
// runc's init or the Go runtime's default, which end the process with
// exit 2, or, sooner still, no handler at all: the kernel discards it for
// the init of a PID namespace, and the sandbox runs on until SIGKILL.
const ReadyName = pauseprog.ReadyName

// Main is the body of a pod's pause sandbox where there is no built-in
// pause program for the architecture (pauseprog) and staticlet runs itself
// instead: it holds the pod's namespaces open, reaps orphans when it is
// the pod's PID 1, and exits 0 on SIGTERM or SIGINT. It returns the exit
// code.
func Main() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGCHLD)
	// /proc/self is the process's main thread, whose name StartSandbox
	// reads; prctl would name whichever thread runs this.
	if err := os.WriteFile("/proc/self/comm", []byte(ReadyName), 0); err != nil {
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
