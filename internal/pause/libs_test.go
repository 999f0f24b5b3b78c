package pause

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// needC skips the test when there is no C compiler, or fails it under CI
// (make deps installs gcc).
func needC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		tier.Missing(t, fmt.Sprintf("no C compiler: %v", err))
	}
}

// run runs a build command in dir, failing the test with its output.
func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// buildPrograms builds, in dir, the programs TestDynamicNeeds inspects: Go
// ones with cgo off and on, and C ones linked against a library of dir's,
// libpauselibtest.so.1, found through $ORIGIN or not at all.
func buildPrograms(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	goMain := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ok\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goMain), 0o644); err != nil {
		t.Fatal(err)
	}
	// With cgo on, the program links the C library, as staticlet does
	// through package net.
	if err := os.WriteFile(filepath.Join(dir, "c.go"), []byte("//go:build cgo\n\npackage main\n\nimport \"C\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, []string{"CGO_ENABLED=0", "GOFLAGS="}, "go", "build", "-o", "go-static", ".")
	run(t, dir, []string{"CGO_ENABLED=1", "GOFLAGS="}, "go", "build", "-o", "go-cgo", ".")
	lib := "int answer(void) { return 42; }\n"
	prog := "#include <stdio.h>\nint answer(void);\nint main(void) { printf(\"%d\\n\", answer()); return 0; }\n"
	if err := os.WriteFile(filepath.Join(dir, "lib.c"), []byte(lib), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prog.c"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "gcc", "-shared", "-fPIC", "-Wl,-soname,libpauselibtest.so.1", "-o", "lib/libpauselibtest.so.1", "lib.c")
	if err := os.Symlink("libpauselibtest.so.1", filepath.Join(dir, "lib", "libpauselibtest.so")); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "gcc", "-o", "c-origin", "prog.c", "-Llib", "-lpauselibtest", "-Wl,-rpath,$ORIGIN/lib")
	run(t, dir, nil, "gcc", "-o", "c-missing", "prog.c", "-Llib", "-lpauselibtest")
}

// TestDynamicNeeds inspects programs as the pause program may be built,
// and checks that what dynamicNeeds lists is enough to run each from a
// root that holds nothing else.
func TestDynamicNeeds(t *testing.T) {
	tier.Integration(t, "root, to run programs in a root of their own")
	needC(t)
	dir := t.TempDir()
	buildPrograms(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "script"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		prog   string
		static bool     // needs nothing
		want   []string // base names among the needs
		output string   // what it prints when run in a root with only its needs
		errHas []string // the error says these
	}{
		{name: "Go, cgo off", prog: "go-static", static: true, output: "ok"},
		{name: "Go, cgo on", prog: "go-cgo", want: []string{"libc.so.6"}, output: "ok"},
		{name: "C, library through $ORIGIN", prog: "c-origin", want: []string{"libpauselibtest.so.1", "libc.so.6"}, output: "42"},
		{name: "C, library not found", prog: "c-missing", errHas: []string{
			"the pause program " + filepath.Join(dir, "c-missing") + " is dynamically linked and needs libpauselibtest.so.1, which was not found",
			"CGO_ENABLED=0 go build ./cmd/staticlet",
		}},
		{name: "not ELF", prog: "script", static: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(dir, tt.prog)
			needs, err := dynamicNeeds(bin)
			if len(tt.errHas) > 0 {
				if err == nil {
					t.Fatalf("dynamicNeeds(%s) = %q, want an error", tt.prog, needs)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("dynamicNeeds(%s) error = %q, want it to say %q", tt.prog, err, s)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("dynamicNeeds(%s) error = %q, want one line", tt.prog, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("dynamicNeeds(%s): %v", tt.prog, err)
			}
			if tt.static {
				if len(needs) != 0 {
					t.Errorf("dynamicNeeds(%s) = %q, want nothing", tt.prog, needs)
				}
			} else {
				f, err := elf.Open(bin)
				if err != nil {
					t.Fatal(err)
				}
				interp, _ := interpreter(f)
				f.Close()
				if len(needs) == 0 || needs[0] != interp {
					t.Errorf("dynamicNeeds(%s) = %q, want the interpreter %s first", tt.prog, needs, interp)
				}
				var names []string
				for _, n := range needs {
					names = append(names, filepath.Base(n))
					if !filepath.IsAbs(n) || !isFile(n) {
						t.Errorf("need %s: not an absolute path to a file", n)
					}
				}
				for _, w := range tt.want {
					if !slices.Contains(names, w) {
						t.Errorf("dynamicNeeds(%s) = %q, want %s among them", tt.prog, needs, w)
					}
				}
			}
			if tt.output == "" {
				return
			}
			// The proof: it runs in a root with nothing but it and its needs.
			root := filepath.Join(t.TempDir(), "root")
			libPath, err := preparePauseRoot(nil, bin, root)
			if err != nil {
				t.Fatalf("preparePauseRoot(%s): %v", tt.prog, err)
			}
			if (libPath == "") != tt.static {
				t.Errorf("LD_LIBRARY_PATH for %s = %q", tt.prog, libPath)
			}
			cmd := exec.Command(pauseProgram)
			cmd.Env = []string{"LD_LIBRARY_PATH=" + libPath}
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
			cmd.Dir = "/"
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tt.output {
				t.Errorf("%s in a root of its own: %v, output %q; want %q", tt.prog, err, out, tt.output)
			}
		})
	}
}

// TestDynamicNeedsRefresh: a library that changed on the host is copied
// again, through a rename, as the program is.
func TestDynamicNeedsRefresh(t *testing.T) {
	needC(t)
	dir := t.TempDir()
	buildPrograms(t, dir)
	bin := filepath.Join(dir, "c-origin")
	root := filepath.Join(dir, "root")
	if _, err := preparePauseRoot(nil, bin, root); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "lib", "libpauselibtest.so.1")
	copied := filepath.Join(root, lib)
	before := inode(t, copied)
	if _, err := preparePauseRoot(nil, bin, root); err != nil {
		t.Fatal(err)
	}
	if inode(t, copied) != before {
		t.Errorf("unchanged library %s copied again", lib)
	}
	run(t, dir, nil, "gcc", "-shared", "-fPIC", "-O2", "-Wl,-soname,libpauselibtest.so.1", "-o", "lib/libpauselibtest.so.1.new", "lib.c")
	if err := os.Rename(lib+".new", lib); err != nil {
		t.Fatal(err)
	}
	if _, err := preparePauseRoot(nil, bin, root); err != nil {
		t.Fatal(err)
	}
	if inode(t, copied) == before {
		t.Errorf("changed library %s not copied again", lib)
	}
}

func TestLibraryPath(t *testing.T) {
	tests := []struct {
		files []string
		want  string
	}{
		{nil, ""},
		{[]string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6"}, "/lib/x86_64-linux-gnu"},
		{[]string{"/lib/ld.so", "/opt/x/libx.so", "/lib/a/libc.so.6", "/opt/x/liby.so"}, "/opt/x:/lib/a"},
	}
	for _, tt := range tests {
		if got := libraryPath(tt.files); got != tt.want {
			t.Errorf("libraryPath(%q) = %q, want %q", tt.files, got, tt.want)
		}
	}
}

// TestPrepareRefusesUnrunnable: a pause program whose library is missing
// makes Prepare, and so sandbox.New before it dials containerd, fail at
// once, with the one line staticlet run prints.
func TestPrepareRefusesUnrunnable(t *testing.T) {
	needC(t)
	dir := t.TempDir()
	buildPrograms(t, dir)
	bin := filepath.Join(dir, "c-missing")
	_, err := Prepare(Config{Binary: bin}, filepath.Join(dir, "root"))
	want := "the pause program " + bin + " is dynamically linked and needs libpauselibtest.so.1, which was not found; " +
		"build staticlet statically: CGO_ENABLED=0 go build ./cmd/staticlet (as make build does)"
	if err == nil || err.Error() != want {
		t.Errorf("Prepare with pause program %s = %v, want %q", bin, err, want)
	}
}
