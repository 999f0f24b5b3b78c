package diskpressure

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestSplitEvictionHard(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "nodefs.available<5%,nodefs.inodesFree<1%", want: "map[nodefs.available:5% nodefs.inodesFree:1%]"},
		{in: " nodefs.available < 1Gi , ", want: "map[nodefs.available:1Gi]"},
		{in: "nodefs.available<5%,nodefs.available<6%", want: "map[nodefs.available:6%]"},
		{in: "", want: "map[]"},
		{in: "nodefs.available>5%", err: `"nodefs.available>5%": want signal<value`},
		{in: "nodefs.available<=5%", err: `"nodefs.available<=5%"`},
		{in: "nodefs.available=5%", err: `"nodefs.available=5%"`},
		{in: "<5%", err: `"<5%"`},
		{in: "nodefs.available<5%<6%", err: `"nodefs.available<5%<6%"`},
	} {
		got, err := SplitEvictionHard(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SplitEvictionHard(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
		case err != nil || fmt.Sprint(got) != tc.want:
			t.Errorf("SplitEvictionHard(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     map[string]string
		want   Thresholds
		others string
		err    string
	}{
		{name: "the defaults", in: DefaultEvictionHard(), want: DefaultThresholds},
		{name: "none named: none checked", in: map[string]string{}},
		{name: "percentages", in: map[string]string{"nodefs.available": "5%", "nodefs.inodesFree": "0.5%"},
			want: Thresholds{Available: Threshold{Fraction: 0.05, Text: "5%"}, InodesFree: Threshold{Fraction: 0.005, Text: "0.5%"}}},
		{name: "quantities", in: map[string]string{"nodefs.available": "1Gi", "nodefs.inodesFree": "100k"},
			want: Thresholds{Available: Threshold{Amount: 1 << 30, Text: "1Gi"}, InodesFree: Threshold{Amount: 100000, Text: "100k"}}},
		{name: "a plain count of inodes", in: map[string]string{"nodefs.inodesFree": "1000"},
			want: Thresholds{InodesFree: Threshold{Amount: 1000, Text: "1000"}}},
		{name: "0, 0% and 100% are off", in: map[string]string{"nodefs.available": "0", "nodefs.inodesFree": "0%", "imagefs.available": "100%"},
			others: "imagefs.available"},
		{name: "the kubelet's other signals are valid", in: map[string]string{
			"memory.available": "100Mi", "imagefs.available": "15%", "imagefs.inodesFree": "5%", "containerfs.available": "10%",
			"containerfs.inodesFree": "5%", "pid.available": "10%", "allocatableMemory.available": "1Gi", "nodefs.available": "10%",
		}, want: Thresholds{Available: Percent(10)},
			others: "allocatableMemory.available containerfs.available containerfs.inodesFree imagefs.available imagefs.inodesFree memory.available pid.available"},
		{name: "unknown signal", in: map[string]string{"nodefs.avail": "10%"}, err: `nodefs.avail<10%: unknown eviction signal "nodefs.avail"`},
		{name: "signal names are case-sensitive", in: map[string]string{"nodefs.inodesfree": "10%"}, err: "unknown eviction signal"},
		{name: "over 100%", in: map[string]string{"nodefs.available": "101%"}, err: "nodefs.available<101%: want a percentage from 0% to 100%"},
		{name: "negative percentage", in: map[string]string{"nodefs.available": "-1%"}, err: "nodefs.available<-1%: want a percentage"},
		{name: "not a percentage", in: map[string]string{"nodefs.available": "ten%"}, err: "nodefs.available<ten%"},
		{name: "negative quantity", in: map[string]string{"nodefs.available": "-1Gi"}, err: "nodefs.available<-1Gi: want a percentage (10%) or a quantity"},
		{name: "not a quantity", in: map[string]string{"nodefs.available": "1GB"}, err: "nodefs.available<1GB"},
		{name: "an unwatched signal's value is checked too", in: map[string]string{"memory.available": "lots"}, err: "memory.available<lots"},
		{name: "empty value", in: map[string]string{"nodefs.available": ""}, err: "nodefs.available<:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, others, err := ParseThresholds(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ParseThresholds(%v) = %+v, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || strings.Join(others, " ") != tc.others {
				t.Errorf("ParseThresholds(%v) = %+v, %q, %v; want %+v, %q", tc.in, got, others, err, tc.want, tc.others)
			}
		})
	}
}

func TestMergeDefaults(t *testing.T) {
	got := MergeDefaults(map[string]string{"nodefs.available": "1Gi", "memory.available": "100Mi"})
	want := map[string]string{"nodefs.available": "1Gi", "nodefs.inodesFree": "5%", "memory.available": "100Mi"}
	if !maps.Equal(got, want) {
		t.Errorf("MergeDefaults = %v, want %v", got, want)
	}
}
