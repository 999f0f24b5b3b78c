// Package procfs reads the process table from /proc: each process's
// parent, state, name, start time and arguments, as the sweeps that find
// processes staticlet's containers left (and the tests' clean-up) need
// them, and decodes the paths of /proc's mountinfo. It reads; it signals
// nothing. Its functions are safe for concurrent use.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Proc is one process.
type Proc struct {
	PID, PPID int
	State     byte   // as in /proc/<pid>/stat: R, S, Z, ...
	Comm      string // the command name, at most 15 bytes
	// Start is when the process started, in clock ticks after boot; with
	// PID, it names a process across PID reuse.
	Start uint64
	Args  []string // empty for a zombie
}

// List reads every process. Processes that exit while being read are left
// out.
func List() ([]Proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := Read(pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Read reads process pid's stat line and arguments.
func Read(pid int) (Proc, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return Proc{}, err
	}
	p, err := ParseStat(string(stat))
	if err != nil {
		return Proc{}, fmt.Errorf("parsing %s/stat: %w", dir, err)
	}
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return Proc{}, err
	}
	if len(cmdline) > 0 {
		p.Args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	}
	return p, nil
}

// ParseStat parses a /proc/<pid>/stat line, "pid (comm) state ppid ...
// starttime ...". The command name may hold spaces and parentheses, hence
// the last ')'. A line cut short of the start time leaves Start 0.
func ParseStat(stat string) (Proc, error) {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return Proc{}, fmt.Errorf("malformed stat %q", stat)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(stat[:open]))
	if err != nil {
		return Proc{}, fmt.Errorf("malformed stat %q: %w", stat, err)
	}
	f := strings.Fields(stat[closing+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return Proc{}, fmt.Errorf("malformed stat %q", stat)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Proc{}, fmt.Errorf("malformed stat %q: %w", stat, err)
	}
	p := Proc{PID: pid, PPID: ppid, State: f[0][0], Comm: stat[open+1 : closing]}
	// Fields 3 (state) to 22 (starttime), counted from 1 as proc(5) does.
	if len(f) > 19 {
		if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
			return Proc{}, fmt.Errorf("malformed stat %q: %w", stat, err)
		}
	}
	return p, nil
}

// ArgValue returns the value of flag name ("-name v", "--name v" or
// "-name=v") in args, or "".
func ArgValue(args []string, name string) string {
	for i, a := range args {
		for _, prefix := range []string{"-" + name, "--" + name} {
			if a == prefix && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, prefix+"="); ok {
				return v
			}
		}
	}
	return ""
}
