package pause

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The pause program runs from a root that holds nothing but itself. A
// dynamically linked build (cgo on, as a plain `go build` or `go install`
// makes it where a C compiler is found) needs its program interpreter and
// shared libraries there too, or it exits at once, before main: every
// sandbox would fail to start. So the pause root gets them, at the paths
// the program was linked to look in, and the pause process the directories
// in LD_LIBRARY_PATH, as the root has no ld.so.cache.

// dynamicNeeds lists what the ELF program bin needs from the host to run:
// its program interpreter and every shared library it loads, directly or
// through another, each as a host path found as the dynamic loader would
// (DT_RPATH and DT_RUNPATH, then the system's directories). A static
// program needs nothing, nor does one that is not ELF (runc will say what
// it thinks of it). A library that is found nowhere is an error that names
// it and says how to build statically.
func dynamicNeeds(bin string) ([]string, error) {
	if ok, err := isELF(bin); err != nil || !ok {
		return nil, err
	}
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the pause program %s: %w", bin, err)
	}
	defer f.Close()
	interp, err := interpreter(f)
	if err != nil {
		return nil, fmt.Errorf("reading the pause program %s: %w", bin, err)
	}
	if interp == "" {
		return nil, nil
	}
	notFound := func(what string) error {
		return fmt.Errorf("the pause program %s is dynamically linked and needs %s, which was not found; "+
			"build staticlet statically: CGO_ENABLED=0 go build ./cmd/staticlet (as make build does)", bin, what)
	}
	if !isFile(interp) {
		return nil, notFound(interp)
	}
	sys := systemLibDirs(f.Machine, interp)
	out := []string{interp}
	seen := map[string]bool{interp: true}
	type object struct {
		path string
		f    *elf.File
	}
	queue := []object{{bin, f}}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		needed, err := obj.f.DynString(elf.DT_NEEDED)
		if err != nil {
			return nil, fmt.Errorf("reading the libraries %s needs: %w", obj.path, err)
		}
		dirs := append(searchPath(obj.f, obj.path), sys...)
		for _, name := range needed {
			path := findLibrary(name, dirs, f.Class, f.Machine)
			if path == "" {
				return nil, notFound(name)
			}
			if seen[path] {
				continue
			}
			seen[path] = true
			out = append(out, path)
			lf, err := elf.Open(path)
			if err != nil {
				return nil, fmt.Errorf("reading library %s: %w", path, err)
			}
			defer lf.Close()
			queue = append(queue, object{path, lf})
		}
	}
	return out, nil
}

// isELF tells whether file path starts as an ELF file does.
func isELF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("reading the pause program: %w", err)
	}
	defer f.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(f, magic); err != nil {
		return false, nil // too short to be one
	}
	return string(magic) == elf.ELFMAG, nil
}

// interpreter returns f's program interpreter (PT_INTERP), empty when it
// has none: it is statically linked.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("reading the program interpreter: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// searchPath is where object f (at path) asks for its libraries to be
// looked for first: DT_RPATH, unless it has DT_RUNPATH, which the loader
// prefers, each with $ORIGIN expanded.
func searchPath(f *elf.File, path string) []string {
	list, _ := f.DynString(elf.DT_RUNPATH)
	if len(list) == 0 {
		list, _ = f.DynString(elf.DT_RPATH)
	}
	origin := filepath.Dir(path)
	var dirs []string
	for _, l := range list {
		for _, d := range strings.Split(l, ":") {
			d = strings.NewReplacer("${ORIGIN}", origin, "$ORIGIN", origin).Replace(d)
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// multiarch are Debian's multiarch triplets, the directories under /lib
// and /usr/lib that hold each machine's libraries.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
	elf.EM_386:     "i386-linux-gnu",
	elf.EM_ARM:     "arm-linux-gnueabihf",
	elf.EM_RISCV:   "riscv64-linux-gnu",
	elf.EM_PPC64:   "powerpc64le-linux-gnu",
	elf.EM_S390:    "s390x-linux-gnu",
}

// systemLibDirs are the directories the dynamic loader searches last, as
// it would with no ld.so.cache: the interpreter's own, the machine's
// multiarch ones, then the traditional ones.
func systemLibDirs(m elf.Machine, interp string) []string {
	dirs := []string{filepath.Dir(interp)}
	if t, ok := multiarch[m]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// findLibrary returns the path of library name in the first of dirs that
// holds one of the program's class and machine (a 32-bit library of the
// same name can sit in another directory), or empty. A name with a slash
// is a path already.
func findLibrary(name string, dirs []string, class elf.Class, m elf.Machine) string {
	if strings.Contains(name, "/") {
		if isFile(name) {
			return name
		}
		return ""
	}
	for _, d := range dirs {
		path := filepath.Join(d, name)
		if !isFile(path) {
			continue
		}
		f, err := elf.Open(path)
		if err != nil {
			continue
		}
		ok := f.Class == class && f.Machine == m
		f.Close()
		if ok {
			return path
		}
	}
	return ""
}

// isFile tells whether path is, or links to, a regular file.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// libraryPath is LD_LIBRARY_PATH for a program that needs files: the
// directories of its libraries, in the order first needed; empty for a
// static program.
func libraryPath(files []string) string {
	var dirs []string
	seen := map[string]bool{}
	for i, f := range files {
		d := filepath.Dir(f)
		if i == 0 || seen[d] { // the interpreter is no library
			continue
		}
		seen[d] = true
		dirs = append(dirs, d)
	}
	return strings.Join(dirs, ":")
}
