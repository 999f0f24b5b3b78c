// Package modbuild builds the commands of other projects' Go modules, fetched
// through the module proxy, into a cache kept between test runs: the test
// helpers that run a containerd release or etcd get them this way, without
// a registry and without those programs' dependencies in staticlet's go.mod.
//
// It owns the cache entries it is asked for: an entry is a directory that
// exists only when complete (built in a temp dir beside it, renamed into
// place), and it is built once however many processes ask for it at the
// same time (a file lock per entry, which the kernel releases when a
// process dies, so a killed build blocks no later one). It does not choose
// versions, entries or what to build: its callers do. Build is safe for
// concurrent use by goroutines and processes.
package modbuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Recipe is what to build: commands of modules at pinned versions.
type Recipe struct {
	// Require are the "module@version" arguments of go get: the modules of
	// the commands, and any dependency pinned above what they ask for. It
	// may be empty only for Main commands that import the standard library
	// alone.
	Require []string
	// Commands are the binaries, each built from a main package.
	Commands []Command
	// Tags are go build's -tags, space-separated.
	Tags string
	// LDFlags are go build's -ldflags.
	LDFlags string
}

// Command is one binary of a Recipe.
type Command struct {
	// Name is the binary's file name in the entry.
	Name string
	// Package is the import path of its main package. Unused with Main.
	Package string
	// Main, when set, is the source of a main package of the generated
	// module's own, which Build writes there and builds instead of Package:
	// for a program whose module holds its command tree but not its main
	// package (kubectl's is in k8s.io/kubernetes, whose replace directives
	// no other module can build from). What it imports must be in
	// Require's modules.
	Main string
}

// pkg is what go build is given for c: Package, or the directory of the
// generated main package.
func (c Command) pkg() string {
	if c.Main != "" {
		return "./cmd/" + c.Name
	}
	return c.Package
}

// names are the file names of r's binaries.
func (r Recipe) names() []string {
	names := make([]string, 0, len(r.Commands))
	for _, c := range r.Commands {
		names = append(names, c.Name)
	}
	return names
}

// Build makes dir hold every command of r, building them first if it does
// not. dir's parent is created if missing; dir itself must be meant for r
// alone (the caller keys it by what r builds), as a complete dir is never
// built again.
//
// It builds the commands as dependencies of a throwaway module generated
// in a temp dir: a project's own module may have replace directives, which
// go install refuses, and building from a module of staticlet's own would
// put the program's dependencies into staticlet's go.mod.
func Build(ctx context.Context, dir string, r Recipe) error {
	names := r.names()
	if Complete(dir, names...) {
		return nil
	}
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("creating cache %s: %w", parent, err)
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if Complete(dir, names...) { // built by another process while we waited
		return nil
	}
	tmp, err := os.MkdirTemp(parent, ".build-"+base+"-")
	if err != nil {
		return fmt.Errorf("creating build dir for %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "bin")
	if err := buildInto(ctx, r, filepath.Join(tmp, "mod"), out); err != nil {
		return err
	}
	if !Complete(out, names...) {
		return fmt.Errorf("go build left no %s in %s", strings.Join(names, " and "), out)
	}
	if err := os.Rename(out, dir); err != nil {
		return fmt.Errorf("moving build into %s: %w", dir, err)
	}
	return nil
}

// Complete reports whether dir holds a regular file of each name.
func Complete(dir string, names ...string) bool {
	for _, name := range names {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// GoVersion is the version of the go command Build runs ("go1.26.8"), for
// callers that key their entries by it.
func GoVersion(ctx context.Context) (string, error) {
	cmd := goCommand(ctx, "", "env", "GOVERSION")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// lockFile takes an exclusive flock on path, waiting for it, and returns
// the function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// buildInto generates a module in modDir that requires r.Require, and
// builds r's commands into outDir.
func buildInto(ctx context.Context, r Recipe, modDir, outDir string) error {
	if err := os.MkdirAll(modDir, 0o755); err != nil {
		return fmt.Errorf("creating module dir: %w", err)
	}
	// go get raises the go line to what the requirements need.
	gomod := "module staticlet.test/build\n\ngo 1.21\n"
	if err := os.WriteFile(filepath.Join(modDir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return fmt.Errorf("writing go.mod: %w", err)
	}
	for _, c := range r.Commands {
		if c.Main == "" {
			continue
		}
		dir := filepath.Join(modDir, "cmd", c.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating main package of %s: %w", c.Name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(c.Main), 0o644); err != nil {
			return fmt.Errorf("writing main package of %s: %w", c.Name, err)
		}
	}
	if len(r.Require) > 0 {
		if err := run(goCommand(ctx, modDir, append([]string{"get"}, r.Require...)...)); err != nil {
			return err
		}
	}
	for _, c := range r.Commands {
		args := []string{"build", "-trimpath", "-ldflags", r.LDFlags, "-o", filepath.Join(outDir, c.Name)}
		if r.Tags != "" {
			args = append(args, "-tags", r.Tags)
		}
		if err := run(goCommand(ctx, modDir, append(args, c.pkg())...)); err != nil {
			return err
		}
	}
	return nil
}

// goCommand is the go command in dir. Its environment keeps the build to
// the generated module (no go.work, modules resolved and go.sum written as
// needed) and to the installed toolchain, and without cgo, so that no C
// headers are needed and the binaries are static.
func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod",
		"CGO_ENABLED=0",
	)
	return cmd
}

// run runs cmd, its output in the error when it fails.
func run(cmd *exec.Cmd) error {
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}
