package testvm

// What the guest image holds beyond debootstrap's root, all of it part of
// the recipe's hash: change any of it and the next run builds a new image.

// GuestDir is where the guest mounts the data disk: the files a Spec hands
// over are there, and the script runs there. Tests inside the guest find
// their files under it (for example STATICLET_BIN=GuestDir+"/staticlet").
const GuestDir = "/mnt/vmtest"

// NodeAddress is the guest's IPv4 address, on a dummy link with the
// default route: the guest has no network, but a node has an address.
const NodeAddress = "192.0.2.10"

// hostname is the guest's host name.
const hostname = "staticlet-vm"

// guestPackages are installed into the root beyond debootstrap's minbase:
// systemd as PID 1 with its bus, udev (so that systemd sees the disks as
// devices and mounts the root without waiting out a timeout), the cloud
// kernel (virtio drivers, the smallest module set) and kmod to load its
// modules, containerd and runc with the static busybox the test image is
// made of, and e2fsprogs and iproute2 for the tests.
var guestPackages = []string{
	"systemd", "systemd-sysv", "dbus", "udev", "kmod",
	"linux-image-cloud-amd64",
	"containerd", "runc", "busybox-static",
	"e2fsprogs", "iproute2",
}

// maskedUnits would slow the boot, wait for a network the guest does not
// have, prompt on the console, or run maintenance in the middle of a test.
var maskedUnits = []string{
	"systemd-networkd-wait-online.service",
	"systemd-timesyncd.service",
	"systemd-firstboot.service", // its prompts would wait for a console nobody types on
	"getty.target",              // no logins
	"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
	"e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer",
}

// payloadUnit runs payloadScript once the system is up. After
// multi-user.target, although that target wants it, so that the test
// starts on a settled system; the target does not wait for it.
const payloadUnit = `[Unit]
Description=staticlet test payload from the data disk
After=multi-user.target containerd.service
Wants=containerd.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/staticlet-vmtest
TimeoutStartSec=infinity
StandardOutput=journal
StandardError=journal
Environment=HOME=/root LANG=C.UTF-8

[Install]
WantedBy=multi-user.target
`

// payloadScript mounts the data disk, runs its run script with the output
// going live to the second serial port too, records the exit code on the
// disk, and powers off. Whatever happens it powers off: the host waits for
// QEMU to exit. The disk has no journal, so what was synced is on it even
// if the unmount fails. The root's /run and /tmp are no place for the
// executables: /run is noexec; the disk is mounted exec.
const payloadScript = `#!/bin/bash
# staticlet-vmtest: runs the test payload from the data disk, then powers
# the guest off. Written by staticlet's internal/testutil/testvm.
set -u
out=/dev/ttyS1
dir=` + GuestDir + `
# Raw, so that the host reads the output as it was written (no \r added).
stty -F "$out" raw -echo
say() { echo "vmtest: $*" >"$out"; }
say "booted in $(cut -d' ' -f1 /proc/uptime)s"
# No network, but a node's address and default route, as a node agent
# expects of its node (a pod's hostIP, hostPorts): on a dummy link, in a
# documentation range that leads nowhere.
ip link add node0 type dummy && ip link set node0 up &&
	ip addr add ` + NodeAddress + `/24 dev node0 && ip route add default via 192.0.2.1 dev node0 ||
	say "setting up the node's address failed"
mkdir -p "$dir"
if mount -o exec /dev/vdb "$dir"; then
	mkdir -p "$dir/results"
	cd "$dir"
	RESULTS="$dir/results" ./run </dev/null 2>&1 | tee "$out"
	echo "${PIPESTATUS[0]}" >"$dir/exit-code"
	journalctl -b --no-pager -o short-monotonic >"$dir/journal" 2>&1
	cd /
	sync
	umount "$dir" || say "unmounting the data disk failed"
else
	say "mounting the data disk failed"
fi
sync
systemctl poweroff --no-block
`

// rootFile is a file written into the guest's root.
type rootFile struct {
	path    string
	mode    uint32
	content string
}

// rootFiles configure the guest: who it is, its root file system (the
// kernel mounts it read-write already; no fsck), and the payload.
var rootFiles = []rootFile{
	{"/etc/hostname", 0o644, hostname + "\n"},
	{"/etc/hosts", 0o644, "127.0.0.1 localhost\n127.0.1.1 " + hostname + "\n"},
	{"/etc/fstab", 0o644, "/dev/vda / ext4 rw 0 0\n"},
	{"/etc/systemd/system/staticlet-vmtest.service", 0o644, payloadUnit},
	{"/usr/local/sbin/staticlet-vmtest", 0o755, payloadScript},
}

// enabledUnits are enabled the way systemctl enable would: a link in the
// wants directory of the target their [Install] section names.
var enabledUnits = map[string]string{
	"staticlet-vmtest.service": "multi-user.target",
}

// kernelArgs boot the root disk read-write, with the console on the first
// serial port, systemd on the unified cgroup hierarchy, and a kernel panic
// ending QEMU (-no-reboot) rather than hanging until the timeout.
var kernelArgs = []string{
	"root=/dev/vda", "rw", "console=ttyS0",
	"systemd.unified_cgroup_hierarchy=1", "panic=-1",
}
