package main

import (
	"encoding/json"
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

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// The kubelet's config file (--config): a kubelet.config.k8s.io/v1beta1
// KubeletConfiguration. It is decoded into kubeletConfig, which holds only
// the fields that mean something to staticlet, rather than into the
// kubelet's own type: k8s.io/kubelet would bring k8s.io/component-base
// (logging, feature gates, tracing) into the build for about fifteen fields.
// The other fields are known by name (kubeletOnlyFields) so that a field
// staticlet ignores can be told from a misspelt one.
//
// Decoding follows the kubelet's: a wrong type is an error; an unknown field
// is a warning, as the kubelet's lenient fallback for v1beta1 makes it; a
// zero value ("0s", 0, "", {}) means "the default", as the kubelet's
// defaulting treats it, so kubeadm's file full of "0s" changes nothing.
// Flags given on the command line win over the file; the file wins over the
// flags' defaults.

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
	// The critical pods' part of ShutdownGracePeriod.
	ShutdownGracePeriodCriticalPods duration `json:"shutdownGracePeriodCriticalPods"`
}

// honouredFields are kubeletConfig's JSON names, apiVersion and kind aside.
var honouredFields = []string{
	"staticPodPath", "staticPodURL", "staticPodURLHeader", "fileCheckFrequency",
	"httpCheckFrequency", "containerRuntimeEndpoint", "podLogsDir", "containerLogMaxSize",
	"containerLogMaxFiles", "healthzBindAddress", "healthzPort", "cgroupDriver", "cgroupsPerQOS",
	"shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "maxPods", "podCIDR", "resolvConf",
	"allowedUnsafeSysctls", "podPidsLimit",
}

// kubeletOnlyFields are the other fields of KubeletConfiguration v1beta1:
// they configure what staticlet does not have (the kubelet's API server and
// its authentication, the apiserver client, node registration, eviction,
// image garbage collection, resource managers...) and are ignored with one
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
	"nodeStatusReportFrequency", "nodeLeaseDurationSeconds", "imageMinimumGCAge",
	"imageMaximumGCAge", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
	"volumeStatsAggPeriod", "kubeletCgroups", "systemCgroups", "cgroupRoot",
	"cpuManagerPolicy", "singleProcessOOMKill", "cpuManagerPolicyOptions",
	"cpuManagerReconcilePeriod", "memoryManagerPolicy", "topologyManagerPolicy",
	"topologyManagerScope", "topologyManagerPolicyOptions", "qosReserved",
	"runtimeRequestTimeout", "hairpinMode", "runOnce", "cpuCFSQuota",
	"cpuCFSQuotaPeriod", "nodeStatusMaxImages", "maxOpenFiles", "contentType", "kubeAPIQPS",
	"kubeAPIBurst", "serializeImagePulls", "maxParallelImagePulls", "evictionHard",
	"evictionSoft", "evictionSoftGracePeriod", "evictionPressureTransitionPeriod",
	"evictionMaxPodGracePeriod", "evictionMinimumReclaim", "mergeDefaultEvictionSettings",
	"podsPerCore", "enableControllerAttachDetach", "protectKernelDefaults",
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

// configFile is a decoded --config file: the values staticlet honours and
// what it has to say about the rest.
type configFile struct {
	path string
	kc   kubeletConfig
	// ignored are the kubelet's fields set to a non-default value that
	// mean nothing here; unknown are fields KubeletConfiguration does not
	// have. Both sorted.
	ignored, unknown []string
	// warnings are other things to log once, each a whole message.
	warnings []string
}

// parseKubeletConfig decodes data, the content of the file at path.
func parseKubeletConfig(path string, data []byte) (*configFile, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil {
		return nil, fmt.Errorf("config file %s: want a KubeletConfiguration object: %w", path, err)
	}
	cf := &configFile{path: path}
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
				cf.ignored = append(cf.ignored, name)
			}
		default:
			cf.unknown = append(cf.unknown, name)
		}
	}
	sort.Strings(cf.ignored)
	sort.Strings(cf.unknown)
	switch cf.kc.CgroupDriver {
	case "", "cgroupfs", "systemd":
	default:
		return nil, fmt.Errorf("config file %s: cgroupDriver %q: want cgroupfs or systemd", path, cf.kc.CgroupDriver)
	}
	if cf.kc.MaxPods < 0 {
		return nil, fmt.Errorf("config file %s: maxPods %d: must not be negative", path, cf.kc.MaxPods)
	}
	if err := checkShutdownGrace(time.Duration(cf.kc.ShutdownGracePeriod), time.Duration(cf.kc.ShutdownGracePeriodCriticalPods)); err != nil {
		return nil, fmt.Errorf("config file %s: shutdownGracePeriod %v, shutdownGracePeriodCriticalPods %v: %w",
			path, time.Duration(cf.kc.ShutdownGracePeriod), time.Duration(cf.kc.ShutdownGracePeriodCriticalPods), err)
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

// loadKubeletConfig reads the --config file, if one is given, into cfg
// wherever the matching flag was not given on the command line.
func loadKubeletConfig(flags *pflag.FlagSet, cfg *runConfig) error {
	if cfg.configFile == "" {
		return nil
	}
	data, err := os.ReadFile(cfg.configFile)
	if err != nil {
		return fmt.Errorf("reading --config: %w", err)
	}
	cf, err := parseKubeletConfig(cfg.configFile, data)
	if err != nil {
		return err
	}
	cf.apply(func(flag string) bool { return flagChanged(flags, flag) }, cfg)
	cfg.configNotes = cf
	return nil
}

// apply sets cfg from the file except where changed(flag) says the flag
// was given. Paths in the file are relative to its directory, as with the
// kubelet.
func (cf *configFile) apply(changed func(flag string) bool, cfg *runConfig) {
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
	set("manifest-dir", kc.StaticPodPath != "", func() { cfg.dirSource.path = rel(kc.StaticPodPath) })
	set("manifest-url", kc.StaticPodURL != "", func() { cfg.urlSource.url = kc.StaticPodURL })
	set("manifest-url-header", len(kc.StaticPodURLHeader) > 0, func() {
		cfg.urlSource.headers = urlHeaders(kc.StaticPodURLHeader)
	})
	set("file-check-frequency", kc.FileCheckFrequency > 0, func() {
		cfg.dirSource.fileCheckFrequency = time.Duration(kc.FileCheckFrequency)
	})
	set("http-check-frequency", kc.HTTPCheckFrequency > 0, func() {
		cfg.urlSource.httpCheckFrequency = time.Duration(kc.HTTPCheckFrequency)
	})
	set("containerd-address", kc.ContainerRuntimeEndpoint != "", func() { cfg.runtime.containerdAddress = kc.ContainerRuntimeEndpoint })
	set("pod-logs-dir", kc.PodLogsDir != "", func() { cfg.logs.dir = rel(kc.PodLogsDir) })
	set("container-log-max-size", kc.ContainerLogMaxSize != "", func() { cfg.logs.maxSize = kc.ContainerLogMaxSize })
	set("container-log-max-files", kc.ContainerLogMaxFiles != nil, func() { cfg.logs.maxFiles = int(*kc.ContainerLogMaxFiles) })
	set("healthz-address", kc.HealthzBindAddress != "" || kc.HealthzPort != nil, func() {
		cfg.status.healthzAddress = healthzAddress(kc.HealthzBindAddress, kc.HealthzPort)
	})
	set("shutdown-grace-period", kc.ShutdownGracePeriod > 0, func() {
		cfg.shutdown.GracePeriod = time.Duration(kc.ShutdownGracePeriod)
	})
	set("shutdown-grace-period-critical-pods", kc.ShutdownGracePeriodCriticalPods > 0, func() {
		cfg.shutdown.CriticalGracePeriod = time.Duration(kc.ShutdownGracePeriodCriticalPods)
	})
	set("max-pods", kc.MaxPods > 0, func() { cfg.maxPods = int(kc.MaxPods) })
	set("pod-max-pids", kc.PodPidsLimit != nil, func() { cfg.runtime.podPidsLimit = *kc.PodPidsLimit })
	// false is not "the default" here: the kubelet's field is a pointer.
	set("cgroup-driver", kc.CgroupDriver != "", func() { cfg.runtime.cgroupDriver = kc.CgroupDriver })
	set("cgroups-per-qos", kc.CgroupsPerQOS != nil, func() { cfg.runtime.cgroupsPerQOS = *kc.CgroupsPerQOS })
	set("pod-cidr", kc.PodCIDR != "", func() { cfg.network.cidrs = strings.Split(kc.PodCIDR, ",") })
	set("resolv-conf", kc.ResolverConfig != nil, func() {
		// The kubelet reads "" as "no DNS from the host": an empty file
		// gives pods no host resolvers.
		cfg.runtime.resolvConf = rel(*kc.ResolverConfig)
		if cfg.runtime.resolvConf == "" {
			cfg.runtime.resolvConf = os.DevNull
		}
	})
	set("allowed-unsafe-sysctls", len(kc.AllowedUnsafeSysctls) > 0, func() { cfg.runtime.unsafeSysctls = kc.AllowedUnsafeSysctls })
}

// flagChanged tells whether flag, or a kubelet alias of it (which shares
// its Value), was given on the command line. A flag this build lacks was
// not.
func flagChanged(flags *pflag.FlagSet, name string) bool {
	target := flags.Lookup(name)
	if target == nil {
		return false
	}
	changed := false
	flags.Visit(func(f *pflag.Flag) {
		if f.Value == target.Value {
			changed = true
		}
	})
	return changed
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

// log writes what the file had to say, once: one warning naming every
// ignored and unknown field, and the other warnings.
func (cf *configFile) log(logger *slog.Logger) {
	if cf == nil {
		return
	}
	if len(cf.ignored) > 0 || len(cf.unknown) > 0 {
		attrs := []any{"file", cf.path}
		if len(cf.ignored) > 0 {
			attrs = append(attrs, "ignored", strings.Join(cf.ignored, ","))
		}
		if len(cf.unknown) > 0 {
			attrs = append(attrs, "unknown", strings.Join(cf.unknown, ","))
		}
		logger.Warn("kubelet config fields without meaning for staticlet are ignored", attrs...)
	}
	for _, w := range cf.warnings {
		logger.Warn(w, "file", cf.path)
	}
}

// listenTCP listens on addr, the value of --flag (--healthz-address,
// --metrics-address); nil when there is none. It listens before anything
// runs so that a taken port fails the start.
func listenTCP(flag, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", loopbackDefault(addr))
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return ln, nil
}

// loopbackDefault completes a TCP address without a host ("10248",
// ":10248") with 127.0.0.1: the endpoint is loopback unless an address
// (0.0.0.0 for all) is written out.
func loopbackDefault(addr string) string {
	if _, err := strconv.Atoi(addr); err == nil {
		return net.JoinHostPort(kubeletHealthzBindAddress, addr)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort(kubeletHealthzBindAddress, port)
	}
	return addr
}
