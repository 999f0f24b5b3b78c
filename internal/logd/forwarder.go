package logd

import (
	"bytes"
	_ "embed"
	"fmt"
)

// The forwarder for each architecture, built from forwarder/<arch>.S by
// forwarder/build.sh; TestForwarderBuild checks that they match.
var (
	//go:embed forwarder/amd64.bin
	forwarderAMD64 []byte
	//go:embed forwarder/arm64.bin
	forwarderARM64 []byte
)

// socketMarker is where the forwarder holds the daemon's socket path: the
// 108 bytes of its sockaddr_un's sun_path, which Forwarder fills in.
const socketMarker = "STATICLET-LOG-DAEMON-SOCKET"

// sunPathSize is the size of sun_path; the path needs a NUL after it.
const sunPathSize = 108

// Forwarder returns the forwarder program for GOARCH arch that hands its
// container's output to the daemon at socket, and false when there is none
// for arch.
func Forwarder(arch, socket string) ([]byte, bool, error) {
	var prog []byte
	switch arch {
	case "amd64":
		prog = forwarderAMD64
	case "arm64":
		prog = forwarderARM64
	default:
		return nil, false, nil
	}
	if len(socket) >= sunPathSize {
		return nil, true, fmt.Errorf("the log daemon's socket path %s is %d bytes long; a Unix socket path holds at most %d", socket, len(socket), sunPathSize-1)
	}
	at := bytes.Index(prog, []byte(socketMarker))
	if at < 0 || at+sunPathSize > len(prog) {
		return nil, true, fmt.Errorf("the %s log forwarder has no room for its socket path", arch)
	}
	out := bytes.Clone(prog)
	clear(out[at : at+sunPathSize])
	copy(out[at:], socket)
	return out, true, nil
}
