// Package kubeletconfig reads the kubelet's config file (staticlet run
// --config): a kubelet.config.k8s.io/v1beta1 KubeletConfiguration, and
// sets from it the variables behind run's flags that the command line
// did not set. It does no I/O but for the logger it is handed: the caller
// reads the file. The file is decoded into kubeletConfig, which holds only
// the fields that mean something to staticlet, rather than into the
// kubelet's own type: k8s.io/kubelet would bring k8s.io/component-base
// (logging, feature gates, tracing) into the build for about fifteen fields.
// The other fields are known by name (kubeletOnlyFields) so that a field
// staticlet ignores can be told from a misspelt one.
//
// Decoding follows the kubelet's: a wrong type is an error; an unknown field
// is a warning, as the kubelet's lenient fallback for v1beta1 makes it; a
// zero value ("0s", 0, "", {}) means "the default", as the kubelet's
// defaulting treats it, so kubeadm's file full of "0s" changes nothing
// (evictionHard aside: the kubelet defaults it only when it is absent, so
// {} there checks no threshold).
// Flags given on the command line win over the file; the file wins over the
// flags' defaults.
package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/staticlet/staticlet/internal/diskpressure"
)

const (
	kubeletConfigAPIVersion = "kubelet.config.k8s.io/v1beta1"
	kubeletConfigKind       = "KubeletConfiguration"
	// kubeletHealthzPort is the kubelet's healthzPort when the file sets
	// only healthzBindAddress.
	kubeletHealthzPort = 10248
	// kubeletHealthzBindAddress is the kubelet's healthzBindAddress when
	// the file sets only healthzPort.
	kubeletHealthzBindAddress = "127.0.0.1"
)

// kubeletConfig is the part of a KubeletConfiguration that staticlet
// honours, with the kubelet's JSON names and types. It is outsized as the
// file format is: one field for each setting of the kubelet's that
// staticlet reads.
type kubeletConfig struct {
	APIVersion               string              `json:"apiVersion"`
	Kind                     string              `json:"kind"`
	StaticPodPath            string              `json:"staticPodPath"`
	StaticPodURL             string              `json:"staticPodURL"`
	StaticPodURLHeader       map[string][]string `json:"staticPodURLHeader"`
	FileCheckFrequency       duration            `json:"fileCheckFrequency"`
	HTTPCheckFrequency       duration            `json:"httpCheckFrequency"`
	ContainerRuntimeEndpoint string              `json:"containerRuntimeEndpoint"`
	PodLogsDir               string              `json:"podLogsDir"`
	ContainerLogMaxSize      string              `json:"containerLogMaxSize"`
	ContainerLogMaxFiles     *int32              `json:"containerLogMaxFiles"`
	HealthzBindAddress       string              `json:"healthzBindAddress"`
	HealthzPort              *int32              `json:"healthzPort"`
	CgroupDriver             string              `json:"cgroupDriver"`
	CgroupsPerQOS            *bool               `json:"cgroupsPerQOS"`
	ShutdownGracePeriod      duration            `json:"shutdownGracePeriod"`
	MaxPods                  int32               `json:"maxPods"`
	PodCIDR                  string              `json:"podCIDR"`
	ResolverConfig           *string             `json:"resolvConf"`
	AllowedUnsafeSysctls     []string            `json:"allowedUnsafeSysctls"`
	PodPidsLimit             *int64              `json:"podPidsLimit"`
	// Image garbage collection; the thresholds are pointers in the
	// kubelet's type too: 0 is a value, not the default.
	ImageGCHighThresholdPercent *int32   `json:"imageGCHighThresholdPercent"`
	ImageGCLowThresholdPercent  *int32   `json:"imageGCLowThresholdPercent"`
	ImageMinimumGCAge           duration `json:"imageMinimumGCAge"`
	ImageMaximumGCAge           duration `json:"imageMaximumGCAge"`
	// EvictionHard is the hard eviction thresholds, signal to value,
	// of which staticlet watches nodefs's for disk pressure. As with
	// the kubelet, a map given (even {}) replaces the defaults: the
	// signals it does not name are not checked, unless
	// MergeDefaultEvictionSettings keeps their defaults.
	EvictionHard                 map[string]string `json:"evictionHard"`
	MergeDefaultEvictionSettings bool              `json:"mergeDefaultEvictionSettings"`
	// The critical pods' part of ShutdownGracePeriod.
	ShutdownGracePeriodCriticalPods duration `json:"shutdownGracePeriodCriticalPods"`
	// NodeLeaseDurationSeconds is the node Lease's length, which the
	// Kubernetes API (--api-address) serves.
	NodeLeaseDurationSeconds int32 `json:"nodeLeaseDurationSeconds"`
	// PodLogsMaxTotal is staticlet's own, not the kubelet's (which has
	// no node-wide log budget and warns of it as unknown): the cap on
	// all container logs, --pod-logs-max-total.
	PodLogsMaxTotal string `json:"podLogsMaxTotal"`
}

// honouredFields are kubeletConfig's JSON names, apiVersion and kind aside.
var honouredFields = []string{
	"staticPodPath", "staticPodURL", "staticPodURLHeader", "fileCheckFrequency",
	"httpCheckFrequency", "containerRuntimeEndpoint", "podLogsDir", "containerLogMaxSize",
	"containerLogMaxFiles", "healthzBindAddress", "healthzPort", "cgroupDriver", "cgroupsPerQOS",
	"shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "maxPods", "podCIDR", "resolvConf",
	"allowedUnsafeSysctls", "podPidsLimit", "podLogsMaxTotal", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
	"imageMinimumGCAge", "imageMaximumGCAge", "nodeLeaseDurationSeconds", "evictionHard",
	"mergeDefaultEvictionSettings",
}

// kubeletOnlyFields are the other fields of KubeletConfiguration v1beta1:
// they configure what staticlet does not have (the kubelet's API server and
// its authentication, the apiserver client, node registration, soft eviction,
// resource managers...) and are ignored with one
// warning naming them. cgroupRoot is here too: staticlet's pod cgroups are
// always under /<containerd namespace>.
var kubeletOnlyFields = []string{
	"enableServer", "syncFrequency", "address", "port", "readOnlyPort",
	"tlsCertFile", "tlsPrivateKeyFile", "tlsCipherSuites", "tlsCurvePreferences", "tlsMinVersion",
	"rotateCertificates", "serverTLSBootstrap", "authentication", "authorization",
	"registryPullQPS", "registryBurst", "imagePullCredentialsVerificationPolicy",
	"preloadedImagesVerificationAllowlist", "eventRecordQPS", "eventBurst",
	"enableDebuggingHandlers", "enableContentionProfiling", "oomScoreAdj", "clusterDomain",
	"clusterDNS", "streamingConnectionIdleTimeout", "nodeStatusUpdateFrequency",
	"nodeStatusReportFrequency", "volumeStatsAggPeriod", "kubeletCgroups", "systemCgroups", "cgroupRoot",
	"cpuManagerPolicy", "singleProcessOOMKill", "cpuManagerPolicyOptions",
	"cpuManagerReconcilePeriod", "memoryManagerPolicy", "topologyManagerPolicy",
	"topologyManagerScope", "topologyManagerPolicyOptions", "qosReserved",
	"runtimeRequestTimeout", "hairpinMode", "runOnce", "cpuCFSQuota",
	"cpuCFSQuotaPeriod", "nodeStatusMaxImages", "maxOpenFiles", "contentType", "kubeAPIQPS",
	"kubeAPIBurst", "serializeImagePulls", "maxParallelImagePulls", "evictionSoft",
	"evictionSoftGracePeriod", "evictionPressureTransitionPeriod", "evictionMaxPodGracePeriod",
	"evictionMinimumReclaim", "podsPerCore", "enableControllerAttachDetach", "protectKernelDefaults",
	"makeIPTablesUtilChains", "iptablesMasqueradeBit", "iptablesDropBit", "featureGates",
	"failSwapOn", "memorySwap", "containerLogMaxWorkers", "containerLogMonitorInterval",
	"configMapAndSecretChangeDetectionStrategy", "systemReserved", "kubeReserved",
	"reservedSystemCPUs", "showHiddenMetricsForVersion", "systemReservedCgroup",
	"kubeReservedCgroup", "enforceNodeAllocatable", "volumePluginDir", "providerID",
	"kernelMemcgNotification", "logging", "enableSystemLogHandler", "enableSystemLogQuery",
	"shutdownGracePeriodByPodPriority", "crashLoopBackOff",
	"reservedMemory", "enableProfilingHandler", "enableDebugFlagsHandler", "seccompDefault",
	"memoryThrottlingFactor", "registerWithTaints", "registerNode", "tracing",
	"localStorageCapacityIsolation", "imageServiceEndpoint", "failCgroupV1", "userNamespaces",
}

// duration is a metav1.Duration as JSON: a Go duration string.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"20s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// File is a decoded --config file: the values staticlet honours and
// what it has to say about the rest.
type File struct {
	path string
	kc   kubeletConfig
	// Ignored are the kubelet's fields set to a non-default value that
	// mean nothing here; Unknown are fields KubeletConfiguration does not
	// have. Both sorted.
	Ignored, Unknown []string
	// Warnings are other things to log once, each a whole message.
	Warnings []string
}

// Parse decodes data, the content of the file at path. An error names
// the file.
func Parse(path string, data []byte) (*File, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil {
		return nil, fmt.Errorf("config file %s: want a KubeletConfiguration object: %w", path, err)
	}
	cf := &File{path: path}
	if err := json.Unmarshal(js, &cf.kc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, jsonFieldError(err))
	}
	if cf.kc.APIVersion != kubeletConfigAPIVersion || cf.kc.Kind != kubeletConfigKind {
		return nil, fmt.Errorf("config file %s: apiVersion %q, kind %q: want apiVersion %s, kind %s",
			path, cf.kc.APIVersion, cf.kc.Kind, kubeletConfigAPIVersion, kubeletConfigKind)
	}
	for name, raw := range fields {
		switch {
		case name == "apiVersion" || name == "kind" || slices.Contains(honouredFields, name):
		case slices.Contains(kubeletOnlyFields, name):
			var v any
			if err := json.Unmarshal(raw, &v); err == nil && !zeroValue(v) {
				cf.Ignored = append(cf.Ignored, name)
			}
		default:
			cf.Unknown = append(cf.Unknown, name)
		}
	}
	sort.Strings(cf.Ignored)
	sort.Strings(cf.Unknown)
	switch cf.kc.CgroupDriver {
	case "", "cgroupfs", "systemd":
	default:
		return nil, fmt.Errorf("config file %s: cgroupDriver %q: want cgroupfs or systemd", path, cf.kc.CgroupDriver)
	}
	if cf.kc.MaxPods < 0 {
		return nil, fmt.Errorf("config file %s: maxPods %d: must not be negative", path, cf.kc.MaxPods)
	}
	if err := CheckShutdownGrace(time.Duration(cf.kc.ShutdownGracePeriod), time.Duration(cf.kc.ShutdownGracePeriodCriticalPods)); err != nil {
		return nil, fmt.Errorf("config file %s: shutdownGracePeriod %v, shutdownGracePeriodCriticalPods %v: %w",
			path, time.Duration(cf.kc.ShutdownGracePeriod), time.Duration(cf.kc.ShutdownGracePeriodCriticalPods), err)
	}
	// 0 is the default (40), as the kubelet's defaulting makes it before
	// its validation refuses what is not over 0.
	if cf.kc.NodeLeaseDurationSeconds < 0 {
		return nil, fmt.Errorf("config file %s: nodeLeaseDurationSeconds %d: must be greater than 0", path, cf.kc.NodeLeaseDurationSeconds)
	}
	if cf.kc.EvictionHard != nil {
		if _, _, err := diskpressure.ParseThresholds(cf.kc.EvictionHard); err != nil {
			return nil, fmt.Errorf("config file %s: evictionHard: %w", path, err)
		}
	}
	if p := cf.kc.HealthzPort; p != nil && (*p < 0 || *p > 65535) {
		return nil, fmt.Errorf("config file %s: healthzPort %d: want 0 (off) to 65535", path, *p)
	}
	return cf, nil
}

// jsonFieldError names the field of a type error in the file's terms.
func jsonFieldError(err error) error {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return fmt.Errorf("%s: cannot be a %s, want a %s", te.Field, te.Value, te.Type)
	}
	return err
}

// zeroValue tells whether a decoded JSON value is what the kubelet's
// defaulting treats as unset: null, false, 0, "", a zero duration or
// quantity, and objects and lists holding only such values.
func zeroValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		if v == "" || v == "0" {
			return true
		}
		d, err := time.ParseDuration(v)
		return err == nil && d == 0
	case map[string]any:
		for _, e := range v {
			if !zeroValue(e) {
				return false
			}
		}
		return true
	case []any:
		return len(v) == 0
	}
	return false
}

// Flags are the variables behind the flags of staticlet run that the file
// can set, each field named for its flag, and the settings only the file
// has (NodeLeaseDurationSeconds); Apply needs every one. It is
// outsized as the file format is: one field for each setting of the
// kubelet's that staticlet reads.
type Flags struct {
	ManifestDir                     *string
	ManifestURL                     *string
	ManifestURLHeader               *[]string // "Name:Value"
	FileCheckFrequency              *time.Duration
	HTTPCheckFrequency              *time.Duration
	ContainerdAddress               *string
	PodLogsDir                      *string
	ContainerLogMaxSize             *string
	ContainerLogMaxFiles            *int
	PodLogsMaxTotal                 *string
	HealthzAddress                  *string
	ShutdownGracePeriod             *time.Duration
	ShutdownGracePeriodCriticalPods *time.Duration
	MaxPods                         *int
	PodMaxPids                      *int64
	CgroupDriver                    *string
	CgroupsPerQOS                   *bool
	PodCIDR                         *[]string
	ResolvConf                      *string
	AllowedUnsafeSysctls            *[]string
	ImageGCHighThreshold            *int
	ImageGCLowThreshold             *int
	ImageMinimumGCAge               *time.Duration
	ImageMaximumGCAge               *time.Duration
	// EvictionHard is --eviction-hard's map, signal to value.
	EvictionHard *map[string]string
	// NodeLeaseDurationSeconds has no flag, as with the kubelet; left as
	// it is when the file does not set it.
	NodeLeaseDurationSeconds *int32
}

// Apply sets the variables of to from the file except where changed(flag)
// says the flag was given. Paths in the file are relative to its
// directory, as with the kubelet.
func (cf *File) Apply(changed func(flag string) bool, to Flags) {
	kc := &cf.kc
	dir := filepath.Dir(cf.path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	// set runs fn when the file has the value (ok) and flag was not given.
	set := func(flag string, ok bool, fn func()) {
		if ok && !changed(flag) {
			fn()
		}
	}
	set("manifest-dir", kc.StaticPodPath != "", func() { *to.ManifestDir = rel(kc.StaticPodPath) })
	set("manifest-url", kc.StaticPodURL != "", func() { *to.ManifestURL = kc.StaticPodURL })
	set("manifest-url-header", len(kc.StaticPodURLHeader) > 0, func() {
		*to.ManifestURLHeader = urlHeaders(kc.StaticPodURLHeader)
	})
	set("file-check-frequency", kc.FileCheckFrequency > 0, func() {
		*to.FileCheckFrequency = time.Duration(kc.FileCheckFrequency)
	})
	set("http-check-frequency", kc.HTTPCheckFrequency > 0, func() {
		*to.HTTPCheckFrequency = time.Duration(kc.HTTPCheckFrequency)
	})
	set("containerd-address", kc.ContainerRuntimeEndpoint != "", func() { *to.ContainerdAddress = kc.ContainerRuntimeEndpoint })
	set("pod-logs-dir", kc.PodLogsDir != "", func() { *to.PodLogsDir = rel(kc.PodLogsDir) })
	set("container-log-max-size", kc.ContainerLogMaxSize != "", func() { *to.ContainerLogMaxSize = kc.ContainerLogMaxSize })
	set("container-log-max-files", kc.ContainerLogMaxFiles != nil, func() { *to.ContainerLogMaxFiles = int(*kc.ContainerLogMaxFiles) })
	set("pod-logs-max-total", kc.PodLogsMaxTotal != "", func() { *to.PodLogsMaxTotal = kc.PodLogsMaxTotal })
	set("healthz-address", kc.HealthzBindAddress != "" || kc.HealthzPort != nil, func() {
		*to.HealthzAddress = healthzAddress(kc.HealthzBindAddress, kc.HealthzPort)
	})
	set("shutdown-grace-period", kc.ShutdownGracePeriod > 0, func() {
		*to.ShutdownGracePeriod = time.Duration(kc.ShutdownGracePeriod)
	})
	set("shutdown-grace-period-critical-pods", kc.ShutdownGracePeriodCriticalPods > 0, func() {
		*to.ShutdownGracePeriodCriticalPods = time.Duration(kc.ShutdownGracePeriodCriticalPods)
	})
	set("max-pods", kc.MaxPods > 0, func() { *to.MaxPods = int(kc.MaxPods) })
	set("pod-max-pids", kc.PodPidsLimit != nil, func() { *to.PodMaxPids = *kc.PodPidsLimit })
	// false is not "the default" here: the kubelet's field is a pointer.
	set("cgroup-driver", kc.CgroupDriver != "", func() { *to.CgroupDriver = kc.CgroupDriver })
	set("cgroups-per-qos", kc.CgroupsPerQOS != nil, func() { *to.CgroupsPerQOS = *kc.CgroupsPerQOS })
	set("pod-cidr", kc.PodCIDR != "", func() { *to.PodCIDR = strings.Split(kc.PodCIDR, ",") })
	set("resolv-conf", kc.ResolverConfig != nil, func() {
		// The kubelet reads "" as "no DNS from the host": an empty file
		// gives pods no host resolvers.
		*to.ResolvConf = rel(*kc.ResolverConfig)
		if *to.ResolvConf == "" {
			*to.ResolvConf = os.DevNull
		}
	})
	set("allowed-unsafe-sysctls", len(kc.AllowedUnsafeSysctls) > 0, func() { *to.AllowedUnsafeSysctls = kc.AllowedUnsafeSysctls })
	set("image-gc-high-threshold", kc.ImageGCHighThresholdPercent != nil, func() {
		*to.ImageGCHighThreshold = int(*kc.ImageGCHighThresholdPercent)
	})
	set("image-gc-low-threshold", kc.ImageGCLowThresholdPercent != nil, func() {
		*to.ImageGCLowThreshold = int(*kc.ImageGCLowThresholdPercent)
	})
	set("image-minimum-gc-age", kc.ImageMinimumGCAge > 0, func() { *to.ImageMinimumGCAge = time.Duration(kc.ImageMinimumGCAge) })
	set("image-maximum-gc-age", kc.ImageMaximumGCAge > 0, func() { *to.ImageMaximumGCAge = time.Duration(kc.ImageMaximumGCAge) })
	set("eviction-hard", kc.EvictionHard != nil, func() {
		*to.EvictionHard = kc.EvictionHard
		if kc.MergeDefaultEvictionSettings {
			*to.EvictionHard = diskpressure.MergeDefaults(kc.EvictionHard)
		}
	})
	if kc.NodeLeaseDurationSeconds > 0 {
		*to.NodeLeaseDurationSeconds = kc.NodeLeaseDurationSeconds
	}
}

// urlHeaders turns staticPodURLHeader into --manifest-url-header values,
// "Name:Value", one per value, in name order.
func urlHeaders(h map[string][]string) []string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		for _, v := range h[n] {
			out = append(out, n+":"+v)
		}
	}
	return out
}

// healthzAddress is the TCP address of healthzBindAddress and healthzPort,
// each defaulting as with the kubelet; port 0 turns the endpoint off ("").
func healthzAddress(host string, port *int32) string {
	p := int32(kubeletHealthzPort)
	if port != nil {
		p = *port
	}
	if p == 0 {
		return ""
	}
	if host == "" {
		host = kubeletHealthzBindAddress
	}
	return net.JoinHostPort(host, strconv.Itoa(int(p)))
}

// Log writes what the file had to say, once: one warning naming every
// ignored and unknown field, and the other warnings. A nil File says
// nothing.
func (cf *File) Log(logger *slog.Logger) {
	if cf == nil {
		return
	}
	if len(cf.Ignored) > 0 || len(cf.Unknown) > 0 {
		attrs := []any{"file", cf.path}
		if len(cf.Ignored) > 0 {
			attrs = append(attrs, "ignored", strings.Join(cf.Ignored, ","))
		}
		if len(cf.Unknown) > 0 {
			attrs = append(attrs, "unknown", strings.Join(cf.Unknown, ","))
		}
		logger.Warn("kubelet config fields without meaning for staticlet are ignored", attrs...)
	}
	for _, w := range cf.Warnings {
		logger.Warn(w, "file", cf.path)
	}
}

// CheckShutdownGrace validates the two shutdown grace periods as the
// kubelet does: neither negative, the critical pods' part no longer than
// the whole, each zero or at least a second.
func CheckShutdownGrace(total, critical time.Duration) error {
	switch {
	case total < 0 || critical < 0:
		return errors.New("must not be negative")
	case critical > total:
		return errors.New("the critical pods' part must not be longer than the whole")
	case (total > 0 && total < time.Second) || (critical > 0 && critical < time.Second):
		return errors.New("each must be zero or at least 1s")
	}
	return nil
}
