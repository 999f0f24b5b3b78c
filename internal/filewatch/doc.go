// Package filewatch tells when the content of a host file or directory that
// a container mounts changes: it is what the restart-on-change annotation
// (pod.AnnotationRestartOnChange) needs from the file system.
//
// A Watcher is told, through Set, what each pod's containers mount
// (pod.WatchTarget, from (*pod.Pod).WatchTargets), and sends a
// pod.FileChange per container on the channel Changes returns when the
// content of a path it mounts changes. It decides nothing about the
// container: the reconciler restarts it, and writes the event.
//
// What counts as a change. A path's content is fingerprinted (SHA-256):
// a regular file's bytes; a directory's entries, recursively, by name and
// content, seen the way a container that mounts it sees them (a symbolic
// link inside it is followed when it stays inside; one that is absolute or
// leads out counts by its target's text, since the container resolves it
// in its own root); a socket, device or FIFO by its type only, never read;
// nothing on a kernel pseudo file system (/proc, /sys, cgroups), whose
// content is the kernel's ever-changing state.
// The path itself is resolved on the host, as the runtime does when it
// mounts it. A change is a new fingerprint: a touch, a chmod, or a rewrite
// with the same bytes changes nothing. The fingerprint covers at most
// Config.MaxEntries entries and Config.MaxBytes bytes of content; what lies
// past that bound is not seen (and is logged once).
//
// Appearing and going away. A path that does not exist is watched for
// appearing, and its appearing is a change. A path going away is not: a
// restart cannot give the container content that is not there (and would
// fail to mount a missing file), while the running container keeps what it
// had. When the path comes back with content other than what it last had,
// that is a change; when it comes back the same (a delete-and-restore), it
// is not. Inside a watched directory, a file removed is a change like any
// other.
//
// Debounce. Each path is fingerprinted again Config.Debounce after the last
// file system event that may concern it (at most ten Debounce periods after
// the first of a burst, for a file that is written without pause), so a
// burst of writes gives one change, after the writes settle. Since only
// directories are watched (a file's parent, a directory's tree, the
// directories of the symbolic links on the way, the nearest existing
// ancestor of a missing path), an editor's rename over a file and a
// ConfigMap-style swap of a "..data" link are seen like a write. Every
// Config.Resync every path is fingerprinted again even without events, for
// file systems where inotify misses changes (NFS, FUSE, a directory that
// outgrew the inotify watch limit) and for links whose intermediate
// directories are not watched.
//
// The first fingerprint of a path, taken when Set first names it, is what
// later ones are compared with: a change made before that, or while
// staticlet was not running, is not seen.
//
// Concurrency: Set and Changes may be called from any goroutine, before
// Run too; Run owns the file system watcher and the one goroutine that
// fingerprints, and returns once they have stopped. Changes is never
// closed.
package filewatch
