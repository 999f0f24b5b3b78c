package filewatch

import "golang.org/x/sys/unix"

// pseudoFS returns the name of the kernel's pseudo file system path is on
// (proc, sysfs, cgroup and the like), "" when it is on another. Their
// content is the kernel's state, which changes all the time without
// inotify events: comparing it would restart a container that mounts
// /proc or /sys every Resync.
func pseudoFS(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return ""
	}
	switch uint32(st.Type) {
	case unix.PROC_SUPER_MAGIC:
		return "proc"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	case unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC:
		return "cgroup"
	case unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.SELINUX_MAGIC,
		unix.BPF_FS_MAGIC, unix.PSTOREFS_MAGIC, unix.EFIVARFS_MAGIC, unix.BINFMTFS_MAGIC,
		unix.DEVPTS_SUPER_MAGIC, unix.NSFS_MAGIC:
		return "a kernel pseudo file system"
	}
	return ""
}
