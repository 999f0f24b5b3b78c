// Package spec builds OCI runtime specs for a pod's sandbox and containers.
// It is pure: it reads a pod, an image config and paths decided by its
// caller, and returns a spec; it touches no file, process or containerd.
package spec

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// defaultPath is the PATH a container gets when neither its image nor its
// spec sets one.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// defaultCaps is the capability set a container gets unless it is privileged
// or adds and drops its own: the set container runtimes have long given.
var defaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// allCaps is every capability this build knows of, in the order of their
// numbers: allCaps[i] is capability number i. A privileged container gets
// all of them that staticlet itself holds.
var allCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
	"CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// maskedPaths and readonlyPaths hide the parts of /proc and /sys that let an
// unprivileged container see or change the host.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// ImageConfig is the part of an image's config that shapes its process.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
}

// SandboxOptions are the host-side facts a sandbox spec needs.
type SandboxOptions struct {
	// Rootfs is the absolute path of the read-only root holding the pause
	// program.
	Rootfs string
	// Args runs the pause program inside Rootfs.
	Args []string
	// Env is added to the pause program's environment (PATH): what a
	// dynamically linked one needs to find its libraries.
	Env []string
	// CgroupsPath is the sandbox's cgroup.
	CgroupsPath string
	// Namespaces are pinned namespaces to join, by type (network, IPC,
	// UTS); a type the pod does not take from the host and that is not
	// here is created new.
	Namespaces map[specs.LinuxNamespaceType]string
	// Resources are what the node lets the sandbox's cgroup and OOM
	// score be.
	Resources ResourceFacts
}

// Sandbox returns the spec of p's pause sandbox: it holds the pod's network,
// IPC and UTS namespaces (and PID when the pod shares one), unless the pod
// uses the host's.
func Sandbox(p *pod.Pod, o SandboxOptions) *specs.Spec {
	s := base()
	s.Root = &specs.Root{Path: o.Rootfs, Readonly: true}
	s.Process.Args = o.Args
	s.Process.Env = append([]string{defaultPath}, o.Env...)
	s.Process.Capabilities = capSet(nil)
	s.Process.NoNewPrivileges = true
	s.Linux.CgroupsPath = o.CgroupsPath
	applySandboxResources(s, o.Resources)
	s.Linux.Namespaces = podNamespaces(p, o.Namespaces)
	if _, pinned := o.Namespaces[specs.UTSNamespace]; !pinned && !p.Spec.HostNetwork {
		// A pinned UTS namespace got its name when it was made.
		s.Hostname = Hostname(p)
	}
	if !p.Spec.HostPID {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	return s
}

// podNamespaces lists a pod's shared namespaces: a mount namespace of its
// own, then network and UTS unless the host's (the host's UTS comes with
// its network, as with the kubelet), and IPC unless the host's, each joined
// by path when pinned.
func podNamespaces(p *pod.Pod, pinned map[specs.LinuxNamespaceType]string) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	add := func(t specs.LinuxNamespaceType) {
		ns = append(ns, specs.LinuxNamespace{Type: t, Path: pinned[t]})
	}
	if !p.Spec.HostNetwork {
		add(specs.NetworkNamespace)
		add(specs.UTSNamespace)
	}
	if !p.Spec.HostIPC {
		add(specs.IPCNamespace)
	}
	return ns
}

// Hostname is the pod's host name as the kubelet gives it:
// spec.hostnameOverride if set, else spec.hostname if set, else the pod's
// name, cut to the 63 bytes a host name may have.
func Hostname(p *pod.Pod) string {
	h := p.Spec.Hostname
	if o := p.Spec.HostnameOverride; o != nil {
		h = *o
	}
	if h == "" {
		h = p.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// CapsFromMask names the capabilities set in mask, a capability set as
// /proc/<pid>/status shows it.
func CapsFromMask(mask uint64) []string {
	var out []string
	for i, c := range allCaps {
		if mask&(1<<i) != 0 {
			out = append(out, c)
		}
	}
	return out
}

// ContainerOptions are the host-side facts a container spec needs.
type ContainerOptions struct {
	// Node is what the container's environment may refer to on the node.
	Node NodeFacts
	// HostCaps are the capabilities staticlet holds and so can grant, which
	// a privileged container or one adding ALL gets; nil means every one
	// this build knows.
	HostCaps []string
	// Namespaces are the pod's pinned namespaces, as for its sandbox.
	Namespaces map[specs.LinuxNamespaceType]string
	// SandboxPID is the pause process, whose PID namespace the container
	// joins when the pod shares one.
	SandboxPID uint32
	// Image is the config of the container's image.
	Image ImageConfig
	// CgroupsPath is the container's cgroup.
	CgroupsPath string
	// Resources are what the node lets the container's cgroup and OOM
	// score be; the node's memory (Node.Memory) scales a Burstable
	// container's OOM score.
	Resources ResourceFacts
	// Volumes maps each of the pod's volume names to its directory or file on
	// the host.
	Volumes map[string]string
	// Sysctls are the pod's sysctls (see Sysctls).
	Sysctls map[string]string
	// LocalhostSeccomp is the JSON of the container's Localhost seccomp
	// profile, when it uses one.
	LocalhostSeccomp []byte
	// EtcFiles maps /etc/hosts, /etc/resolv.conf and /etc/hostname to the
	// pod's files on the host; a container that mounts a volume there keeps
	// its volume.
	EtcFiles map[string]string
	// TerminationFile is the host file that holds this instance's
	// termination message, bound at the container's
	// terminationMessagePath; empty for none.
	TerminationFile string
}

// Container returns the spec of container c of pod p. The root is the
// container's snapshot, mounted by containerd at "rootfs".
func Container(p *pod.Pod, c *v1.Container, o ContainerOptions) (*specs.Spec, error) {
	s := base()
	s.Root = &specs.Root{Path: "rootfs"}
	vars, vals, err := resolveEnv(p, c, o.Node)
	if err != nil {
		if isWaiting(err) {
			return nil, err
		}
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	// Command and args see the container's variables, not the image's.
	expanded := *c
	expanded.Command, expanded.Args = expandAll(c.Command, vals), expandAll(c.Args, vals)
	args := processArgs(&expanded, o.Image)
	if len(args) == 0 {
		return nil, fmt.Errorf("container %q: no command: neither the manifest nor the image sets one", c.Name)
	}
	s.Process.Args = args
	s.Process.Env = env(o.Image.Env, vars)
	s.Process.Cwd = "/"
	if o.Image.WorkingDir != "" {
		s.Process.Cwd = o.Image.WorkingDir
	}
	if c.WorkingDir != "" {
		s.Process.Cwd = c.WorkingDir
	}
	user, err := processUser(p, c, o.Image.User)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	if user.UID == 0 && runsAsNonRoot(p, c) {
		return nil, fmt.Errorf("container %q has runAsNonRoot and would run as root: set runAsUser or use an image with a non-root numeric USER", c.Name)
	}
	if g := FSGroup(p); g != nil {
		user.AdditionalGids = append(user.AdditionalGids, uint32(*g))
	}
	s.Process.User = user
	s.Linux.CgroupsPath = o.CgroupsPath
	if err := applyContainerResources(s, p, c, o.Node.Memory.Value(), o.Resources); err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	applySecurity(s, c, o.HostCaps)
	applyProcMount(s, c)
	s.Linux.Sysctl = o.Sysctls
	if err := applySeccomp(s, p, c, o.LocalhostSeccomp); err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}

	s.Linux.Namespaces = containerNamespaces(p, o.Namespaces, o.SandboxPID)
	mounts, err := volumeMounts(s, p, c, o.Volumes, vals)
	if err != nil {
		return nil, err
	}
	s.Mounts = append(s.Mounts, etcMounts(c, o.EtcFiles)...)
	s.Mounts = append(s.Mounts, mounts...)
	// After the volumes, so that it shows inside a volume mounted above it.
	s.Mounts = append(s.Mounts, terminationMount(c, o.TerminationFile)...)
	return s, nil
}

// etcMounts binds the pod's /etc files, sorted by path, except where the
// container mounts a volume of its own.
func etcMounts(c *v1.Container, files map[string]string) []specs.Mount {
	var out []specs.Mount
	for _, dst := range []string{"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"} {
		src, ok := files[dst]
		if !ok || slices.ContainsFunc(c.VolumeMounts, func(vm v1.VolumeMount) bool { return MountPath(vm) == dst }) {
			continue
		}
		out = append(out, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", "rw"}})
	}
	return out
}

// processArgs applies the kubelet's rule: command replaces the image's
// entrypoint (and drops its cmd); args alone replace the image's cmd.
func processArgs(c *v1.Container, img ImageConfig) []string {
	var args []string
	switch {
	case len(c.Command) > 0:
		args = append(args, c.Command...)
		args = append(args, c.Args...)
	case len(c.Args) > 0:
		args = append(args, img.Entrypoint...)
		args = append(args, c.Args...)
	default:
		args = append(args, img.Entrypoint...)
		args = append(args, img.Cmd...)
	}
	return args
}

// env merges the image's environment with the container's; the container's
// value wins for a name both set, and PATH is always present.
func env(image []string, vars []v1.EnvVar) []string {
	out := make([]string, 0, len(image)+len(vars)+1)
	index := map[string]int{}
	set := func(name, kv string) {
		if i, ok := index[name]; ok {
			out[i] = kv
			return
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	for _, kv := range image {
		name, _, _ := strings.Cut(kv, "=")
		set(name, kv)
	}
	for _, e := range vars {
		set(e.Name, e.Name+"="+e.Value)
	}
	if _, ok := index["PATH"]; !ok {
		out = append(out, defaultPath)
	}
	return out
}

// processUser resolves the numeric user the process runs as: the security
// context's runAsUser and runAsGroup over the image's USER.
func processUser(p *pod.Pod, c *v1.Container, imageUser string) (specs.User, error) {
	var u specs.User
	runAsUser := false
	for _, sc := range securityContexts(p, c) {
		runAsUser = runAsUser || sc.runAsUser != nil
	}
	// runAsUser overrides the image's USER, which then need not be numeric.
	if imageUser != "" && !runAsUser {
		name, group, _ := strings.Cut(imageUser, ":")
		switch uid, err := strconv.ParseUint(name, 10, 32); {
		case err == nil:
			u.UID = uint32(uid)
		case name == "root":
		default:
			return u, fmt.Errorf("image user %q is not numeric; staticlet needs a numeric uid or runAsUser", imageUser)
		}
		if group != "" {
			gid, err := strconv.ParseUint(group, 10, 32)
			if err != nil && group != "root" {
				return u, fmt.Errorf("image group %q is not numeric", group)
			}
			u.GID = uint32(gid)
		}
	}
	for _, sc := range securityContexts(p, c) {
		if sc.runAsUser != nil {
			u.UID = uint32(*sc.runAsUser)
		}
		if sc.runAsGroup != nil {
			u.GID = uint32(*sc.runAsGroup)
		}
	}
	if psc := p.Spec.SecurityContext; psc != nil {
		for _, g := range psc.SupplementalGroups {
			u.AdditionalGids = append(u.AdditionalGids, uint32(g))
		}
	}
	return u, nil
}

type userSettings struct{ runAsUser, runAsGroup *int64 }

// securityContexts lists the pod's then the container's user settings, so
// that applying them in order lets the container's win.
func securityContexts(p *pod.Pod, c *v1.Container) []userSettings {
	var out []userSettings
	if psc := p.Spec.SecurityContext; psc != nil {
		out = append(out, userSettings{psc.RunAsUser, psc.RunAsGroup})
	}
	if sc := c.SecurityContext; sc != nil {
		out = append(out, userSettings{sc.RunAsUser, sc.RunAsGroup})
	}
	return out
}

// applySecurity sets privileges, capabilities and the read-only root from
// the container's security context.
func applySecurity(s *specs.Spec, c *v1.Container, hostCaps []string) {
	if hostCaps == nil {
		hostCaps = allCaps
	}
	sc := c.SecurityContext
	if sc != nil && sc.Privileged != nil && *sc.Privileged {
		s.Process.Capabilities = capSet(hostCaps)
		s.Linux.MaskedPaths = nil
		s.Linux.ReadonlyPaths = nil
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		for i := range s.Mounts {
			if s.Mounts[i].Destination == "/sys" || s.Mounts[i].Destination == "/sys/fs/cgroup" {
				s.Mounts[i].Options = removeOption(s.Mounts[i].Options, "ro")
			}
		}
		return
	}
	caps := append([]string(nil), defaultCaps...)
	if sc != nil && sc.Capabilities != nil {
		caps = adjustCaps(caps, sc.Capabilities.Add, sc.Capabilities.Drop, hostCaps)
	}
	s.Process.Capabilities = capSet(caps)
	if sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		s.Root.Readonly = true
	}
	if sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		s.Process.NoNewPrivileges = true
	}
}

// adjustCaps adds and then drops capabilities, accepting the names with or
// without the CAP_ prefix and "ALL" as Kubernetes does.
func adjustCaps(caps []string, add, drop []v1.Capability, all []string) []string {
	// The order container runtimes use: add ALL, drop ALL, then the single
	// adds, then the single drops, so that "drop ALL, add X" leaves X.
	set := map[string]bool{}
	for _, c := range caps {
		set[c] = true
	}
	isAll := func(c v1.Capability) bool { return strings.EqualFold(string(c), "ALL") }
	if slices.ContainsFunc(add, isAll) {
		for _, a := range all {
			set[a] = true
		}
	}
	if slices.ContainsFunc(drop, isAll) {
		clear(set)
	}
	for _, c := range add {
		if !isAll(c) {
			set[capName(c)] = true
		}
	}
	for _, c := range drop {
		if !isAll(c) {
			delete(set, capName(c))
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func capName(c v1.Capability) string {
	n := strings.ToUpper(string(c))
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	return n
}

func capSet(caps []string) *specs.LinuxCapabilities {
	return &specs.LinuxCapabilities{
		Bounding:  caps,
		Effective: caps,
		Permitted: caps,
	}
}

func removeOption(opts []string, o string) []string {
	out := opts[:0:0]
	for _, x := range opts {
		if x != o {
			out = append(out, x)
		}
	}
	return out
}

// containerNamespaces joins the pod's namespaces, and the sandbox's PID
// namespace when the pod shares one.
func containerNamespaces(p *pod.Pod, pinned map[specs.LinuxNamespaceType]string, sandboxPID uint32) []specs.LinuxNamespace {
	ns := podNamespaces(p, pinned)
	// A namespace that is not pinned is the sandbox process's own.
	names := map[specs.LinuxNamespaceType]string{specs.NetworkNamespace: "net", specs.UTSNamespace: "uts", specs.IPCNamespace: "ipc"}
	for i := range ns {
		if name, ok := names[ns[i].Type]; ok && ns[i].Path == "" && sandboxPID != 0 {
			ns[i].Path = fmt.Sprintf("/proc/%d/ns/%s", sandboxPID, name)
		}
	}
	switch {
	case p.Spec.HostPID:
	case p.Spec.ShareProcessNamespace != nil && *p.Spec.ShareProcessNamespace:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: fmt.Sprintf("/proc/%d/ns/pid", sandboxPID)})
	default:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	return ns
}

// base is the spec every sandbox and container starts from.
func base() *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Cwd: "/",
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024},
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		},
		Linux: &specs.Linux{
			MaskedPaths:   append([]string(nil), maskedPaths...),
			ReadonlyPaths: append([]string(nil), readonlyPaths...),
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
		},
	}
}
