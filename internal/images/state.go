package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// record is what the state file keeps of one imported content.
type record struct {
	// File is the name of the file it was first imported from.
	File   string    `json:"file"`
	Images []string  `json:"images"`
	Time   time.Time `json:"time"`
}

// stateFile is the records of imported contents, by digest, on disk so
// that a restarted staticlet does not import again. Only Run's goroutine
// uses it.
type stateFile struct {
	path    string
	records map[string]record
}

// stateVersion is the layout of the state file.
type stateVersion struct {
	Imported map[string]record `json:"imported"`
}

// load reads the records; a missing file is none. On error the records
// are empty.
func (s *stateFile) load() error {
	s.records = map[string]record{}
	if s.path == "" {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", s.path, err)
	}
	var v stateVersion
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("decoding %s: %w", s.path, err)
	}
	if v.Imported != nil {
		s.records = v.Imported
	}
	return nil
}

// save writes the records atomically: to a temporary file renamed over the
// state file, so that a crash leaves the old records or the new ones.
func (s *stateFile) save() error {
	if s.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(stateVersion{Imported: s.records}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", s.path, err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", s.path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), "."+filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}
