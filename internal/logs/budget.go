package logs

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// FileKind is what a file under the pod logs directory is to the node-wide
// log budget.
type FileKind int

// The kinds of files, in the order the budget removes them.
const (
	// Rotated is a rotated file, <n>.log.<time>: removed first.
	Rotated FileKind = iota
	// Earlier is the log of an earlier instance of a container, <n>.log
	// beside one with a greater n: removed next.
	Earlier
	// Live is the log of a container's latest instance, the greatest
	// <n>.log of its directory, which it may still be writing: never
	// removed (its size is bounded by the rotation).
	Live
	// Other is any other file: counted, never removed.
	Other
)

func (k FileKind) String() string {
	switch k {
	case Rotated:
		return "rotated"
	case Earlier:
		return "earlier"
	case Live:
		return "live"
	}
	return "other"
}

// LogFile is one file under the pod logs directory.
type LogFile struct {
	Path    string
	Size    int64
	ModTime time.Time
	Kind    FileKind
}

// OverBudget chooses the files to remove so that the total size of files
// fits within max bytes, as few as it takes and in the order to remove
// them: rotated files first, oldest first across every container, then
// the logs of earlier instances, oldest first. Live and other files are
// never chosen, so the total may stay over max. A max of 0 or less is no
// budget: nothing is chosen.
func OverBudget(files []LogFile, max int64) []LogFile {
	if max <= 0 {
		return nil
	}
	var total int64
	var candidates []LogFile
	for _, f := range files {
		total += f.Size
		if f.Kind == Rotated || f.Kind == Earlier {
			candidates = append(candidates, f)
		}
	}
	slices.SortFunc(candidates, func(a, b LogFile) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), a.ModTime.Compare(b.ModTime), strings.Compare(a.Path, b.Path))
	})
	var out []LogFile
	for _, f := range candidates {
		if total <= max {
			break
		}
		out = append(out, f)
		total -= f.Size
	}
	return out
}

// ScanLogFiles lists the regular files of the container directories of
// podLogsDir (<pod>/<container>/<file>), each with its kind. Files it
// cannot read are left out; a podLogsDir that does not exist holds none.
func ScanLogFiles(podLogsDir string) ([]LogFile, error) {
	pods, err := os.ReadDir(podLogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []LogFile
	for _, p := range pods {
		if !p.IsDir() {
			continue
		}
		containers, err := os.ReadDir(filepath.Join(podLogsDir, p.Name()))
		if err != nil {
			continue // removed meanwhile, with its pod
		}
		for _, c := range containers {
			if c.IsDir() {
				out = append(out, scanContainerDir(filepath.Join(podLogsDir, p.Name(), c.Name()))...)
			}
		}
	}
	return out, nil
}

// scanContainerDir lists the regular files of one container's log
// directory, with their kinds.
func scanContainerDir(dir string) []LogFile {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []LogFile
	latest := -1
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		f := LogFile{Path: filepath.Join(dir, e.Name()), Size: fi.Size(), ModTime: fi.ModTime(), Kind: Other}
		if n, ok := instance(e.Name()); ok {
			f.Kind = Earlier
			latest = max(latest, n)
		} else if isRotated(e.Name()) {
			f.Kind = Rotated
		}
		out = append(out, f)
	}
	for i, f := range out {
		if n, ok := instance(filepath.Base(f.Path)); ok && n == latest {
			out[i].Kind = Live
		}
	}
	return out
}

// isRotated tells whether name is a rotated log file's:
// <n>.log.<YYYYMMDD-hhmmss>[.<seq>].
func isRotated(name string) bool {
	i := strings.Index(name, ".log.")
	if i < 0 {
		return false
	}
	if _, ok := instance(name[:i+len(".log")]); !ok {
		return false
	}
	when, _, _ := strings.Cut(name[i+len(".log."):], ".")
	_, err := time.Parse(rotatedTimeFormat, when)
	return err == nil
}

// EnforceBudget removes the files of podLogsDir that OverBudget chooses
// for max bytes, and returns those it removed. A file that cannot be
// removed is skipped, its error joined to the result.
func EnforceBudget(podLogsDir string, max int64) ([]LogFile, error) {
	if max <= 0 {
		return nil, nil
	}
	files, err := ScanLogFiles(podLogsDir)
	if err != nil {
		return nil, err
	}
	var removed []LogFile
	var errs []error
	for _, f := range OverBudget(files, max) {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, f)
	}
	return removed, errors.Join(errs...)
}
