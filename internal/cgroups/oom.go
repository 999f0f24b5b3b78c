package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// OOM kills, as the kubelet reports them: a container a process of which
// the kernel's OOM killer killed ends with reason OOMKilled. Two sources
// tell it, as neither covers every case alone:
//   - the container's own cgroup counts its OOM kills (memory.events on
//     cgroup v2, memory.oom_control on v1). It is read when the exit is
//     recorded, before the task's deletion removes the cgroup, so the exit
//     and its reason arrive together, also for exits that happened while
//     staticlet was not running;
//   - containerd's /tasks/oom event, which the shim sends when the cgroup
//     reports one. It covers a cgroup gone before staticlet read it (a
//     systemd scope collected once empty) and arrives after the exit when
//     it does. The shim misses it, though, when systemd removes the scope
//     before the shim has read the cgroup's count;
//   - so, with the systemd driver, an exited container whose scope is gone
//     is taken as OOM-killed when its pod's slice, which counts its scopes'
//     kills, has counted more than staticlet has accounted for since it
//     made or updated the slice (oomLedger). Not only on SIGKILL: the
//     killed process may be a child of the container's, which lives on
//     and exits as it will.

// OOMKills returns how many processes the OOM killer killed in the cgroup
// at cgroupsPath, a spec's in either driver's form. A cgroup that is gone
// counts none, without an error.
func (m *Manager) OOMKills(cgroupsPath string) (int, error) { return m.host.oomKills(cgroupsPath) }

// ExitOOM tells whether the OOM killer killed a process of an exited
// container whose spec's cgroupsPath is path, and accounts for the kills
// it finds: those its own cgroup counted, or with the systemd driver, when
// the container's scope is already gone, one its pod's slice counted
// beyond those accounted for (oomLedger).
func (m *Manager) ExitOOM(path string) (bool, error) {
	rel, err := RelPath(path)
	if err != nil {
		return false, err
	}
	n, found, err := m.host.oomKillsAt(rel)
	if err != nil {
		return false, err
	}
	slice := podSlice(path)
	switch {
	case n > 0:
		m.ooms.claim(slice, n)
	case !found && slice != "":
		count, err := m.host.sliceOOMKills(slice)
		if err != nil || !m.ooms.take(slice, count) {
			return false, err
		}
	default:
		return false, nil
	}
	return true, nil
}

// ClaimOOM accounts for an OOM kill, as containerd's event reported it,
// of the container whose spec's cgroupsPath is path.
func (m *Manager) ClaimOOM(path string) { m.ooms.claim(podSlice(path), 1) }

// oomKills returns how many processes the OOM killer killed in the cgroup
// at cgroupsPath, a spec's in either driver's form. A cgroup that is gone
// counts none, without an error.
func (h cgroupHost) oomKills(cgroupsPath string) (int, error) {
	rel, err := RelPath(cgroupsPath)
	if err != nil {
		return 0, err
	}
	n, _, err := h.oomKillsAt(rel)
	return n, err
}

// oomKillsAt is oomKills of the cgroup at rel, below the hierarchies'
// mounts, and tells whether the cgroup is there.
func (h cgroupHost) oomKillsAt(rel string) (int, bool, error) {
	var file string
	if h.unified {
		file = filepath.Join(h.v2Root, rel, "memory.events")
	} else {
		mnt, ok := h.v1["memory"]
		if !ok {
			return 0, false, nil
		}
		file = filepath.Join(mnt, rel, "memory.oom_control")
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, true, fmt.Errorf("reading the OOM kills of cgroup %s: %w", rel, err)
	}
	return parseOOMKills(b), true, nil
}

// parseOOMKills reads the oom_kill count of a memory.events (v2) or
// memory.oom_control (v1, kernels since 4.13) file: one "key value" pair a
// line in both.
func parseOOMKills(b []byte) int {
	n, _ := statValue(b, "oom_kill")
	return int(n)
}

// RelPath turns an OCI spec's cgroupsPath into the cgroup's path
// below a hierarchy's mount. cgroupfs paths are that already; the systemd
// driver's "slice:prefix:name" is the unit prefix-name.scope inside the
// slice, whose path nests every parent slice its dashes name, as systemd
// and runc lay them out.
func RelPath(cgroupsPath string) (string, error) {
	if strings.HasPrefix(cgroupsPath, "/") || !strings.Contains(cgroupsPath, ":") {
		return cgroupsPath, nil
	}
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) != 3 {
		return "", fmt.Errorf("cgroups path %q is neither a path nor slice:prefix:name", cgroupsPath)
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	if slice == "" {
		slice = "system.slice"
	}
	dir, err := SliceDir(slice)
	if err != nil {
		return "", err
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		unit = name + ".scope"
		if prefix != "" {
			unit = prefix + "-" + unit
		}
	}
	return filepath.Join(dir, unit), nil
}

// SliceDir returns the cgroup path of systemd slice unit name:
// "a-b-c.slice" is /a.slice/a-b.slice/a-b-c.slice, and "-.slice" the root.
func SliceDir(name string) (string, error) {
	base, ok := strings.CutSuffix(name, ".slice")
	if !ok || base == "" || strings.Contains(base, "/") {
		return "", fmt.Errorf("%q is not a systemd slice name", name)
	}
	if base == "-" {
		return "/", nil
	}
	if strings.HasPrefix(base, "-") || strings.HasSuffix(base, "-") || strings.Contains(base, "--") {
		return "", fmt.Errorf("%q is not a systemd slice name", name)
	}
	var dir, prefix string
	for _, part := range strings.Split(base, "-") {
		if prefix != "" {
			prefix += "-"
		}
		prefix += part
		dir += "/" + prefix + ".slice"
	}
	return dir, nil
}

// oomLedger keeps, for each pod slice, how many of the OOM kills the slice
// counted are accounted for: those before staticlet last made or updated
// it, and those since that marked a container. A kill beyond those is one
// whose scope systemd removed before anyone read it. A slice staticlet
// has not touched since it started has no entry, and no kill is guessed
// for it. Safe for concurrent use; its zero value is ready.
type oomLedger struct {
	mu      sync.Mutex // guards claimed
	claimed map[string]int
}

// baseline accounts for every kill slice counts now, if it has no entry.
func (l *oomLedger) baseline(slice string, count int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.claimed[slice]; ok {
		return
	}
	if l.claimed == nil {
		l.claimed = map[string]int{}
	}
	l.claimed[slice] = count
}

// claim accounts for n kills in slice that marked a container.
func (l *oomLedger) claim(slice string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.claimed[slice]; ok {
		l.claimed[slice] += n
	}
}

// take claims one kill of slice, whose count is now count, if there is
// one not accounted for.
func (l *oomLedger) take(slice string, count int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	claimed, ok := l.claimed[slice]
	if !ok || count <= claimed {
		return false
	}
	l.claimed[slice] = claimed + 1
	return true
}

// forget drops slice, once it is gone.
func (l *oomLedger) forget(slice string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.claimed, slice)
}

// podSlice returns the slice of a cgroupsPath in systemd's form; empty for
// a cgroupfs path.
func podSlice(cgroupsPath string) string {
	if strings.HasPrefix(cgroupsPath, "/") {
		return ""
	}
	slice, _, ok := strings.Cut(cgroupsPath, ":")
	if !ok {
		return ""
	}
	return slice
}

// sliceOOMKills returns the OOM kills slice counted; 0 when it is gone.
func (h cgroupHost) sliceOOMKills(slice string) (int, error) {
	dir, err := SliceDir(slice)
	if err != nil {
		return 0, err
	}
	n, _, err := h.oomKillsAt(dir)
	return n, err
}
