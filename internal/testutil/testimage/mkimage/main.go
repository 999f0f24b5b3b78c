// Command mkimage writes the busybox test image (package testimage) as an OCI
// image layout tar archive, for `ctr -n staticlet images import FILE`.
//
// Usage:
//
//	go run ./internal/testutil/testimage/mkimage -o FILE [-ref REF] [-busybox PATH]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/staticlet/staticlet/internal/testutil/testimage"
)

func main() {
	out := flag.String("o", "", "archive file to write (required)")
	ref := flag.String("ref", testimage.DefaultRef, "image name recorded in the archive")
	busybox := flag.String("busybox", testimage.DefaultBusybox, "static busybox binary to copy")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, testimage.Options{Ref: *ref, Busybox: *busybox}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(out string, opts testimage.Options) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	bw := bufio.NewWriter(f)
	if err := testimage.Build(bw, opts); err != nil {
		f.Close()
		os.Remove(out)
		return fmt.Errorf("building image %s: %w", opts.Ref, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		os.Remove(out)
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(out)
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}
