package procfs

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	// cutime cstime priority nice threads itrealvalue, then the start time.
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 4242 1 2"
	tests := []struct {
		name string
		in   string
		want Proc
	}{
		{"plain", "12 (sh) S 1" + tail, Proc{PID: 12, PPID: 1, State: 'S', Comm: "sh", Start: 4242}},
		{"name with spaces and parentheses", "13 (a (b) c) Z 7" + tail, Proc{PID: 13, PPID: 7, State: 'Z', Comm: "a (b) c", Start: 4242}},
		{"cut short of the start time", "12 (sh) S 1 12 12 0", Proc{PID: 12, PPID: 1, State: 'S', Comm: "sh"}},
	}
	for _, tt := range tests {
		got, err := ParseStat(tt.in)
		if err != nil || got.PID != tt.want.PID || got.PPID != tt.want.PPID || got.State != tt.want.State || got.Comm != tt.want.Comm || got.Start != tt.want.Start {
			t.Errorf("%s: ParseStat(%q) = %+v, %v; want %+v", tt.name, tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "12 sh S 1", "12 (sh) S", "x (sh) S 1", "12 (sh) S x", "12 (sh) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 y 1 2"} {
		if got, err := ParseStat(bad); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestReadSelf(t *testing.T) {
	p, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != os.Getpid() || p.PPID != os.Getppid() || p.Start == 0 || len(p.Args) == 0 || p.Args[0] != os.Args[0] {
		t.Errorf("Read(self) = %+v, want PID %d, parent %d, a start time and arguments %q", p, os.Getpid(), os.Getppid(), os.Args)
	}
	procs, err := List()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range procs {
		found = found || q.PID == p.PID && q.Start == p.Start
	}
	if !found {
		t.Errorf("List() has no process %d", p.PID)
	}
}

func TestArgValue(t *testing.T) {
	args := []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "ns", "-id", "x", "--address=/a/c.sock", "-debug"}
	for name, want := range map[string]string{"namespace": "ns", "id": "x", "address": "/a/c.sock", "debug": "", "publish-binary": ""} {
		if got := ArgValue(args, name); got != want {
			t.Errorf("ArgValue(%q, %q) = %q, want %q", args, name, got, want)
		}
	}
}
