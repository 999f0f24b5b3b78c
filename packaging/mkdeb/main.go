// Command mkdeb builds staticlet's Debian package from packaging/nfpm.yaml
// with nfpm, used as a library: its command line would bring every other
// package format's dependencies into this module. It lives in its own
// module (packaging/go.mod) so that staticlet's go.mod does not grow nfpm's
// dependency tree.
//
// Run it from packaging/, the directory the paths in nfpm.yaml are
// relative to:
//
//	go run ./mkdeb -version "$(git describe --tags --always --dirty)" \
//	    -arch amd64 -binary ../bin/staticlet -logd ../bin/staticlet-logd \
//	    -o ../bin/staticlet.deb
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
)

func main() {
	config := flag.String("config", "nfpm.yaml", "nfpm configuration")
	version := flag.String("version", "", "staticlet's version, as git describe prints it")
	arch := flag.String("arch", "amd64", "Debian architecture (GOARCH names are the same for amd64 and arm64)")
	binary := flag.String("binary", "", "the staticlet binary to package")
	logd := flag.String("logd", "", "the log daemon's program (cmd/staticlet-logd) to package")
	out := flag.String("o", "", "the .deb to write")
	flag.Parse()
	if err := build(*config, *version, *arch, *binary, *logd, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
}

func build(config, version, arch, binary, logd, out string) error {
	if binary == "" || logd == "" || out == "" {
		return errors.New("-binary, -logd and -o are required")
	}
	vars := map[string]string{"VERSION": debVersion(version), "ARCH": arch, "BINARY": binary, "LOGD": logd}
	cfg, err := nfpm.ParseFileWithEnvMapping(config, func(name string) string { return vars[name] })
	if err != nil {
		return fmt.Errorf("reading %s: %w", config, err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return fmt.Errorf("reading %s: %w", config, err)
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return fmt.Errorf("preparing the package contents: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".staticlet-*.deb")
	if err != nil {
		return fmt.Errorf("writing the package: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := deb.Default.Package(info, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("building the package: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the package: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing the package: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("writing the package: %w", err)
	}
	return nil
}

// debVersion turns git describe's output into a Debian version that sorts
// as the commits do: v1.2.3 is 1.2.3; v1.2.3-4-gabc1234-dirty, four commits
// later, is 1.2.3+4.gabc1234.dirty; a tree without tags (abc1234) is
// 0~gitabc1234, below any release. A Debian version must start with a
// digit, and a hyphen would start the Debian revision.
func debVersion(describe string) string {
	v := strings.TrimPrefix(strings.TrimSpace(describe), "v")
	if v == "" {
		v = "dev"
	}
	if v[0] < '0' || v[0] > '9' {
		v = "0~git" + v
	}
	if base, rest, ok := strings.Cut(v, "-"); ok {
		v = base + "+" + strings.ReplaceAll(rest, "-", ".")
	}
	return v
}
