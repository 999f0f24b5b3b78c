package diskpressure

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestEvaluate(t *testing.T) {
	const gi, mi = 1 << 30, 1 << 20
	root, logs := []string{"/var/lib/staticlet"}, []string{"/var/log/pods"}
	amounts := Thresholds{Available: Threshold{Amount: gi, Text: "1Gi"}, InodesFree: Threshold{Amount: 1000, Text: "1000"}}
	for _, tc := range []struct {
		name string
		fs   []Usage
		th   Thresholds
		want []string
	}{
		{"plenty", []Usage{{Paths: root, Bytes: 10 * gi, Available: 5 * gi, Inodes: 1000, InodesFree: 900}}, DefaultThresholds, nil},
		{"exactly 10% available is no pressure", []Usage{{Paths: root, Bytes: 10 * gi, Available: gi, Inodes: 100, InodesFree: 5}}, DefaultThresholds, nil},
		{"just under 10% available", []Usage{{Paths: root, Bytes: 10 * gi, Available: gi - 1}}, DefaultThresholds,
			[]string{"/var/lib/staticlet: nodefs.available 9.9% < 10%"}},
		{"full", []Usage{{Paths: root, Bytes: gi, Available: 0, Inodes: 100, InodesFree: 50}}, DefaultThresholds,
			[]string{"/var/lib/staticlet: nodefs.available 0% < 10%"}},
		{"inodes short", []Usage{{Paths: root, Bytes: gi, Available: gi, Inodes: 1000, InodesFree: 49}}, DefaultThresholds,
			[]string{"/var/lib/staticlet: nodefs.inodesFree 4.9% < 5%"}},
		{"no inode count (btrfs) is not a shortage", []Usage{{Paths: root, Bytes: gi, Available: gi}}, DefaultThresholds, nil},
		{"an unreadable filesystem crosses nothing", []Usage{{Paths: root}}, DefaultThresholds, nil},
		{"the logs' filesystem alone", []Usage{
			{Paths: root, Bytes: gi, Available: gi / 2},
			{Paths: logs, Bytes: 100, Available: 3, Inodes: 10, InodesFree: 0},
		}, DefaultThresholds, []string{"/var/log/pods: nodefs.available 3% < 10%", "/var/log/pods: nodefs.inodesFree 0% < 5%"}},
		{"one filesystem for both", []Usage{{Paths: append(root, logs...), Bytes: 1000, Available: 12}}, DefaultThresholds,
			[]string{"/var/lib/staticlet, /var/log/pods: nodefs.available 1.2% < 10%"}},
		{"thresholds off", []Usage{{Paths: root, Bytes: gi, Available: 0, Inodes: 100, InodesFree: 0}}, Thresholds{}, nil},
		{"a percentage as given", []Usage{{Paths: root, Bytes: 1000, Available: 20}}, Thresholds{Available: Threshold{Fraction: 0.025, Text: "2.5%"}},
			[]string{"/var/lib/staticlet: nodefs.available 2% < 2.5%"}},
		{"bytes under an amount, in its units", []Usage{{Paths: root, Bytes: 100 * gi, Available: 120*mi + mi/2, Inodes: 1e6, InodesFree: 999}}, amounts,
			[]string{"/var/lib/staticlet: nodefs.available 120.5Mi < 1Gi", "/var/lib/staticlet: nodefs.inodesFree 999 < 1000"}},
		{"just under an amount", []Usage{{Paths: root, Bytes: 100 * gi, Available: gi - 1}}, amounts,
			[]string{"/var/lib/staticlet: nodefs.available 1023.9Mi < 1Gi"}},
		{"exactly an amount is no pressure", []Usage{{Paths: root, Bytes: 100 * gi, Available: gi, Inodes: 1e6, InodesFree: 1000}}, amounts, nil},
		{"an amount in decimal units", []Usage{{Paths: root, Bytes: 100 * gi, Available: 1_500_000}}, Thresholds{Available: Threshold{Amount: 2e9, Text: "2G"}},
			[]string{"/var/lib/staticlet: nodefs.available 1.5M < 2G"}},
		{"an amount of plain bytes", []Usage{{Paths: root, Bytes: 100 * gi, Available: 1500}}, Thresholds{Available: Threshold{Amount: 2000, Text: "2000"}},
			[]string{"/var/lib/staticlet: nodefs.available 1500 < 2000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range Evaluate(tc.fs, tc.th) {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Evaluate(%+v, %+v) = %q, want %q", tc.fs, tc.th, got, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	t1, t2, t3 := time.Unix(100, 0), time.Unix(200, 0), time.Unix(300, 0)
	full := []Usage{{Paths: []string{"/r"}, Bytes: 100, Available: 1}}
	fuller := []Usage{{Paths: []string{"/r"}, Bytes: 100, Available: 0}}
	fine := []Usage{{Paths: []string{"/r"}, Bytes: 100, Available: 50}}
	s := Next(State{}, fine, DefaultThresholds, t1)
	if s.Pressure || !s.Since.Equal(t1) || s.Message != "" {
		t.Fatalf("first look, no pressure: %+v", s)
	}
	s = Next(s, full, DefaultThresholds, t2)
	if !s.Pressure || !s.Since.Equal(t2) || s.Message != "/r: nodefs.available 1% < 10%" {
		t.Fatalf("pressure begins: %+v", s)
	}
	s = Next(s, fuller, DefaultThresholds, t3)
	if !s.Pressure || !s.Since.Equal(t2) || s.Message != "/r: nodefs.available 0% < 10%" {
		t.Fatalf("pressure goes on, since its start: %+v", s)
	}
	s = Next(s, fine, DefaultThresholds, t3)
	if s.Pressure || !s.Since.Equal(t3) {
		t.Fatalf("pressure clears: %+v", s)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "root"), filepath.Join(dir, "not", "yet")
	fs, err := Read([]string{dir, a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fmt.Sprint(fs[0].Paths) != fmt.Sprint([]string{dir, a, b}) || fs[0].Bytes == 0 || fs[0].Available > fs[0].Bytes {
		t.Errorf("Read(three paths on one filesystem) = %+v, want one filesystem naming all three", fs)
	}
}
