package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/kubeletconfig"
)

// compareConfigs names the fields that differ, for the fields config.go sets.
func compareConfigs(got, want runConfig) string {
	var b strings.Builder
	check := func(name string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			fmt.Fprintf(&b, "%s = %v, want %v; ", name, g, w)
		}
	}
	check("manifestDir", got.dirSource.path, want.dirSource.path)
	check("manifestURL", got.urlSource.url, want.urlSource.url)
	check("manifestURLHeaders", got.urlSource.headers, want.urlSource.headers)
	check("fileCheckFrequency", got.dirSource.fileCheckFrequency, want.dirSource.fileCheckFrequency)
	check("httpCheckFrequency", got.urlSource.httpCheckFrequency, want.urlSource.httpCheckFrequency)
	check("containerdAddress", got.runtime.containerdAddress, want.runtime.containerdAddress)
	check("podLogsDir", got.logs.dir, want.logs.dir)
	check("logMaxSize", got.logs.maxSize, want.logs.maxSize)
	check("logMaxFiles", got.logs.maxFiles, want.logs.maxFiles)
	check("cgroupsPerQOS", got.runtime.cgroupsPerQOS, want.runtime.cgroupsPerQOS)
	check("cgroupDriver", got.runtime.cgroupDriver, want.runtime.cgroupDriver)
	check("podPidsLimit", got.runtime.podPidsLimit, want.runtime.podPidsLimit)
	check("healthzAddress", got.status.healthzAddress, want.status.healthzAddress)
	check("shutdownGracePeriod", got.shutdown.GracePeriod, want.shutdown.GracePeriod)
	check("shutdownGracePeriodCriticalPods", got.shutdown.CriticalGracePeriod, want.shutdown.CriticalGracePeriod)
	check("maxPods", got.maxPods, want.maxPods)
	check("podCIDRs", got.network.cidrs, want.network.cidrs)
	check("resolvConf", got.runtime.resolvConf, want.runtime.resolvConf)
	check("unsafeSysctls", got.runtime.unsafeSysctls, want.runtime.unsafeSysctls)
	return b.String()
}

// TestKubeletConfigPrecedence parses real command lines: a flag given
// (or its kubelet alias) wins over the file, the file over flag defaults.
func TestKubeletConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /from/file
containerRuntimeEndpoint: unix:///from/file.sock
fileCheckFrequency: 7s
containerLogMaxFiles: 9
healthzPort: 10300
maxPods: 12
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want runConfig
	}{
		{"file over defaults", nil, runConfig{dirSource: dirSourceConfig{path: "/from/file", fileCheckFrequency: 7 * time.Second},
			runtime: runtimeConfig{containerdAddress: "unix:///from/file.sock"}, logs: containerLogConfig{maxFiles: 9},
			status: statusConfig{healthzAddress: "127.0.0.1:10300"}, maxPods: 12}},
		{"flags over file", []string{"--manifest-dir=/flag", "--file-check-frequency=1s", "--container-log-max-files=2",
			"--healthz-address=", "--max-pods=1"},
			runConfig{dirSource: dirSourceConfig{path: "FLAG", fileCheckFrequency: time.Hour},
				runtime: runtimeConfig{containerdAddress: "unix:///from/file.sock"}, logs: containerLogConfig{maxFiles: -1},
				status: statusConfig{healthzAddress: "FLAG"}, maxPods: -1}},
		{"kubelet aliases over file", []string{"--pod-manifest-path=/flag", "--container-runtime-endpoint=/flag.sock"},
			runConfig{dirSource: dirSourceConfig{path: "FLAG", fileCheckFrequency: 7 * time.Second},
				runtime: runtimeConfig{containerdAddress: "FLAG"}, logs: containerLogConfig{maxFiles: 9},
				status: statusConfig{healthzAddress: "127.0.0.1:10300"}, maxPods: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := runCommand().Flags()
			if err := flags.Parse(append([]string{"--config", file}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			// What the flags set stands in cfg as FLAG (or -1, an hour):
			// the file must leave it there.
			cfg := runConfig{configFile: file, dirSource: dirSourceConfig{path: "FLAG", fileCheckFrequency: time.Hour},
				runtime: runtimeConfig{containerdAddress: "FLAG"}, logs: containerLogConfig{maxFiles: -1},
				status: statusConfig{healthzAddress: "FLAG"}, maxPods: -1}
			if err := loadKubeletConfig(flags, &cfg); err != nil {
				t.Fatal(err)
			}
			if diff := compareConfigs(cfg, tt.want); diff != "" {
				t.Errorf("%v: %s", tt.args, diff)
			}
		})
	}
}

// TestKubeletConfigFlagsExist: every flag name apply consults is one of
// staticlet run's, so that a flag given always wins.
func TestKubeletConfigFlagsExist(t *testing.T) {
	cf, err := kubeletconfig.Parse("/c.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	cf.Apply(func(flag string) bool { names = append(names, flag); return true }, (&runConfig{}).fileFlags())
	flags := runCommand().Flags()
	for _, n := range names {
		if flags.Lookup(n) == nil {
			t.Errorf("config field maps to --%s, which staticlet run does not have", n)
		}
	}
}

func TestLoopbackDefault(t *testing.T) {
	for in, want := range map[string]string{
		"10248":           "127.0.0.1:10248",
		":10248":          "127.0.0.1:10248",
		"0.0.0.0:10248":   "0.0.0.0:10248",
		"[::1]:10248":     "[::1]:10248",
		"localhost:10248": "localhost:10248",
	} {
		if got := loopbackDefault(in); got != want {
			t.Errorf("loopbackDefault(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPackagedConfig: the example config the .deb installs
// (packaging/config.yaml) is accepted without a warning and spells out
// staticlet run's defaults, so installing it changes nothing.
func TestPackagedConfig(t *testing.T) {
	const path = "../../packaging/config.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := kubeletconfig.Parse(path, data)
	if err != nil {
		t.Fatalf("kubeletconfig.Parse(%s) = %v", path, err)
	}
	if len(cf.Ignored) > 0 || len(cf.Unknown) > 0 || len(cf.Warnings) > 0 {
		t.Errorf("%s: ignored %q, unknown %q, warnings %q; want none", path, cf.Ignored, cf.Unknown, cf.Warnings)
	}
	var cfg runConfig
	cf.Apply(func(string) bool { return false }, cfg.fileFlags())
	got := map[string]string{
		"manifest-dir":            cfg.dirSource.path,
		"file-check-frequency":    cfg.dirSource.fileCheckFrequency.String(),
		"http-check-frequency":    cfg.urlSource.httpCheckFrequency.String(),
		"containerd-address":      strings.TrimPrefix(cfg.runtime.containerdAddress, "unix://"),
		"pod-logs-dir":            cfg.logs.dir,
		"container-log-max-size":  cfg.logs.maxSize,
		"container-log-max-files": strconv.Itoa(cfg.logs.maxFiles),
		"healthz-address":         cfg.status.healthzAddress,
		"pod-cidr":                "[" + strings.Join(cfg.network.cidrs, ",") + "]",
		"resolv-conf":             cfg.runtime.resolvConf,
		"max-pods":                strconv.Itoa(cfg.maxPods),
		"shutdown-grace-period":   cfg.shutdown.GracePeriod.String(),
		"cgroups-per-qos":         strconv.FormatBool(cfg.runtime.cgroupsPerQOS),
		"cgroup-driver":           cfg.runtime.cgroupDriver,
		"pod-max-pids":            strconv.FormatInt(cfg.runtime.podPidsLimit, 10),
	}
	got["shutdown-grace-period-critical-pods"] = cfg.shutdown.CriticalGracePeriod.String()
	got["eviction-hard"] = (&evictionHardFlag{m: &cfg.node.evictionHard}).String()
	flags := runCommand().Flags()
	for name, value := range got {
		if want := flags.Lookup(name).DefValue; value != want {
			t.Errorf("%s sets --%s to %q, want its default %q", path, name, value, want)
		}
	}
	// The file sets each of these only where it spells it out.
	if cfg.dirSource.path == "" || cfg.runtime.containerdAddress == "" || cfg.dirSource.fileCheckFrequency == 0 {
		t.Errorf("%s leaves staticPodPath, containerRuntimeEndpoint or fileCheckFrequency unset; want them spelled out", path)
	}
}

// TestImageNamespacesFlag: --image-namespaces defaults to k8s.io, takes a
// comma-separated list, and turns off when empty.
func TestImageNamespacesFlag(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"k8s.io"}},
		{[]string{"--image-namespaces="}, nil},
		{[]string{"--image-namespaces", "k8s.io, default,"}, []string{"k8s.io", "default"}},
		{[]string{"--image-namespaces=a", "--image-namespaces=b"}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		flags := runCommand().Flags()
		if err := flags.Parse(tt.args); err != nil {
			t.Fatalf("parsing %q: %v", tt.args, err)
		}
		ns, err := flags.GetStringSlice("image-namespaces")
		if err != nil {
			t.Fatal(err)
		}
		if got := imageNamespaces(ns); !slices.Equal(got, tt.want) {
			t.Errorf("%q: image namespaces %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestImageGCPolicyChecked runs staticlet run with image garbage
// collection settings, from flags or the file: they are checked as the
// kubelet checks them before anything starts. Good settings go on to the
// next check, a bad --cgroup-driver, which stops the run.
func TestImageGCPolicyChecked(t *testing.T) {
	file := kubeletConfigFile(t, "imageMaximumGCAge: 1m\n")
	tests := []stopCase{
		{args: nil, want: passed},
		{args: []string{"--image-gc-high-threshold=70"}, want: "imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 70"},
		{args: []string{"--image-gc-low-threshold=-1"}, want: "must be between 0 and 100"},
		{args: []string{"--config", file}, want: "imageMaximumGCAge (--image-maximum-gc-age) 1m0s must be greater than imageMinimumGCAge (--image-minimum-gc-age) 2m0s"},
		{args: []string{"--config", file, "--minimum-image-ttl-duration=30s"}, want: passed},
	}
	for _, tt := range tests {
		runStopsWith(t, tt.args, tt.want)
	}
}

// TestEvictionHard parses real command lines: --eviction-hard in the
// kubelet's syntax (its first value replacing the default, a repeat
// adding to it), the file's evictionHard when the flag is not given.
func TestEvictionHard(t *testing.T) {
	file := kubeletConfigFile(t, "evictionHard: {nodefs.available: 1Gi, memory.available: 100Mi}\n")
	merged := kubeletConfigFile(t, "evictionHard: {nodefs.available: 1Gi}\nmergeDefaultEvictionSettings: true\n")
	tests := []struct {
		args []string
		want string // the flag's value after parsing and --config
	}{
		{nil, "nodefs.available<10%,nodefs.inodesFree<5%"},
		{[]string{"--eviction-hard", "nodefs.available<5%,nodefs.inodesFree<1%"}, "nodefs.available<5%,nodefs.inodesFree<1%"},
		{[]string{"--eviction-hard", "nodefs.available<1Gi"}, "nodefs.available<1Gi"},
		{[]string{"--eviction-hard", "nodefs.available<1Gi", "--eviction-hard", "memory.available<1Gi"}, "memory.available<1Gi,nodefs.available<1Gi"},
		{[]string{"--eviction-hard="}, ""},
		{[]string{"--config", file}, "memory.available<100Mi,nodefs.available<1Gi"},
		{[]string{"--config", file, "--eviction-hard", "nodefs.inodesFree<1%"}, "nodefs.inodesFree<1%"},
		{[]string{"--config", merged}, "nodefs.available<1Gi,nodefs.inodesFree<5%"},
	}
	for _, tt := range tests {
		var cfg runConfig
		flags := runCommandFor(&cfg).Flags()
		if err := flags.Parse(tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if err := loadKubeletConfig(flags, &cfg); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if got := flags.Lookup("eviction-hard").Value.String(); got != tt.want || len(cfg.node.evictionHard) != strings.Count(got, "<") {
			t.Errorf("%q: --eviction-hard = %q, want %q", tt.args, got, tt.want)
		}
	}
	if err := runCommand().Flags().Parse([]string{"--eviction-hard", "nodefs.available>5%"}); err == nil ||
		!strings.Contains(err.Error(), "--eviction-hard") || !strings.Contains(err.Error(), "nodefs.available>5%") {
		t.Errorf("--eviction-hard nodefs.available>5%% = %v, want an error naming the flag and the item", err)
	}
}

// TestEvictionHardChecked runs staticlet run with eviction thresholds
// from the flag or the file: a bad one stops the run at once, naming the
// flag (or the file and field) and the item; good ones go on to the next
// check, a bad --cgroup-driver.
func TestEvictionHardChecked(t *testing.T) {
	file := kubeletConfigFile(t, "evictionHard: {nodefs.available: 150%}\n")
	tests := []stopCase{
		{args: nil, want: passed},
		{args: []string{"--eviction-hard", "nodefs.available<1Gi,memory.available<100Mi,pid.available<10%"}, want: passed},
		{args: []string{"--eviction-hard", "nodefs.available<0%,nodefs.inodesFree<0"}, want: passed},
		{args: []string{"--eviction-hard", "disk.available<1Gi"}, want: `--eviction-hard: disk.available<1Gi: unknown eviction signal "disk.available"`},
		{args: []string{"--eviction-hard", "nodefs.available<101%"}, want: "--eviction-hard: nodefs.available<101%: want a percentage from 0% to 100%"},
		{args: []string{"--eviction-hard", "nodefs.inodesFree<-1"}, want: "--eviction-hard: nodefs.inodesFree<-1: want a percentage (10%) or a quantity that is not negative"},
		{args: []string{"--eviction-hard", "nodefs.available<lots"}, want: "--eviction-hard: nodefs.available<lots"},
		{args: []string{"--eviction-hard", "nodefs.available>=1Gi"}, want: `invalid argument "nodefs.available>=1Gi" for "--eviction-hard" flag`},
		{args: []string{"--config", file}, want: "config file " + file + ": evictionHard: nodefs.available<150%: want a percentage"},
	}
	for _, tt := range tests {
		runStopsWith(t, tt.args, tt.want)
	}
}

// kubeletConfigFile writes a KubeletConfiguration of body, in a new
// directory, and returns its path.
func kubeletConfigFile(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// passed is the error of a run that got past the checks under test to
// --cgroup-driver=none.
const passed = "--cgroup-driver"

// stopCase is a run's arguments and a part of the error it stops with.
type stopCase struct {
	args []string
	want string
}

// runStopsWith runs staticlet run with args after --cgroup-driver=none,
// which no run gets past: it must stop with an error containing want.
func runStopsWith(t *testing.T, args []string, want string) {
	t.Helper()
	cmd := runCommand()
	cmd.SetArgs(append([]string{"--cgroup-driver=none", "--node-name=n1"}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("run %v = %v, want an error with %q", args, err, want)
	}
}
