package logs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PodDir is the directory of a pod's logs under podLogsDir, the kubelet's
// layout: <namespace>_<name>_<uid>.
func PodDir(podLogsDir, namespace, name, uid string) string {
	return filepath.Join(podLogsDir, namespace+"_"+name+"_"+uid)
}

// FileName is the live log file of a container's instance: <restartCount>.log.
func FileName(restartCount int) string { return strconv.Itoa(restartCount) + ".log" }

// FindLog returns the live log file of one instance of a container:
// <podLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
//
// The directory is named after the UID of the pod the sandbox was created
// for, which is not always the pod's current UID: a container-only edit
// keeps the sandbox (and its directory) while the UID follows the new
// content. So every directory of the pod's namespace and name is looked
// at (namespaces and names cannot hold '_', so the pattern matches no other
// pod), and the most recently written file of that name wins; uid breaks a
// tie. The error matches fs.ErrNotExist when there is no such file.
func FindLog(podLogsDir, namespace, name, uid, container string, restartCount int) (string, error) {
	rel := filepath.Join(container, FileName(restartCount))
	dirs, err := filepath.Glob(filepath.Join(podLogsDir, globEscape(namespace+"_"+name+"_")+"*"))
	if err != nil {
		return "", err
	}
	own := PodDir(podLogsDir, namespace, name, uid)
	best := ""
	var bestTime int64
	for _, d := range dirs {
		fi, err := os.Stat(filepath.Join(d, rel))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		t := fi.ModTime().UnixNano()
		if best == "" || t > bestTime || (t == bestTime && d == own) {
			best, bestTime = filepath.Join(d, rel), t
		}
	}
	if best == "" {
		return "", fmt.Errorf("no log file %s for pod %s/%s: %w", rel, namespace, name, fs.ErrNotExist)
	}
	return best, nil
}

// globEscape quotes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// newerInstance tells whether the directory of the instance log path holds
// the log of a later instance (<n>.log with a greater n): the container
// was restarted.
func newerInstance(path string) bool {
	n, ok := instance(filepath.Base(path))
	if !ok {
		return false
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if m, ok := instance(e.Name()); ok && m > n {
			return true
		}
	}
	return false
}

// instance parses a live log file name, <n>.log.
func instance(name string) (int, bool) {
	s, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}
