package kubeletconfig

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/kubeadm"
)

// kubeadmFile is internal/testutil/kubeadm's file, /var/lib/kubelet/config.yaml as
// kubeadm writes it (its zero durations included), with staticPodPath
// relative to the file, the test's runtime, log directory and healthz
// port, and evictionHard added: CONTAINERD, LOGS and PORT replaced.
func kubeadmFile(t testing.TB, containerd, logs string, port int) string {
	t.Helper()
	return kubeadm.KubeletConfig(containerd, logs, port)
}

// values are variables for Apply to set, one for each field of Flags.
type values struct {
	ManifestDir                     string
	ManifestURL                     string
	ManifestURLHeader               []string
	FileCheckFrequency              time.Duration
	HTTPCheckFrequency              time.Duration
	ContainerdAddress               string
	PodLogsDir                      string
	ContainerLogMaxSize             string
	ContainerLogMaxFiles            int
	PodLogsMaxTotal                 string
	HealthzAddress                  string
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
	MaxPods                         int
	PodMaxPids                      int64
	CgroupDriver                    string
	CgroupsPerQOS                   bool
	PodCIDR                         []string
	ResolvConf                      string
	AllowedUnsafeSysctls            []string
	ImageGCHighThreshold            int
	ImageGCLowThreshold             int
	ImageMinimumGCAge               time.Duration
	ImageMaximumGCAge               time.Duration
	EvictionHard                    map[string]string
	NodeLeaseDurationSeconds        int32
}

// flags points Flags at v's fields.
func (v *values) flags() Flags {
	return Flags{
		ManifestDir:                     &v.ManifestDir,
		ManifestURL:                     &v.ManifestURL,
		ManifestURLHeader:               &v.ManifestURLHeader,
		FileCheckFrequency:              &v.FileCheckFrequency,
		HTTPCheckFrequency:              &v.HTTPCheckFrequency,
		ContainerdAddress:               &v.ContainerdAddress,
		PodLogsDir:                      &v.PodLogsDir,
		ContainerLogMaxSize:             &v.ContainerLogMaxSize,
		ContainerLogMaxFiles:            &v.ContainerLogMaxFiles,
		PodLogsMaxTotal:                 &v.PodLogsMaxTotal,
		HealthzAddress:                  &v.HealthzAddress,
		ShutdownGracePeriod:             &v.ShutdownGracePeriod,
		ShutdownGracePeriodCriticalPods: &v.ShutdownGracePeriodCriticalPods,
		MaxPods:                         &v.MaxPods,
		PodMaxPids:                      &v.PodMaxPids,
		CgroupDriver:                    &v.CgroupDriver,
		CgroupsPerQOS:                   &v.CgroupsPerQOS,
		PodCIDR:                         &v.PodCIDR,
		ResolvConf:                      &v.ResolvConf,
		AllowedUnsafeSysctls:            &v.AllowedUnsafeSysctls,
		ImageGCHighThreshold:            &v.ImageGCHighThreshold,
		ImageGCLowThreshold:             &v.ImageGCLowThreshold,
		ImageMinimumGCAge:               &v.ImageMinimumGCAge,
		ImageMaximumGCAge:               &v.ImageMaximumGCAge,
		EvictionHard:                    &v.EvictionHard,
		NodeLeaseDurationSeconds:        &v.NodeLeaseDurationSeconds,
	}
}

// compareValues names the fields that differ.
func compareValues(got, want values) string {
	var b strings.Builder
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		if gs, ws := fmt.Sprint(g.Field(i).Interface()), fmt.Sprint(w.Field(i).Interface()); gs != ws {
			fmt.Fprintf(&b, "%s = %s, want %s; ", g.Type().Field(i).Name, gs, ws)
		}
	}
	return b.String()
}

// TestParseKubeadmConfig: kubeadm's zero durations change nothing, the
// fields set are honoured, and those that mean nothing here are listed.
func TestParseKubeadmConfig(t *testing.T) {
	cf, err := Parse("/etc/staticlet/config.yaml", []byte(kubeadmFile(t, "/run/c.sock", "/var/log/p", 10248)))
	if err != nil {
		t.Fatal(err)
	}
	var got values
	cf.Apply(func(string) bool { return false }, got.flags())
	want := values{
		ManifestDir:       "/etc/staticlet/manifests",
		ContainerdAddress: "unix:///run/c.sock",
		ResolvConf:        "/run/systemd/resolve/resolv.conf",
		CgroupDriver:      "systemd",
		PodLogsDir:        "/var/log/p",
		HealthzAddress:    "127.0.0.1:10248",
		EvictionHard:      map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
	}
	if diff := compareValues(got, want); diff != "" {
		t.Errorf("config from kubeadm's file: %s", diff)
	}
	wantIgnored := []string{"authentication", "authorization", "clusterDNS", "clusterDomain", "rotateCertificates"}
	if !slices.Equal(cf.Ignored, wantIgnored) || len(cf.Unknown) != 0 {
		t.Errorf("ignored = %q, unknown = %q; want %q and none", cf.Ignored, cf.Unknown, wantIgnored)
	}
	if len(cf.Warnings) != 0 {
		t.Errorf("warnings = %q, want none", cf.Warnings)
	}
}

// kubeletConfigHead starts a KubeletConfiguration.
const kubeletConfigHead = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// kubeletConfigFieldCases are the inputs of TestParseKubeletConfigFields (each
// after kubeletConfigHead) and seeds of FuzzKubeletConfig.
var kubeletConfigFieldCases = []struct {
	name string
	body string
	want values
}{
	{"empty", "", values{}},
	{"node lease", "nodeLeaseDurationSeconds: 20\n", values{NodeLeaseDurationSeconds: 20}},
	// 0 is the kubelet's default, 40, which the caller has.
	{"node lease 0: the default", "nodeLeaseDurationSeconds: 0\n", values{}},
	{"paths absolute and relative", "staticPodPath: /etc/kubernetes/manifests\npodLogsDir: logs\nresolvConf: r.conf\n",
		values{ManifestDir: "/etc/kubernetes/manifests", PodLogsDir: "/cfg/logs", ResolvConf: "/cfg/r.conf"}},
	{"resolvConf empty: no host resolvers", "resolvConf: \"\"\n", values{ResolvConf: os.DevNull}},
	{"url source", "staticPodURL: https://example.test/pods\nstaticPodURLHeader:\n  X-B: [b]\n  Authorization: [Bearer t, two]\nhttpCheckFrequency: 1m\n",
		values{ManifestURL: "https://example.test/pods", ManifestURLHeader: []string{"Authorization:Bearer t", "Authorization:two", "X-B:b"},
			HTTPCheckFrequency: time.Minute}},
	{"frequencies and logs", "fileCheckFrequency: 5s\ncontainerLogMaxSize: 5Mi\ncontainerLogMaxFiles: 3\npodLogsMaxTotal: 1Gi\n",
		values{FileCheckFrequency: 5 * time.Second, ContainerLogMaxSize: "5Mi", ContainerLogMaxFiles: 3, PodLogsMaxTotal: "1Gi"}},
	{"null is unset", "fileCheckFrequency: null\nstaticPodPath: null\n", values{}},
	{"healthz port only", "healthzPort: 10300\n", values{HealthzAddress: "127.0.0.1:10300"}},
	{"healthz address only", "healthzBindAddress: ::1\n", values{HealthzAddress: "[::1]:10248"}},
	{"healthz port 0 is off", "healthzBindAddress: 127.0.0.1\nhealthzPort: 0\n", values{}},
	{"cgroupsPerQOS", "cgroupsPerQOS: true\n", values{CgroupsPerQOS: true}},
	{"the rest", "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\nmaxPods: 50\npodCIDR: 10.1.0.0/24,fd00::/64\nallowedUnsafeSysctls: [net.core.somaxconn]\ncgroupDriver: cgroupfs\n",
		values{ShutdownGracePeriod: 30 * time.Second, ShutdownGracePeriodCriticalPods: 10 * time.Second, MaxPods: 50,
			PodCIDR:              []string{"10.1.0.0/24", "fd00::/64"},
			AllowedUnsafeSysctls: []string{"net.core.somaxconn"}, CgroupDriver: "cgroupfs"}},
	{"podPidsLimit", "podPidsLimit: 4096\n", values{PodMaxPids: 4096}},
	{"systemd driver", "cgroupDriver: systemd\n", values{CgroupDriver: "systemd"}},
	{"image gc", "imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 70\nimageMinimumGCAge: 5m\nimageMaximumGCAge: 168h\n",
		values{ImageGCHighThreshold: 90, ImageGCLowThreshold: 70, ImageMinimumGCAge: 5 * time.Minute, ImageMaximumGCAge: 168 * time.Hour}},
	// A threshold is a pointer in the kubelet's type: 0 is a value.
	{"image gc threshold 0", "imageGCLowThresholdPercent: 0\nimageMinimumGCAge: 0s\n", values{}},
	{"eviction hard", "evictionHard:\n  nodefs.available: 1Gi\n  memory.available: 100Mi\n",
		values{EvictionHard: map[string]string{"nodefs.available": "1Gi", "memory.available": "100Mi"}}},
	{"eviction hard merged with the defaults", "evictionHard: {nodefs.available: 1Gi}\nmergeDefaultEvictionSettings: true\n",
		values{EvictionHard: map[string]string{"nodefs.available": "1Gi", "nodefs.inodesFree": "5%"}}},
	{"merge without evictionHard: the defaults", "mergeDefaultEvictionSettings: true\n", values{}},
}

// TestParseKubeletConfigFields covers each honoured field and the
// kubelet's defaulting of the healthz pair.
func TestParseKubeletConfigFields(t *testing.T) {
	for _, tt := range kubeletConfigFieldCases {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := Parse("/cfg/c.yaml", []byte(kubeletConfigHead+tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got values
			cf.Apply(func(string) bool { return false }, got.flags())
			if diff := compareValues(got, tt.want); diff != "" {
				t.Errorf("%s", diff)
			}
			if len(cf.Ignored)+len(cf.Unknown)+len(cf.Warnings) != 0 {
				t.Errorf("ignored %q, unknown %q, warnings %q; want none", cf.Ignored, cf.Unknown, cf.Warnings)
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
	{"negative node lease", kubeletConfigHead + "nodeLeaseDurationSeconds: -5\n", "nodeLeaseDurationSeconds -5: must be greater than 0"},
	{"fractional node lease", kubeletConfigHead + "nodeLeaseDurationSeconds: 1.5\n", "nodeLeaseDurationSeconds"},
	{"healthzPort out of range", kubeletConfigHead + "healthzPort: 70000\n", "healthzPort 70000"},
	{"critical share beyond the grace period", kubeletConfigHead + "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n", "longer than the whole"},
	{"negative grace period", kubeletConfigHead + "shutdownGracePeriod: -10s\n", "must not be negative"},
	{"grace period under a second", kubeletConfigHead + "shutdownGracePeriod: 500ms\n", "at least 1s"},
	{"eviction threshold over 100%", kubeletConfigHead + "evictionHard: {nodefs.available: 101%}\n", "evictionHard: nodefs.available<101%: want a percentage"},
	{"unknown eviction signal", kubeletConfigHead + "evictionHard: {disk.available: 1Gi}\n", `evictionHard: disk.available<1Gi: unknown eviction signal`},
	{"negative eviction threshold", kubeletConfigHead + "evictionHard: {nodefs.inodesFree: \"-5\"}\n", "evictionHard: nodefs.inodesFree<-5"},
	{"eviction threshold not a string", kubeletConfigHead + "evictionHard: {nodefs.inodesFree: 5}\n", "evictionHard: cannot be a number"},
}

func TestParseKubeletConfigErrors(t *testing.T) {
	for _, tt := range kubeletConfigErrorCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("/cfg/c.yaml", []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "c.yaml") {
				t.Errorf("Parse(%q) = %v, want an error naming the file and containing %q", tt.body, err, tt.want)
			}
		})
	}
}

// TestKubeletConfigWarnsOnce: one warning line names every ignored and
// unknown field.
func TestKubeletConfigWarnsOnce(t *testing.T) {
	cf, err := Parse("/c.yaml", []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionSoft: {memory.available: 100Mi}
clusterDNS: [10.96.0.10]
readOnlyPort: 0
enableServer: true
staticPodPathh: /typo
`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cf.Log(slog.New(slog.NewTextHandler(&buf, nil)))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log = %q, want one line", lines)
	}
	for _, want := range []string{"level=WARN", "ignored=clusterDNS,enableServer,evictionSoft", "unknown=staticPodPathh", "file=/c.yaml"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("warning %q does not contain %q", lines[0], want)
		}
	}
	if strings.Contains(lines[0], "readOnlyPort") {
		t.Errorf("warning %q names readOnlyPort, whose 0 is the kubelet's default", lines[0])
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

// TestCgroupsPerQOSFalse: an explicit false in the file is not "the
// default" (the kubelet's field is a pointer, defaulted to true only when
// unset), so it turns the flag's default off.
func TestCgroupsPerQOSFalse(t *testing.T) {
	cf, err := Parse("/c.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupsPerQOS: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	v := values{CgroupsPerQOS: true}
	cf.Apply(func(string) bool { return false }, v.flags())
	if v.CgroupsPerQOS {
		t.Errorf("cgroupsPerQOS: false in the file left --cgroups-per-qos true")
	}
	v = values{CgroupsPerQOS: true}
	cf.Apply(func(flag string) bool { return flag == "cgroups-per-qos" }, v.flags())
	if !v.CgroupsPerQOS {
		t.Errorf("cgroupsPerQOS: false in the file won over --cgroups-per-qos given on the command line")
	}
}

// TestEvictionHardReplaces: as with the kubelet, an evictionHard given
// replaces the defaults wholesale, {} included; the flag wins over it.
func TestEvictionHardReplaces(t *testing.T) {
	defaults := map[string]string{"nodefs.available": "10%", "nodefs.inodesFree": "5%"}
	for _, tt := range []struct {
		name, body string
		flag       bool
		want       string
	}{
		{"absent: the defaults", "", false, "map[nodefs.available:10% nodefs.inodesFree:5%]"},
		{"null: the defaults", "evictionHard: null\n", false, "map[nodefs.available:10% nodefs.inodesFree:5%]"},
		{"{}: nothing checked", "evictionHard: {}\n", false, "map[]"},
		{"one signal: the other unchecked", "evictionHard: {nodefs.inodesFree: 1%}\n", false, "map[nodefs.inodesFree:1%]"},
		{"the flag wins", "evictionHard: {nodefs.inodesFree: 1%}\nmergeDefaultEvictionSettings: true\n", true, "map[nodefs.available:10% nodefs.inodesFree:5%]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := Parse("/cfg/c.yaml", []byte(kubeletConfigHead+tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var v values
			v.EvictionHard = maps.Clone(defaults)
			cf.Apply(func(flag string) bool { return tt.flag && flag == "eviction-hard" }, v.flags())
			if got := fmt.Sprint(v.EvictionHard); got != tt.want || v.EvictionHard == nil {
				t.Errorf("evictionHard = %s, want %s", got, tt.want)
			}
		})
	}
}
