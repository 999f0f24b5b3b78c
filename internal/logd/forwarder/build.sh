#!/bin/sh
# Assembles the log forwarder for each architecture into <arch>.bin, the
# files ../forwarder.go embeds. Needs GNU binutils for x86-64 and for
# AArch64 (Debian: binutils, binutils-aarch64-linux-gnu). OUT is where the
# files go, this directory by default; TestForwarderBuild rebuilds them
# elsewhere and compares.
set -eu
cd "$(dirname "$0")"
out=${OUT:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
as --64 -o "$tmp/amd64.o" amd64.S
ld -m elf_x86_64 -static -nostdlib --build-id=none -n -s -T link.ld -o "$out/amd64.bin" "$tmp/amd64.o"
aarch64-linux-gnu-as -o "$tmp/arm64.o" arm64.S
aarch64-linux-gnu-ld -static -nostdlib --build-id=none -n -s -T link.ld -o "$out/arm64.bin" "$tmp/arm64.o"
