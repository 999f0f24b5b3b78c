package kubeletconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzKubeletConfig checks Parse on any file: a config or an
// error naming the file, never a panic; the same file gives the same
// result; a config it accepts holds only values it checks for (a known
// cgroup driver, maxPods not negative, a healthz port in range), lists each
// field it ignores or does not know once, sorted, and applies to the
// flags' variables without a panic, changing nothing where every flag was given.
func FuzzKubeletConfig(f *testing.F) {
	f.Add(kubeadmFile(f, "/run/c.sock", "/var/log/p", 10248))
	for _, tc := range kubeletConfigFieldCases {
		f.Add(kubeletConfigHead + tc.body)
	}
	for _, tc := range kubeletConfigErrorCases {
		f.Add(tc.body)
	}
	packaged, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(packaged))
	const path = "/etc/staticlet/config.yaml"
	f.Fuzz(func(t *testing.T, data string) {
		cf, err := Parse(path, []byte(data))
		if err != nil {
			if cf != nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("Parse = %v, %v: want no config and an error naming %s", cf, err, path)
			}
		} else {
			checkConfigFile(t, cf)
		}
		cf2, err2 := Parse(path, []byte(data))
		if a, b := configText(t, cf, err), configText(t, cf2, err2); a != b {
			t.Fatalf("Parse is not deterministic: first\n%s\nthen\n%s", a, b)
		}
	})
}

// checkConfigFile checks what Parse promises of a config it
// accepts.
func checkConfigFile(t *testing.T, cf *File) {
	t.Helper()
	kc := &cf.kc
	if !slices.Contains([]string{"", "cgroupfs", "systemd"}, kc.CgroupDriver) || kc.MaxPods < 0 ||
		kc.HealthzPort != nil && (*kc.HealthzPort < 0 || *kc.HealthzPort > 65535) {
		t.Errorf("accepted cgroupDriver %q, maxPods %d, healthzPort %v", kc.CgroupDriver, kc.MaxPods, kc.HealthzPort)
	}
	for _, list := range []struct {
		name   string
		fields []string
		known  bool // the fields are the kubelet's
	}{{"ignored", cf.Ignored, true}, {"unknown", cf.Unknown, false}} {
		if !slices.IsSorted(list.fields) || len(slices.Compact(slices.Clone(list.fields))) != len(list.fields) {
			t.Errorf("%s fields %q: want each once, sorted", list.name, list.fields)
		}
		for _, name := range list.fields {
			if slices.Contains(honouredFields, name) || name == "apiVersion" || name == "kind" ||
				slices.Contains(kubeletOnlyFields, name) != list.known {
				t.Errorf("field %q is listed as %s", name, list.name)
			}
		}
	}
	var v values
	cf.Apply(func(string) bool { return true }, v.flags())
	v.NodeLeaseDurationSeconds = 0 // no flag sets it
	if diff := compareValues(v, values{}); diff != "" {
		t.Errorf("with every flag given, the file changed %s", diff)
	}
	cf.Apply(func(string) bool { return false }, v.flags())
	for _, p := range []string{v.ManifestDir, v.PodLogsDir, v.ResolvConf} {
		if p != "" && !filepath.IsAbs(p) {
			t.Errorf("path %q from the file is not made absolute", p)
		}
	}
}

// configText renders a result of Parse for comparison.
func configText(t *testing.T, cf *File, err error) string {
	t.Helper()
	if err != nil {
		return "error: " + err.Error()
	}
	js, err := json.Marshal(cf.kc)
	if err != nil {
		t.Fatalf("encoding %+v: %v", cf.kc, err)
	}
	return strings.Join([]string{string(js), strings.Join(cf.Ignored, ","), strings.Join(cf.Unknown, ","), strings.Join(cf.Warnings, "\n")}, "\n")
}
