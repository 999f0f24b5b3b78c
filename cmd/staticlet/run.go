package main

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/staticlet/staticlet/internal/cli"
	"github.com/staticlet/staticlet/internal/devices"
	"github.com/staticlet/staticlet/internal/images"
	"github.com/staticlet/staticlet/internal/kubeletconfig"
	"github.com/staticlet/staticlet/internal/nodeshutdown"
)

// runConfig is the daemon's configuration, from flags and --config: the
// settings of the daemon as a whole, then one group per component.
type runConfig struct {
	configFile  string
	configNotes *kubeletconfig.File // what --config has to say, logged once there is a logger
	logLevel    string
	nodeName    string
	rootDir     string
	maxPods     int

	node      nodeConfig
	dirSource dirSourceConfig
	urlSource urlSourceConfig
	runtime   runtimeConfig
	images    imageConfig
	logs      containerLogConfig
	network   podNetworkConfig
	status    statusConfig
	// shutdown holds the grace periods; runDaemon adds the rest.
	shutdown nodeshutdown.Config
}

// dirSourceConfig configures the manifest directory source. Its period
// is also the reconciler's and the image directory's resync.
type dirSourceConfig struct {
	path               string // a directory or one file
	fileCheckFrequency time.Duration
}

// urlSourceConfig configures the manifest URL source, which --config's
// staticPodURL, staticPodURLHeader and httpCheckFrequency also set.
type urlSourceConfig struct {
	url                string   // none if empty
	headers            []string // "Name:Value"
	caFile             string
	httpCheckFrequency time.Duration
}

// runtimeConfig configures the containerd runtime (sandbox.Config) beyond
// images, logs and the network.
type runtimeConfig struct {
	containerdAddress string // unix:// optional
	containerdNS      string
	resolvConf        string
	unsafeSysctls     []string
	cgroupsPerQOS     bool
	cgroupDriver      string // cgroupfs or systemd
	podPidsLimit      int64  // -1: none
	cdiSpecDirs       []string
}

// imageConfig configures where images come from: registries, the
// archives imported from a directory, and other containerd namespaces.
type imageConfig struct {
	credentials       string
	registryConfigDir string
	importDir         string   // default <root-dir>/images
	namespaces        []string // none if empty
	gc                images.GCPolicy
}

// containerLogConfig configures containers' logs: where they are written
// (and read back from by the status socket), and their rotation.
type containerLogConfig struct {
	dir      string
	maxSize  string // a quantity
	maxFiles int
	maxTotal string // a quantity; 0: no node-wide budget
}

// podNetworkConfig is the pod network as given, before networkConfig
// checks it.
type podNetworkConfig struct {
	bridge     string
	cidrs      []string
	masquerade bool
	nftTable   string
}

// statusConfig configures the status socket and the TCP healthz and
// metrics endpoints.
type statusConfig struct {
	socket         string
	group          string // may read the socket; root only if empty
	healthzAddress string // off if empty
	metricsAddress string // off if empty
	apiAddress     string // the Kubernetes API; off if empty
}

// defaultPodCIDR is the pod range when --pod-cidr is not given. It is
// clear of docker's bridge (172.17.0.0/16) and address pools
// (172.17-31.0.0/16, 192.168.0.0/16), podman's 10.88.0.0/16 and the
// 10.89.x.0/24 networks it creates next, cri-o's 10.85.0.0/16, flannel's
// 10.244.0.0/16, k3s's 10.42.0.0/16 and kubeadm's service range
// 10.96.0.0/12, so that staticlet can share a node with any of them; a /24
// holds 253 pods, twice the kubelet's default maxPods.
const defaultPodCIDR = "10.213.0.0/24"

func runCommand() *cobra.Command {
	return runCommandFor(new(runConfig))
}

// runCommandFor is staticlet run with its flags set in cfg.
func runCommandFor(cfg *runConfig) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pods whose manifests are in --manifest-dir (the daemon)",
		Long: `run watches --manifest-dir (a directory of Pod manifests, or one file) and
keeps a pod running through containerd for each Pod it defines, and for
each Pod --manifest-url serves, if given. Editing a file updates its pod;
removing it stops the pod. Stopping staticlet leaves
the pods running; starting it again adopts them without restarting them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadKubeletConfig(cmd.Flags(), cfg); err != nil {
				return err
			}
			return runDaemon(cmd.Context(), *cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.dirSource.path, "manifest-dir", "/etc/kubernetes/manifests", "directory of Pod manifests, or one manifest file")
	f.DurationVar(&cfg.dirSource.fileCheckFrequency, "file-check-frequency", 20*time.Second, "how often the manifest directory is re-read in full")
	f.StringVar(&cfg.runtime.containerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd's socket (unix:// optional)")
	f.StringVar(&cfg.runtime.containerdNS, "containerd-namespace", "staticlet", "containerd namespace for staticlet's containers")
	f.StringVar(&cfg.rootDir, "root-dir", cli.DefaultRootDir, "directory for pod state")
	f.StringVar(&cfg.status.socket, "status-socket", cli.DefaultStatusSocket, "unix socket serving the status API")
	f.StringVar(&cfg.status.group, "status-socket-group", "", "group allowed to read the status socket (mode 0660); root only if empty")
	f.StringVar(&cfg.logs.dir, "pod-logs-dir", "/var/log/pods", "directory for container logs")
	f.StringVar(&cfg.logs.maxSize, "container-log-max-size", "10Mi", "size at which a container's log file is rotated (a quantity: 10Mi, 500Ki)")
	f.IntVar(&cfg.logs.maxFiles, "container-log-max-files", 5, "log files kept per container, the live one included (at least 2)")
	f.StringVar(&cfg.logs.maxTotal, "pod-logs-max-total", "0", "node-wide cap on the bytes of every container's log files under --pod-logs-dir: over it, the oldest rotated files "+
		"(then earlier instances' logs) of any container are removed; live files never (a quantity: 2Gi; 0: no cap)")
	f.StringVar(&cfg.nodeName, "node-name", "", "node name appended to pod names (default: the host name)")
	f.StringVar(&cfg.node.ip, "node-ip", "", "the node's IP address, or a comma-separated dual-stack pair (one IPv4, one IPv6): its InternalIPs and the pods' hostIPs "+
		"(and podIPs on the host's network); each must be an address of this host, not loopback or link-local. "+
		"0.0.0.0 or :: picks the default route's address of that family (default: the default route's, IPv4 first)")
	f.StringSliceVar(&cfg.node.labels, "node-labels", nil, "labels 'key=value' added to the node's, comma-separated; under kubernetes.io and k8s.io only the kubelet's own "+
		"(kubernetes.io/hostname, topology, instance type, os, arch) and those under node.kubernetes.io and kubelet.kubernetes.io")
	f.StringVar(&cfg.runtime.resolvConf, "resolv-conf", "/etc/resolv.conf", "resolver configuration that pods' /etc/resolv.conf starts from")
	f.StringSliceVar(&cfg.runtime.unsafeSysctls, "allowed-unsafe-sysctls", nil, "sysctls outside the safe set that pods may set (patterns like 'kernel.msg*' allowed)")
	f.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&cfg.network.bridge, "pod-bridge", "staticlet0", "host bridge that pods off the host network are connected to")
	f.StringSliceVar(&cfg.network.cidrs, "pod-cidr", []string{defaultPodCIDR}, "pod address range; repeat or comma-separate an IPv4 and an IPv6 range for dual stack")
	f.BoolVar(&cfg.network.masquerade, "masquerade", true, "masquerade pods' traffic to outside the pod ranges behind the host's address (enables IP forwarding)")
	f.StringVar(&cfg.network.nftTable, "nftables-table", "staticlet", "nftables table (family inet) for the masquerade and hostPort rules")
	f.StringVar(&cfg.urlSource.url, "manifest-url", "", "URL polled for Pod manifests, besides --manifest-dir")
	f.StringArrayVar(&cfg.urlSource.headers, "manifest-url-header", nil, "header 'Name:Value' sent with every --manifest-url request (repeatable; values are never logged)")
	f.DurationVar(&cfg.urlSource.httpCheckFrequency, "http-check-frequency", 20*time.Second, "how often --manifest-url is polled (less up to a fifth, at random)")
	f.StringVar(&cfg.urlSource.caFile, "manifest-url-ca", "", "PEM file of the CAs an https --manifest-url is verified against, instead of the system's")
	f.StringVar(&cfg.configFile, "config", "", "a kubelet.config.k8s.io/v1beta1 KubeletConfiguration file; flags given on the command line win over it")
	f.StringVar(&cfg.status.apiAddress, "api-address", "", "host:port serving the Kubernetes API over TLS, for kubectl, k9s and client-go (e.g. 6443; a port alone is on 127.0.0.1; certificates under --root-dir/api, `staticlet kubeconfig` prints a kubeconfig); off if empty")
	f.StringVar(&cfg.status.healthzAddress, "healthz-address", "", "host:port serving GET /healthz over TCP (e.g. 127.0.0.1:10248; a port alone is on 127.0.0.1); off if empty")
	f.StringVar(&cfg.status.metricsAddress, "metrics-address", "", "host:port serving GET /metrics (Prometheus) over TCP (e.g. 127.0.0.1:10255; a port alone is on 127.0.0.1); off if empty. "+
		"The status socket always serves it")
	f.StringVar(&cfg.images.credentials, "image-credentials", "", "docker config.json with registry credentials, read instead of the kubelet's search path (--root-dir, ~/.docker, /.docker)")
	f.StringVar(&cfg.images.registryConfigDir, "registry-config-dir", "", "directory of containerd-style HOST/hosts.toml files: mirrors, CA files, plain HTTP")
	f.StringVar(&cfg.images.importDir, "image-import-dir", "", "directory of image archives (docker save, OCI; plain, gzip or zstd) and OCI layouts imported into containerd (default <root-dir>/images)")
	f.StringSliceVar(&cfg.images.namespaces, "image-namespaces", []string{"k8s.io"}, "other containerd namespaces whose images are used, without a pull, when staticlet's lacks one "+
		"(k8s.io: kubeadm's and crictl's pulls); comma-separated, empty for none")
	f.IntVar(&cfg.images.gc.HighThresholdPercent, "image-gc-high-threshold", images.DefaultGCHighThresholdPercent,
		"percent of the image filesystem's space used at or above which unused images are removed, least recently used first; 100 with no --image-maximum-gc-age turns image garbage collection off")
	f.IntVar(&cfg.images.gc.LowThresholdPercent, "image-gc-low-threshold", images.DefaultGCLowThresholdPercent,
		"percent of the image filesystem's space used that removing images for space brings it down to (below --image-gc-high-threshold)")
	f.DurationVar(&cfg.images.gc.MinAge, "image-minimum-gc-age", images.DefaultGCMinimumAge, "how long an image stays on the node before it may be removed for space")
	f.DurationVar(&cfg.images.gc.MaxAge, "image-maximum-gc-age", 0, "remove an unused image not used for longer than this, however much space is free (0: off)")
	f.DurationVar(&cfg.shutdown.GracePeriod, "shutdown-grace-period", 0, "how long the machine's shutdown waits for the pods to stop, through a systemd-logind delay inhibitor lock (0: off)")
	f.DurationVar(&cfg.shutdown.CriticalGracePeriod, "shutdown-grace-period-critical-pods", 0,
		"the part of --shutdown-grace-period kept for critical pods (system-node-critical and system-cluster-critical), stopped last")
	f.StringVar(&cfg.runtime.cgroupDriver, "cgroup-driver", "cgroupfs", "how pod and container cgroups are made: cgroupfs (staticlet and runc write them) or systemd "+
		"(slices under <containerd namespace>.slice and container scopes, through systemd, as the kubelet's systemd driver; needs systemd as the init system)")
	f.Int64Var(&cfg.runtime.podPidsLimit, "pod-max-pids", -1, "most processes each pod may have (its cgroup's pids.max); -1: no limit")
	f.BoolVar(&cfg.runtime.cgroupsPerQOS, "cgroups-per-qos", true, "make a cgroup per QoS class and per pod, as the kubelet does; false puts containers' cgroups directly under /<containerd namespace>")
	f.StringSliceVar(&cfg.runtime.cdiSpecDirs, "cdi-spec-dirs", devices.DefaultSpecDirs(), "directories of CDI device specs (as containerd's cdi_spec_dirs), watched for changes; "+
		"containers get their devices by resources.limits (vendor.com/class: N) or the pod's cdi.k8s.io/ annotations; comma-separated, later ones win on a conflict")
	f.Var(newEvictionHardFlag(&cfg.node.evictionHard), "eviction-hard", "hard eviction thresholds, comma-separated signal<value, under which the node reports DiskPressure "+
		"(no pod is evicted): nodefs.available (a percentage of --root-dir's and --pod-logs-dir's filesystems, or bytes: 1Gi) and nodefs.inodesFree "+
		"(a percentage, or a count); a signal not given, or 0, 0% or 100%, is not checked. The kubelet's other signals are accepted and have no effect")
	f.IntVar(&cfg.maxPods, "max-pods", 0, "most pods run at once; the others are refused with an OutOfpods event (0: no limit)")
	// The kubelet's names, so that its habits and unit files carry over.
	alias(f, "pod-manifest-path", "manifest-dir")
	alias(f, "container-runtime-endpoint", "containerd-address")
	alias(f, "hostname-override", "node-name")
	alias(f, "minimum-image-ttl-duration", "image-minimum-gc-age")
	return cmd
}

// alias makes the kubelet's flag name old set the same value as name.
func alias(f *pflag.FlagSet, old, name string) {
	target := f.Lookup(name)
	f.Var(target.Value, old, "alias of --"+name)
	f.Lookup(old).Hidden = true
}
