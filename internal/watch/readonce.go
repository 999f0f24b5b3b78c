package watch

// ReadOnce reads path (a directory or one file) once, with the same rules
// as a running directory source (skipped names, size limit, decoding), and
// returns what a source would send. It is what `staticlet validate` uses to
// judge files exactly as the daemon would.
func ReadOnce(path string, decode Decoder) Snapshot {
	d := NewDir(DirConfig{Path: path, Decode: decode})
	snap := d.scan()
	// A single read has no last good pods to keep: report the files as they
	// are now.
	for i := range snap.Files {
		if snap.Files[i].Err != nil {
			snap.Files[i].Pods, snap.Files[i].Objects = nil, nil
		}
	}
	return snap
}
