package testvm

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/debroot"
)

// recipeVersion is part of the image's hash: bump it when the build below
// changes what it makes from the same recipe.
const recipeVersion = "1"

// rootHeadroom is the free space in the root image beyond what the root
// holds: for the tests' containerd roots, images and temp files. The image
// is sparse, so it costs disk only where the guest writes, and with
// snapshot=on that goes to QEMU's temporary overlay, not the cache.
const rootHeadroom = 1 << 30

// buildTimeout bounds building the image: debootstrap from the mirror
// takes minutes on a busy machine.
const buildTimeout = 20 * time.Minute

// image is the guest's boot files, in the cache.
type image struct {
	kernel, initrd, root string
}

// cachedImage returns the guest image for the host's release, building it
// into the cache first unless it is there.
func cachedImage(t testing.TB) image {
	t.Helper()
	suite, err := debroot.HostCodename()
	if err != nil {
		t.Fatalf("testvm: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	start := time.Now()
	built := false
	dir, err := debroot.Cached(ctx, "vm-"+recipeHash(suite), func(ctx context.Context, dir string) error {
		t.Logf("testvm: building the %s guest image into the cache %s (once per recipe)", suite, debroot.CacheDir)
		built = true
		return buildImage(ctx, dir, suite)
	})
	if err != nil {
		t.Fatalf("testvm: %v", err)
	}
	if built {
		t.Logf("testvm: guest image built in %s", time.Since(start).Round(time.Second))
	}
	return image{
		kernel: filepath.Join(dir, "vmlinuz"),
		initrd: filepath.Join(dir, "initrd.img"),
		root:   filepath.Join(dir, "root.img"),
	}
}

// recipeHash names the image made by buildImage for suite: everything that
// goes into it.
func recipeHash(suite string) string {
	parts := []string{recipeVersion, suite, strings.Join(guestPackages, ","), strings.Join(maskedUnits, ",")}
	for _, f := range rootFiles {
		parts = append(parts, fmt.Sprintf("%s %o", f.path, f.mode), f.content)
	}
	units := make([]string, 0, len(enabledUnits))
	for u, target := range enabledUnits {
		units = append(units, u+" "+target)
	}
	slices.Sort(units)
	return debroot.Hash(append(parts, units...)...)
}

// buildImage debootstraps suite with guestPackages, configures it, and
// writes into dir the kernel and initrd from its /boot and the root as an
// ext4 image.
func buildImage(ctx context.Context, dir, suite string) error {
	root := filepath.Join(dir, "root")
	defer os.RemoveAll(root) // only the image stays in the cache
	if err := debroot.Debootstrap(ctx, root, suite, guestPackages); err != nil {
		return err
	}
	if err := configureRoot(root); err != nil {
		return err
	}
	for name, pattern := range map[string]string{"vmlinuz": "vmlinuz-*", "initrd.img": "initrd.img-*"} {
		found, _ := filepath.Glob(filepath.Join(root, "boot", pattern))
		if len(found) != 1 {
			return fmt.Errorf("want one /boot/%s in the guest's root, found %d", pattern, len(found))
		}
		if err := copyFile(found[0], filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	size, err := treeSize(root)
	if err != nil {
		return err
	}
	return makeExt4(ctx, filepath.Join(dir, "root.img"), root, size+rootHeadroom, "-L", "staticlet-vm")
}

// configureRoot writes rootFiles, masks maskedUnits, enables enabledUnits
// and drops what the guest never reads (downloaded packages, docs).
func configureRoot(root string) error {
	for _, f := range rootFiles {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("configuring the guest: %w", err)
		}
		if err := os.WriteFile(p, []byte(f.content), fs.FileMode(f.mode)); err != nil {
			return fmt.Errorf("configuring the guest: %w", err)
		}
	}
	units := filepath.Join(root, "etc", "systemd", "system")
	for _, u := range maskedUnits {
		if err := relink("/dev/null", filepath.Join(units, u)); err != nil {
			return fmt.Errorf("masking %s in the guest: %w", u, err)
		}
	}
	for u, target := range enabledUnits {
		wants := filepath.Join(units, target+".wants")
		if err := os.MkdirAll(wants, 0o755); err != nil {
			return fmt.Errorf("enabling %s in the guest: %w", u, err)
		}
		if err := relink("/etc/systemd/system/"+u, filepath.Join(wants, u)); err != nil {
			return fmt.Errorf("enabling %s in the guest: %w", u, err)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb"))
	for _, p := range append(debs, filepath.Join(root, "usr/share/doc"), filepath.Join(root, "usr/share/man"),
		filepath.Join(root, "usr/share/locale")) {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("trimming the guest's root: %w", err)
		}
	}
	return nil
}

// relink makes a symbolic link at path to target, replacing what is there.
func relink(target, path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Symlink(target, path)
}

// treeSize is the space the files under dir take, counted in whole blocks.
func treeSize(dir string) (int64, error) {
	const block = 4096
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		size += block // the inode's share, directory blocks, a symlink's target
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			size += (info.Size() + block - 1) / block * block
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return size, nil
}

// makeExt4 writes a sparse ext4 image of size bytes (rounded up to MiB)
// at path, holding the tree under dir, with owners and modes as they are.
func makeExt4(ctx context.Context, path, dir string, size int64, mkfsArgs ...string) error {
	const mib = 1 << 20
	size = (size + mib - 1) / mib * mib
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating disk image %s: %w", path, err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sizing disk image %s: %w", path, err)
	}
	args := append([]string{"-q", "-F", "-d", dir}, mkfsArgs...)
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", append(args, path)...).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 -d %s %s: %w\n%s", dir, path, err, out)
	}
	return nil
}

// copyFile copies the regular file src to dst, with src's mode.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}
