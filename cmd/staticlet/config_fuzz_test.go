package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzKubeletConfig checks parseKubeletConfig on any file: a config or an
// error naming the file, never a panic; the same file gives the same
// result; a config it accepts holds only values it checks for (a known
// cgroup driver, maxPods not negative, a healthz port in range), lists each
// field it ignores or does not know once, sorted, and applies to a run
// config without a panic, changing nothing where every flag was given.
func FuzzKubeletConfig(f *testing.F) {
	f.Add(kubeadmFile("/run/c.sock", "/var/log/p", 10248))
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
		cf, err := parseKubeletConfig(path, []byte(data))
		if err != nil {
			if cf != nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("parseKubeletConfig = %v, %v: want no config and an error naming %s", cf, err, path)
			}
		} else {
			checkConfigFile(t, cf)
		}
		cf2, err2 := parseKubeletConfig(path, []byte(data))
		if a, b := configText(t, cf, err), configText(t, cf2, err2); a != b {
			t.Fatalf("parseKubeletConfig is not deterministic: first\n%s\nthen\n%s", a, b)
		}
	})
}

// checkConfigFile checks what parseKubeletConfig promises of a config it
// accepts.
func checkConfigFile(t *testing.T, cf *configFile) {
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
	}{{"ignored", cf.ignored, true}, {"unknown", cf.unknown, false}} {
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
	var cfg runConfig
	cf.apply(func(string) bool { return true }, &cfg)
	if diff := compareConfigs(cfg, runConfig{}); diff != "" {
		t.Errorf("with every flag given, the file changed %s", diff)
	}
	cf.apply(func(string) bool { return false }, &cfg)
	for _, p := range []string{cfg.dirSource.path, cfg.logs.dir, cfg.runtime.resolvConf} {
		if p != "" && !filepath.IsAbs(p) {
			t.Errorf("path %q from the file is not made absolute", p)
		}
	}
}

// configText renders a result of parseKubeletConfig for comparison.
func configText(t *testing.T, cf *configFile, err error) string {
	t.Helper()
	if err != nil {
		return "error: " + err.Error()
	}
	js, err := json.Marshal(cf.kc)
	if err != nil {
		t.Fatalf("encoding %+v: %v", cf.kc, err)
	}
	return strings.Join([]string{string(js), strings.Join(cf.ignored, ","), strings.Join(cf.unknown, ","), strings.Join(cf.warnings, "\n")}, "\n")
}
