package main

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/staticlet/staticlet/internal/kubeletconfig"
)

// loopback is the host of a TCP endpoint whose address names none, as
// the kubelet's healthzBindAddress defaults.
const loopback = "127.0.0.1"

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
	cf, err := kubeletconfig.Parse(cfg.configFile, data)
	if err != nil {
		return err
	}
	cf.Apply(func(flag string) bool { return flagChanged(flags, flag) }, cfg.fileFlags())
	cfg.configNotes = cf
	return nil
}

// fileFlags are the variables behind the flags that --config can set.
func (cfg *runConfig) fileFlags() kubeletconfig.Flags {
	return kubeletconfig.Flags{
		ManifestDir:                     &cfg.dirSource.path,
		ManifestURL:                     &cfg.urlSource.url,
		ManifestURLHeader:               &cfg.urlSource.headers,
		FileCheckFrequency:              &cfg.dirSource.fileCheckFrequency,
		HTTPCheckFrequency:              &cfg.urlSource.httpCheckFrequency,
		ContainerdAddress:               &cfg.runtime.containerdAddress,
		PodLogsDir:                      &cfg.logs.dir,
		ContainerLogMaxSize:             &cfg.logs.maxSize,
		ContainerLogMaxFiles:            &cfg.logs.maxFiles,
		PodLogsMaxTotal:                 &cfg.logs.maxTotal,
		HealthzAddress:                  &cfg.status.healthzAddress,
		ShutdownGracePeriod:             &cfg.shutdown.GracePeriod,
		ShutdownGracePeriodCriticalPods: &cfg.shutdown.CriticalGracePeriod,
		MaxPods:                         &cfg.maxPods,
		PodMaxPids:                      &cfg.runtime.podPidsLimit,
		CgroupDriver:                    &cfg.runtime.cgroupDriver,
		CgroupsPerQOS:                   &cfg.runtime.cgroupsPerQOS,
		PodCIDR:                         &cfg.network.cidrs,
		ResolvConf:                      &cfg.runtime.resolvConf,
		AllowedUnsafeSysctls:            &cfg.runtime.unsafeSysctls,
		ImageGCHighThreshold:            &cfg.images.gc.HighThresholdPercent,
		ImageGCLowThreshold:             &cfg.images.gc.LowThresholdPercent,
		ImageMinimumGCAge:               &cfg.images.gc.MinAge,
		ImageMaximumGCAge:               &cfg.images.gc.MaxAge,
		EvictionHard:                    &cfg.node.evictionHard,
		NodeLeaseDurationSeconds:        &cfg.node.leaseSeconds,
	}
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
		return net.JoinHostPort(loopback, addr)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		return net.JoinHostPort(loopback, port)
	}
	return addr
}
