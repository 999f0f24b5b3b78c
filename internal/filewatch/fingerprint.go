package filewatch

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// digest fingerprints a path's content. The zero value is no content: the
// path does not exist.
type digest struct {
	present bool
	sum     [sha256.Size]byte
}

// limits bound the work of one fingerprint.
type limits struct {
	maxEntries int
	maxBytes   int64
}

// snapshot is what fingerprinting a path found.
type snapshot struct {
	digest digest
	// dirs are the directories to watch for the path, by their real path
	// (no symbolic link in it, so that inotify reports events under the
	// names they are looked up by), with what each was when listed.
	dirs map[string]fs.FileInfo
	// problems are what kept the fingerprint from covering all the
	// content: bounds reached, entries that could not be read.
	problems []string
}

// Entry kinds, written before each entry's name so that a file and a
// directory or link of the same name differ.
const (
	kindFile    = 'f'
	kindDir     = 'd'
	kindLink    = 'l' // a link a container cannot follow: its target's text
	kindSpecial = 's' // a socket, device, FIFO or pseudo file system: its type, never read
	kindCycle   = 'c' // a link back to a directory being listed
	kindUnread  = 'u' // an entry that could not be read
	kindCut     = 't' // the limits were reached here
)

// errLimit ends a walk that reached its limits.
var errLimit = errors.New("limit reached")

// fingerprint fingerprints path's content as a container that mounts it
// sees it (see the package doc), and finds the directories whose events may
// change it. A path that does not exist has the zero digest and no error;
// an error means the fingerprint could not be taken (the caller keeps the
// one it had).
func fingerprint(path string, lim limits) (snapshot, error) {
	s := snapshot{dirs: map[string]fs.FileInfo{}}
	s.watchAncestors(path)
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling link counts as missing: a mount would fail alike.
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("resolving %s: %w", path, err)
	}
	s.watch(filepath.Dir(real))
	info, err := os.Stat(real)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading %s: %w", path, err)
	}

	h := sha256.New()
	switch pfs := pseudoFS(real); {
	case pfs != "":
		writeEntry(h, kindSpecial, ".", []byte(pfs))
		s.problems = append(s.problems, fmt.Sprintf("on %s, whose content is not compared", pfs))
	case info.Mode().IsRegular():
		f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return s, nil
		}
		if err != nil {
			return s, fmt.Errorf("reading %s: %w", path, err)
		}
		budget := lim.maxBytes
		sum, cut, err := hashFile(f, &budget)
		if err != nil {
			return s, fmt.Errorf("reading %s: %w", path, err)
		}
		writeEntry(h, kindFile, ".", sum[:])
		if cut {
			s.problems = append(s.problems, fmt.Sprintf("only the first %d bytes are compared", lim.maxBytes))
		}
	case info.IsDir():
		if err := s.walk(h, real, info, lim); err != nil {
			return s, fmt.Errorf("reading directory %s: %w", path, err)
		}
	default:
		writeEntry(h, kindSpecial, ".", []byte(info.Mode().Type().String()))
	}
	s.digest.present = true
	h.Sum(s.digest.sum[:0])
	return s, nil
}

// watchAncestors adds the directories whose entries can replace path: the
// nearest existing ancestor (its parent, when it exists), and the
// directory of each symbolic link on the way to it (a ConfigMap-style
// "..data" link swapped for another).
func (s *snapshot) watchAncestors(path string) {
	nearest := false
	for p := path; ; {
		parent := filepath.Dir(p)
		if parent == p {
			return
		}
		if info, err := os.Lstat(p); err == nil && info.Mode()&fs.ModeSymlink != 0 {
			s.watch(parent)
		}
		if !nearest {
			nearest = s.watch(parent)
		}
		p = parent
	}
}

// watch adds dir, by its real path, if it is a directory, and reports
// whether it did.
func (s *snapshot) watch(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	info, err := os.Stat(real)
	if err != nil || !info.IsDir() {
		return false
	}
	s.dirs[real] = info
	return true
}

// walk hashes directory dir (a real path, whose info is info) into h, and
// adds its subdirectories to the watched ones.
func (s *snapshot) walk(h hash.Hash, dir string, info fs.FileInfo, lim limits) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	w := &walker{s: s, h: h, root: root, base: dir, entries: lim.maxEntries, bytes: lim.maxBytes}
	err = w.dir(".", info, false)
	switch {
	case errors.Is(err, errLimit):
		writeEntry(h, kindCut, "", nil)
		s.problems = append(s.problems, fmt.Sprintf("only the first %d entries and %d bytes are compared", lim.maxEntries, lim.maxBytes))
		return nil
	case err != nil:
		return err
	}
	return nil
}

// walker lists one directory tree through an os.Root, which follows
// symbolic links the way a container that mounts the tree would: only
// relative ones that stay inside.
type walker struct {
	s       *snapshot
	h       hash.Hash
	root    *os.Root
	base    string        // the real path of root
	stack   []fs.FileInfo // the directories being listed, to stop link cycles
	entries int           // entries left to list
	bytes   int64         // bytes left to read
}

// dir hashes the entries of directory rel, in name order. viaLink is set
// when rel was reached through a symbolic link: its real directory is
// listed (and watched) under its own name too, so it is not watched again.
func (w *walker) dir(rel string, info fs.FileInfo, viaLink bool) error {
	if slices.ContainsFunc(w.stack, func(fi fs.FileInfo) bool { return os.SameFile(fi, info) }) {
		writeEntry(w.h, kindCycle, rel, nil)
		return nil
	}
	if rel != "." {
		if pfs := pseudoFS(filepath.Join(w.base, rel)); pfs != "" {
			// A mount of /proc or /sys inside: not listed (see pseudoFS).
			writeEntry(w.h, kindSpecial, rel, []byte(pfs))
			return nil
		}
	}
	if !viaLink {
		w.s.dirs[filepath.Join(w.base, rel)] = info
	}
	f, err := w.root.Open(rel)
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	w.stack = append(w.stack, info)
	defer func() { w.stack = w.stack[:len(w.stack)-1] }()
	for _, e := range ents {
		if w.entries--; w.entries < 0 {
			return errLimit
		}
		if err := w.entry(filepath.Join(rel, e.Name()), e, viaLink); err != nil {
			return err
		}
	}
	return nil
}

// entry hashes one entry, name (relative to the root).
func (w *walker) entry(name string, e fs.DirEntry, viaLink bool) error {
	info, err := e.Info()
	if e.Type()&fs.ModeSymlink != 0 {
		viaLink = true
		info, err = w.root.Stat(name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			// Absolute, or leading out: the container resolves it in
			// its own root, which is not ours to read.
			target, lerr := w.root.Readlink(name)
			if lerr == nil {
				writeEntry(w.h, kindLink, name, []byte(target))
				return nil
			}
			err = lerr
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Gone since the listing (the event that follows brings a new
		// fingerprint), or a dangling link: nothing to see in either.
		return nil
	case err != nil:
		return w.unread(name, err)
	case info.IsDir():
		writeEntry(w.h, kindDir, name, nil)
		return w.dir(name, info, viaLink)
	case !info.Mode().IsRegular():
		writeEntry(w.h, kindSpecial, name, []byte(info.Mode().Type().String()))
		return nil
	}
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return w.unread(name, err)
	}
	sum, cut, err := hashFile(f, &w.bytes)
	if err != nil {
		return w.unread(name, err)
	}
	writeEntry(w.h, kindFile, name, sum[:])
	if cut {
		return errLimit
	}
	return nil
}

// unread hashes an entry that could not be read as such, and notes why.
func (w *walker) unread(name string, err error) error {
	writeEntry(w.h, kindUnread, name, nil)
	w.s.problems = append(w.s.problems, fmt.Sprintf("%s: %v", name, err))
	return nil
}

// hashFile returns the SHA-256 of f's content (and closes f), reading no
// more than *budget bytes and taking what it read from it; cut tells that
// the file had more. A file that is not regular (a FIFO swapped in since it
// was listed) hashes as empty, unread.
func hashFile(f *os.File, budget *int64) (sum [sha256.Size]byte, cut bool, err error) {
	defer f.Close()
	h := sha256.New()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		h.Sum(sum[:0])
		return sum, false, err
	}
	n, err := io.Copy(h, io.LimitReader(f, *budget))
	if err != nil {
		return sum, false, err
	}
	*budget -= n
	if *budget == 0 {
		var one [1]byte
		m, err := f.Read(one[:])
		if err != nil && !errors.Is(err, io.EOF) {
			return sum, false, err
		}
		cut = m > 0
	}
	h.Sum(sum[:0])
	return sum, cut, nil
}

// writeEntry writes one entry into h: its kind, its name and its data,
// each framed so that no two different entries write the same bytes.
func writeEntry(h hash.Hash, kind byte, name string, data []byte) {
	var n [8]byte
	putLen := func(l int) {
		for i := range n {
			n[i] = byte(uint64(l) >> (8 * i))
		}
		h.Write(n[:])
	}
	h.Write([]byte{kind})
	putLen(len(name))
	h.Write([]byte(name))
	putLen(len(data))
	h.Write(data)
}
