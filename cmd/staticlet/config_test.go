package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/nodeshutdown"
)

// kubeadmConfig is /var/lib/kubelet/config.yaml as kubeadm writes it
// (its zero durations included), with staticPodPath relative to the file,
// the test's runtime, log directory and healthz port, and evictionHard
// added. CONTAINERD, LOGS and PORT are replaced.
const kubeadmConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: unix://CONTAINERD
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: PORT
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
podLogsDir: LOGS
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`

func kubeadmFile(containerd, logs string, port int) string {
	return strings.NewReplacer("CONTAINERD", containerd, "LOGS", logs, "PORT", fmt.Sprint(port)).Replace(kubeadmConfig)
}

// TestParseKubeadmConfig: kubeadm's zero durations change nothing, the
// fields set are honoured, and those that mean nothing here are listed.
func TestParseKubeadmConfig(t *testing.T) {
	cf, err := parseKubeletConfig("/etc/staticlet/config.yaml", []byte(kubeadmFile("/run/c.sock", "/var/log/p", 10248)))
	if err != nil {
		t.Fatal(err)
	}
	var cfg runConfig
	cf.apply(func(string) bool { return false }, &cfg)
	want := runConfig{
		dirSource: dirSourceConfig{path: "/etc/staticlet/manifests"},
		runtime: runtimeConfig{containerdAddress: "unix:///run/c.sock", resolvConf: "/run/systemd/resolve/resolv.conf",
			cgroupDriver: "systemd"},
		logs:   containerLogConfig{dir: "/var/log/p"},
		status: statusConfig{healthzAddress: "127.0.0.1:10248"},
	}
	if diff := compareConfigs(cfg, want); diff != "" {
		t.Errorf("config from kubeadm's file: %s", diff)
	}
	wantIgnored := []string{"authentication", "authorization", "clusterDNS", "clusterDomain", "evictionHard", "rotateCertificates"}
	if !slices.Equal(cf.ignored, wantIgnored) || len(cf.unknown) != 0 {
		t.Errorf("ignored = %q, unknown = %q; want %q and none", cf.ignored, cf.unknown, wantIgnored)
	}
	if len(cf.warnings) != 0 {
		t.Errorf("warnings = %q, want none", cf.warnings)
	}
}

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

// kubeletConfigHead starts a KubeletConfiguration.
const kubeletConfigHead = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// kubeletConfigFieldCases are the inputs of TestParseKubeletConfigFields (each
// after kubeletConfigHead) and seeds of FuzzKubeletConfig.
var kubeletConfigFieldCases = []struct {
	name string
	body string
	want runConfig
}{
	{"empty", "", runConfig{}},
	{"paths absolute and relative", "staticPodPath: /etc/kubernetes/manifests\npodLogsDir: logs\nresolvConf: r.conf\n",
		runConfig{dirSource: dirSourceConfig{path: "/etc/kubernetes/manifests"}, logs: containerLogConfig{dir: "/cfg/logs"},
			runtime: runtimeConfig{resolvConf: "/cfg/r.conf"}}},
	{"resolvConf empty: no host resolvers", "resolvConf: \"\"\n", runConfig{runtime: runtimeConfig{resolvConf: os.DevNull}}},
	{"url source", "staticPodURL: https://example.test/pods\nstaticPodURLHeader:\n  X-B: [b]\n  Authorization: [Bearer t, two]\nhttpCheckFrequency: 1m\n",
		runConfig{urlSource: urlSourceConfig{url: "https://example.test/pods", headers: []string{"Authorization:Bearer t", "Authorization:two", "X-B:b"},
			httpCheckFrequency: time.Minute}}},
	{"frequencies and logs", "fileCheckFrequency: 5s\ncontainerLogMaxSize: 5Mi\ncontainerLogMaxFiles: 3\n",
		runConfig{dirSource: dirSourceConfig{fileCheckFrequency: 5 * time.Second}, logs: containerLogConfig{maxSize: "5Mi", maxFiles: 3}}},
	{"null is unset", "fileCheckFrequency: null\nstaticPodPath: null\n", runConfig{}},
	{"healthz port only", "healthzPort: 10300\n", runConfig{status: statusConfig{healthzAddress: "127.0.0.1:10300"}}},
	{"healthz address only", "healthzBindAddress: ::1\n", runConfig{status: statusConfig{healthzAddress: "[::1]:10248"}}},
	{"healthz port 0 is off", "healthzBindAddress: 127.0.0.1\nhealthzPort: 0\n", runConfig{}},
	{"cgroupsPerQOS", "cgroupsPerQOS: true\n", runConfig{runtime: runtimeConfig{cgroupsPerQOS: true}}},
	{"the rest", "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\nmaxPods: 50\npodCIDR: 10.1.0.0/24,fd00::/64\nallowedUnsafeSysctls: [net.core.somaxconn]\ncgroupDriver: cgroupfs\n",
		runConfig{shutdown: nodeshutdown.Config{GracePeriod: 30 * time.Second, CriticalGracePeriod: 10 * time.Second}, maxPods: 50,
			network: podNetworkConfig{cidrs: []string{"10.1.0.0/24", "fd00::/64"}},
			runtime: runtimeConfig{unsafeSysctls: []string{"net.core.somaxconn"}, cgroupDriver: "cgroupfs"}}},
	{"podPidsLimit", "podPidsLimit: 4096\n", runConfig{runtime: runtimeConfig{podPidsLimit: 4096}}},
	{"systemd driver", "cgroupDriver: systemd\n", runConfig{runtime: runtimeConfig{cgroupDriver: "systemd"}}},
}

// TestParseKubeletConfigFields covers each honoured field and the
// kubelet's defaulting of the healthz pair.
func TestParseKubeletConfigFields(t *testing.T) {
	for _, tt := range kubeletConfigFieldCases {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := parseKubeletConfig("/cfg/c.yaml", []byte(kubeletConfigHead+tt.body))
			if err != nil {
				t.Fatalf("parseKubeletConfig: %v", err)
			}
			var cfg runConfig
			cf.apply(func(string) bool { return false }, &cfg)
			if diff := compareConfigs(cfg, tt.want); diff != "" {
				t.Errorf("%s", diff)
			}
			if len(cf.ignored)+len(cf.unknown)+len(cf.warnings) != 0 {
				t.Errorf("ignored %q, unknown %q, warnings %q; want none", cf.ignored, cf.unknown, cf.warnings)
			}
		})
	}
}

// kubeletConfigErrorCases are the inputs of TestParseKubeletConfigErrors and
// seeds of FuzzKubeletConfig.
var kubeletConfigErrorCases = []struct {
	name, body, want string
}{
	{"not yaml", kubeletConfigHead + "maxPods: [\n", "c.yaml"},
	{"not an object", "- a\n", "want a KubeletConfiguration object"},
	{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", `kind "KubeProxyConfiguration"`},
	{"wrong version", "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", `apiVersion "kubelet.config.k8s.io/v1alpha1"`},
	{"no apiVersion", "kind: KubeletConfiguration\n", `apiVersion ""`},
	{"wrong type", kubeletConfigHead + "maxPods: many\n", "maxPods: cannot be a string"},
	{"bad duration", kubeletConfigHead + "fileCheckFrequency: soon\n", "soon"},
	{"bad cgroup driver", kubeletConfigHead + "cgroupDriver: none\n", `cgroupDriver "none"`},
	{"negative maxPods", kubeletConfigHead + "maxPods: -1\n", "maxPods -1"},
	{"healthzPort out of range", kubeletConfigHead + "healthzPort: 70000\n", "healthzPort 70000"},
	{"critical share beyond the grace period", kubeletConfigHead + "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", "longer than the whole"},
	{"negative grace period", kubeletConfigHead + "shutdownGracePeriod: -10s\n", "must not be negative"},
	{"grace period under a second", kubeletConfigHead + "shutdownGracePeriod: 500ms\n", "at least 1s"},
}

func TestParseKubeletConfigErrors(t *testing.T) {
	for _, tt := range kubeletConfigErrorCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseKubeletConfig("/cfg/c.yaml", []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "c.yaml") {
				t.Errorf("parseKubeletConfig(%q) = %v, want an error naming the file and containing %q", tt.body, err, tt.want)
			}
		})
	}
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
	cf, err := parseKubeletConfig("/c.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	cf.apply(func(flag string) bool { names = append(names, flag); return true }, &runConfig{})
	flags := runCommand().Flags()
	for _, n := range names {
		if flags.Lookup(n) == nil {
			t.Errorf("config field maps to --%s, which staticlet run does not have", n)
		}
	}
}

// TestKubeletConfigWarnsOnce: one warning line names every ignored and
// unknown field.
func TestKubeletConfigWarnsOnce(t *testing.T) {
	cf, err := parseKubeletConfig("/c.yaml", []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard: {memory.available: 100Mi}
clusterDNS: [10.96.0.10]
readOnlyPort: 0
imageGCHighThresholdPercent: 80
staticPodPathh: /typo
`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cf.log(slog.New(slog.NewTextHandler(&buf, nil)))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log = %q, want one line", lines)
	}
	for _, want := range []string{"level=WARN", "ignored=clusterDNS,evictionHard,imageGCHighThresholdPercent", "unknown=staticPodPathh", "file=/c.yaml"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("warning %q does not contain %q", lines[0], want)
		}
	}
	if strings.Contains(lines[0], "readOnlyPort") {
		t.Errorf("warning %q names readOnlyPort, whose 0 is the kubelet's default", lines[0])
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

func TestZeroValue(t *testing.T) {
	tests := []struct {
		v    any
		want bool
	}{
		{nil, true}, {false, true}, {true, false}, {0.0, true}, {1.0, false},
		{"", true}, {"0", true}, {"0s", true}, {"0m0s", true}, {"1s", false}, {"Webhook", false},
		{map[string]any{}, true}, {map[string]any{"a": map[string]any{"b": "0s"}}, true},
		{map[string]any{"a": true}, false}, {[]any{}, true}, {[]any{"x"}, false},
	}
	for _, tt := range tests {
		if got := zeroValue(tt.v); got != tt.want {
			t.Errorf("zeroValue(%#v) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestKubeletConfigFile runs staticlet from a KubeletConfiguration as
// kubeadm writes it: its staticPodPath's pods run, the fields without
// meaning here are named in one warning, /healthz answers on its port.
func TestKubeletConfigFile(t *testing.T) {
	e := newEnv(t)
	port := freePort(t)
	file := filepath.Join(e.dir, "kubelet-config.yaml")
	content := kubeadmFile(e.ctrd.Address, e.logs, port)
	if !cgroups.SystemdBooted() {
		// The systemd driver needs systemd: TestCgroupDriverNeedsSystemd.
		content = strings.Replace(content, "cgroupDriver: systemd", "cgroupDriver: cgroupfs", 1)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	e.write("web.yaml", sleeperPod("web", "cfg", false))
	// No --manifest-dir, --containerd-address or --pod-logs-dir: those
	// come from the file.
	d := e.startFlags(append([]string{"run", "--config", file,
		"--root-dir", e.root,
		"--node-name", testNode,
		"--log-level", "debug",
	}, e.net.flags()...))
	d.waitPod("web-"+testNode, 60*time.Second, "pod from staticPodPath running", running)
	if _, err := os.Stat(e.logs); err != nil {
		t.Errorf("podLogsDir %s from the file: %v", e.logs, err)
	}

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		t.Fatalf("GET /healthz on the healthz port: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", port)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /pods on the healthz port = %d, want 404: only /healthz is served over TCP", resp.StatusCode)
		}
	}

	var warned []string
	for _, line := range strings.Split(d.out.String(), "\n") {
		if strings.Contains(line, "evictionHard") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "clusterDNS") {
		t.Errorf("log lines naming evictionHard: %q, want one warning (that also names clusterDNS)", warned)
	}
	if strings.Contains(d.out.String(), "cgroupDriver") {
		t.Errorf("staticlet warned about cgroupDriver:\n%s", d.out.String())
	}
}

// TestCgroupDriverNeedsSystemd: the systemd driver where systemd is not
// the init system is refused at start, with the reason.
func TestCgroupDriverNeedsSystemd(t *testing.T) {
	if cgroups.SystemdBooted() {
		t.Skip("systemd is the init system here")
	}
	e := newEnv(t)
	cmd := exec.Command(binary(t), "run", "--manifest-dir", e.manifest, "--containerd-address", e.ctrd.Address,
		"--root-dir", e.root, "--status-socket", filepath.Join(e.dir, "s.sock"), "--cgroup-driver", "systemd")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "systemd cgroup driver needs systemd") {
		t.Errorf("staticlet run --cgroup-driver systemd without systemd: %v, want an error saying systemd is needed:\n%s", err, out)
	}
}

// startFlags runs staticlet with exactly args (plus the status socket),
// for tests whose settings come from elsewhere than the usual flags.
func (e *env) startFlags(args []string) *daemon {
	e.t.Helper()
	d := e.newDaemon()
	e.launch(d, append(args, "--status-socket", d.socket))
	return d
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
	cf, err := parseKubeletConfig(path, data)
	if err != nil {
		t.Fatalf("parseKubeletConfig(%s) = %v", path, err)
	}
	if len(cf.ignored) > 0 || len(cf.unknown) > 0 || len(cf.warnings) > 0 {
		t.Errorf("%s: ignored %q, unknown %q, warnings %q; want none", path, cf.ignored, cf.unknown, cf.warnings)
	}
	var cfg runConfig
	cf.apply(func(string) bool { return false }, &cfg)
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
	flags := runCommand().Flags()
	for name, value := range got {
		if want := flags.Lookup(name).DefValue; value != want {
			t.Errorf("%s sets --%s to %q, want its default %q", path, name, value, want)
		}
	}
	if cf.kc.StaticPodPath == "" || cf.kc.ContainerRuntimeEndpoint == "" || cf.kc.FileCheckFrequency == 0 {
		t.Errorf("%s leaves staticPodPath, containerRuntimeEndpoint or fileCheckFrequency unset; want them spelled out", path)
	}
}

// TestCgroupsPerQOSFalse: an explicit false in the file is not "the
// default" (the kubelet's field is a pointer, defaulted to true only when
// unset), so it turns the flag's default off.
func TestCgroupsPerQOSFalse(t *testing.T) {
	cf, err := parseKubeletConfig("/c.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupsPerQOS: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := runConfig{runtime: runtimeConfig{cgroupsPerQOS: true}}
	cf.apply(func(string) bool { return false }, &cfg)
	if cfg.runtime.cgroupsPerQOS {
		t.Errorf("cgroupsPerQOS: false in the file left --cgroups-per-qos true")
	}
	cfg = runConfig{runtime: runtimeConfig{cgroupsPerQOS: true}}
	cf.apply(func(flag string) bool { return flag == "cgroups-per-qos" }, &cfg)
	if !cfg.runtime.cgroupsPerQOS {
		t.Errorf("cgroupsPerQOS: false in the file won over --cgroups-per-qos given on the command line")
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
