package main

import (
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestNetnsHolder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sb := func(id, uid string, state pod.TaskState, at time.Time) pod.Record {
		return pod.Record{ID: id, Kind: pod.KindSandbox, PodUID: uid, State: state, CreatedAt: at}
	}
	ctr := func(id, sandbox string, state pod.TaskState) pod.Record {
		return pod.Record{ID: id, Kind: pod.KindApp, SandboxID: sandbox, State: state}
	}
	cases := []struct {
		name           string
		recs           []pod.Record
		wantID, wantSB string
		wantOK         bool
	}{
		{"running container", []pod.Record{sb("sb1", "u", pod.TaskRunning, t0), ctr("c1", "sb1", pod.TaskRunning)}, "c1", "sb1", true},
		{"no container runs", []pod.Record{sb("sb1", "u", pod.TaskRunning, t0), ctr("c1", "sb1", pod.TaskExited)}, "sb1", "sb1", true},
		{"latest sandbox", []pod.Record{
			sb("old", "u", pod.TaskRunning, t0), sb("new", "u", pod.TaskRunning, t0.Add(time.Second)),
			ctr("c-old", "old", pod.TaskRunning), ctr("c-new", "new", pod.TaskRunning),
		}, "c-new", "new", true},
		{"exited sandbox", []pod.Record{sb("sb1", "u", pod.TaskExited, t0)}, "", "", false},
		{"another instance", []pod.Record{sb("sb1", "other", pod.TaskRunning, t0)}, "", "", false},
		{"none", nil, "", "", false},
	}
	for _, tc := range cases {
		id, sbID, ok := netnsHolder(tc.recs, "u")
		if id != tc.wantID || sbID != tc.wantSB || ok != tc.wantOK {
			t.Errorf("%s: netnsHolder = %q, %q, %v; want %q, %q, %v", tc.name, id, sbID, ok, tc.wantID, tc.wantSB, tc.wantOK)
		}
	}
}
