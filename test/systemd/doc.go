// Package systemd holds the tests of staticlet under a real systemd
// (TestSystemd*): each boots a Debian root with systemd as PID 1 in a
// systemd-nspawn machine, installs staticlet's .deb there and checks its
// unit, sd_notify, the watchdog, the journal and a node shutdown through
// logind, with staticlet inside driving a private containerd on the host.
//
// They need root, debootstrap, systemd-nspawn, nsenter and tar (make
// deps); without them they skip, or fail when CI=true. The first run
// debootstraps the root from the host's apt mirror and caches it.
// STATICLET_BIN and STATICLET_DEB name the binary and the package (make
// test sets both); without them they are built from the module root.
package systemd
