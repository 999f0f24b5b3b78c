#!/usr/bin/env bash
# Runs staticlet for real on manifests/: starts containerd if nothing answers
# on its socket, imports the locally built busybox image, starts staticlet in
# the background and shows its pods. "demo.sh stop" stops what "start" began
# and removes the demo's pods.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

state=/run/staticlet-demo
sock=/run/containerd/containerd.sock
bin=bin/staticlet

wait_for() { # wait_for SECONDS COMMAND...
	local deadline=$((SECONDS + $1)); shift
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then return 1; fi
		sleep 0.2
	done
}

start_containerd() {
	if ctr --address "$sock" version >/dev/null 2>&1; then return; fi
	if [ -d /run/systemd/system ] && systemctl start containerd 2>/dev/null; then
		wait_for 30 ctr --address "$sock" version && return
	fi
	echo "starting containerd (log: $state/containerd.log)"
	containerd >"$state/containerd.log" 2>&1 &
	echo $! >"$state/containerd.pid"
	wait_for 30 ctr --address "$sock" version || { tail -20 "$state/containerd.log"; exit 1; }
}

all_running() {
	local out
	out=$("$bin" get pods) || return 1
	[ "$(echo "$out" | tail -n +2 | grep -c .)" -ge 3 ] || return 1
	! echo "$out" | tail -n +2 | grep -qv Running
}

start() {
	mkdir -p "$state"
	if [ -f "$state/staticlet.pid" ] && kill -0 "$(cat "$state/staticlet.pid")" 2>/dev/null; then
		echo "the demo is already running: make demo-stop first"; exit 1
	fi
	start_containerd
	# The image arrives as an air-gapped node's would: an archive dropped into
	# the import directory (--image-import-dir, default <root-dir>/images).
	mkdir -p /var/lib/staticlet/images
	go run ./internal/testutil/testimage/mkimage -o "$state/busybox.tar"
	mv "$state/busybox.tar" /var/lib/staticlet/images/busybox.tar
	echo "starting staticlet on manifests/ (log: $state/staticlet.log)"
	"$bin" run --manifest-dir manifests --containerd-address "$sock" >"$state/staticlet.log" 2>&1 &
	echo $! >"$state/staticlet.pid"
	if ! wait_for 60 all_running; then
		echo "pods did not all reach Running in 60s:"; "$bin" get pods || true; tail -20 "$state/staticlet.log"; exit 1
	fi
	"$bin" get pods -o wide
	echo
	"$bin" get manifests
	echo
	wait_for 30 sh -c "'$bin' get images | grep -q imported" || true
	"$bin" get images
	cat <<TXT

staticlet runs in the background (pid $(cat "$state/staticlet.pid")). Try:
  $bin describe pod web-$(hostname | tr 'A-Z' 'a-z')
  edit manifests/ticker.yaml and run '$bin get pods' again
  make demo-stop     # stops staticlet and removes the demo's pods
TXT
}

# stop_log_daemon ends the log daemon of the demo's root dir, whose lock
# file names it.
stop_log_daemon() {
	local pid
	pid=$(cat /var/lib/staticlet/logd/lock 2>/dev/null) || return 0
	[ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q 'log-daemon /var/lib/staticlet/logd' || return 0
	kill "$pid" 2>/dev/null || true
	wait_for 10 sh -c "! kill -0 $pid" || echo "the log daemon (pid $pid) is still running"
}

stop() {
	if [ -f "$state/staticlet.pid" ]; then
		kill "$(cat "$state/staticlet.pid")" 2>/dev/null || true
		rm -f "$state/staticlet.pid"
	fi
	# A staticlet with no manifests removes every pod it finds, then idles.
	mkdir -p "$state/empty"
	"$bin" run --manifest-dir "$state/empty" --containerd-address "$sock" >"$state/cleanup.log" 2>&1 &
	local pid=$!
	no_containers() { [ -z "$(ctr --address "$sock" -n staticlet containers list -q)" ]; }
	local gone=yes
	wait_for 90 no_containers || { gone=; echo "some pods are still stopping"; }
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	# The log daemon exits by itself 30 s after the last container's log
	# ended; with every container gone there is nothing left for it to write.
	if [ -n "$gone" ]; then stop_log_daemon; fi
	if [ -f "$state/containerd.pid" ]; then
		kill "$(cat "$state/containerd.pid")" 2>/dev/null || true
		rm -f "$state/containerd.pid"
	fi
	echo "demo stopped"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
