package watch

import (
	"io/fs"
	"syscall"
)

// fingerprint identifies a file's content without reading it. The change
// time is in it because no tool can set it: a rewrite that keeps size and
// mtime (cp -p, tar) still changes it.
type fingerprint struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// fingerprintOf returns the fingerprint of info, zero if it has no stat data.
func fingerprintOf(info fs.FileInfo) fingerprint {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fingerprint{}
	}
	return fingerprint{
		dev:   uint64(st.Dev), // not uint64 on every architecture
		ino:   st.Ino,
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
	}
}
