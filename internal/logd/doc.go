// Package logd writes containers' logs for the whole node from one
// process, so that a container's logging costs a few kilobytes rather than
// a log driver process of its own.
//
// The runc shim still starts one program per container (containerd's
// binary logging), with the read ends of the container's stdout and stderr
// as descriptors 3 and 4: the forwarder, a static program of about a
// kilobyte and a half written in assembly (forwarder/), with no C library
// and no runtime. It tells the shim it is ready at once, then hands both
// descriptors and its arguments (the log file, its rotation) to the log
// daemon over a Unix socket, and keeps its own copies: if the daemon goes
// away, the output waits in the pipes and the forwarder hands them to the
// next daemon. When the streams end the daemon says so once it wrote
// everything, and the forwarder exits, as a log driver does. When the shim
// asks it to stop (having closed its ends of the pipes), it waits at most
// 10 s for that, so that a deleted task's log is complete; with no daemon
// to hand the pipes to, it exits at once.
//
// The daemon is a program of its own, cmd/staticlet-logd, or staticlet's
// binary where that is not installed beside it, run as `log-daemon DIR`;
// one runs per root dir, holding DIR/lock. It writes the CRI log format with
// rotation (package logs), while staticlet is stopped or restarting as
// well. It runs only while containers need it: it exits once no container
// has been logging through it for a while (Config.Idle), staticlet
// running or not, and staticlet starts it again before it starts a
// container (Install.Ensure) and wherever a forwarder waits for one
// (Keep). It reads every container's pipes from one
// goroutine, through one epoll set and one buffer, so that a container
// costs it a few hundred bytes of state; Serve owns that goroutine and
// returns once it ended.
package logd
