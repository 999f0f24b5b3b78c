// Package vm holds TestVM: it boots a Debian guest under QEMU
// (internal/testutil/testvm) with systemd as PID 1 and cgroup v2, checks
// the guest is that machine, installs staticlet's .deb there and checks
// systemd runs it, then runs chosen end-to-end tests (test/e2e) inside
// the guest, once more with the systemd cgroup driver.
//
// It needs root, qemu-system-x86_64, debootstrap and e2fsprogs (make
// deps), and up to 20 minutes; the first run also builds and caches the
// guest's image. STATICLET_BIN and STATICLET_DEB name the binary and the
// package (make test sets both); without them they are built from the
// module root.
package vm
