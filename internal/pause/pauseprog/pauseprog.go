// Package pauseprog makes the pause program of a pod's sandbox: a static
// executable of a few hundred bytes, written out as machine code for the
// node's architecture, with no C library and no language runtime, so that
// the process holding a pod's namespaces costs a page or two of memory and
// no build of staticlet needs a C compiler or an image to get one.
//
// The program does what the kubelet's pause does, and no more:
//
//   - SIGTERM and SIGINT end it with exit status 0. The handler is the exit
//     itself and never returns, so the program needs no signal trampoline.
//   - SIGCHLD is ignored, which makes the kernel reap its children as they
//     exit: as the PID 1 of a pod that shares its process namespace it
//     inherits the pod's orphans, and none of them stays a zombie.
//   - Once the handlers are in place it names itself "pause-ready" (prctl
//     PR_SET_NAME), which the sandbox waits for before it may stop it: a
//     signal sent earlier would find no handler, and the init of a PID
//     namespace ignores those.
//   - Then it waits for signals for ever.
//
// If a system call of the set-up fails it says so on stderr and exits with
// status 1.
package pauseprog

import "encoding/binary"

// ReadyName is the name the program gives itself once its handlers are in
// place.
const ReadyName = "pause-ready"

// The Linux constants the program uses; they are the same on every
// architecture here.
const (
	sigINT     = 2
	sigTERM    = 15
	sigCHLD    = 17
	sigIGN     = 1
	saRestorer = 0x04000000
	prSetName  = 15
)

// Program returns the pause program for GOARCH arch, and false when there
// is none for it (the caller then runs a pause of its own).
func Program(arch string) ([]byte, bool) {
	switch arch {
	case "amd64":
		return build(amd64), true
	case "arm64":
		return build(arm64), true
	}
	return nil, false
}

// base is the address the program is loaded at.
const base = 0x400000

// elfHeaderSize and phdrSize are the sizes of a 64-bit ELF header and of
// one program header; the image has two program headers.
const (
	elfHeaderSize = 64
	phdrSize      = 56
	codeOffset    = elfHeaderSize + 2*phdrSize
)

// arch is what differs between architectures: the ELF machine, and the
// code, given where its data lies.
type arch struct {
	machine uint16
	// code returns the instructions, given the addresses (relative to the
	// first instruction) of the SIGTERM/SIGINT action, the SIGCHLD action
	// and the name; term is set to the offset of the exit-0 code, which
	// the actions point at.
	code func(l layout) (code []byte, term int)
}

// layout is where the program's data lies, relative to its first
// instruction.
type layout struct {
	actExit, actIgn, name, failMsg int
}

// failMessage is what the program writes to stderr when its set-up fails.
const failMessage = "pause: setting up the signal handlers or the name failed\n"

// build lays the program out: ELF header, program headers, code, then the
// two sigaction structures and the name. The code's length does not depend
// on where the data is, so a first pass with a dummy layout sizes it.
func build(a arch) []byte {
	code, _ := a.code(layout{})
	dataOff := (len(code) + 7) &^ 7
	l := layout{actExit: dataOff, actIgn: dataOff + 32, name: dataOff + 64}
	l.failMsg = l.name + len(ReadyName) + 1
	code, term := a.code(l)
	img := make([]byte, codeOffset+l.failMsg+len(failMessage))
	copy(img[codeOffset:], code)
	termAddr := uint64(base + codeOffset + term)
	// The kernel's struct sigaction: handler, flags, restorer, mask. The
	// restorer is never used (the handler exits), but x86-64 refuses to
	// deliver a signal to a handler without one.
	putAction(img[codeOffset+l.actExit:], termAddr, termAddr)
	putAction(img[codeOffset+l.actIgn:], sigIGN, termAddr)
	copy(img[codeOffset+l.name:], ReadyName)
	copy(img[codeOffset+l.failMsg:], failMessage)
	putHeaders(img, a.machine, uint64(base+codeOffset))
	return img
}

func putAction(b []byte, handler, restorer uint64) {
	binary.LittleEndian.PutUint64(b[0:], handler)
	binary.LittleEndian.PutUint64(b[8:], saRestorer)
	binary.LittleEndian.PutUint64(b[16:], restorer)
	binary.LittleEndian.PutUint64(b[24:], 0)
}

// putHeaders writes the ELF header and the program headers: one loadable
// segment, read and execute, that is the whole file, and a stack that is
// not executable.
func putHeaders(img []byte, machine uint16, entry uint64) {
	le := binary.LittleEndian
	copy(img, []byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */, 1 /* version */})
	le.PutUint16(img[16:], 2) // ET_EXEC
	le.PutUint16(img[18:], machine)
	le.PutUint32(img[20:], 1)
	le.PutUint64(img[24:], entry)
	le.PutUint64(img[32:], elfHeaderSize) // program headers' offset
	le.PutUint64(img[40:], 0)             // no section headers
	le.PutUint32(img[48:], 0)
	le.PutUint16(img[52:], elfHeaderSize)
	le.PutUint16(img[54:], phdrSize)
	le.PutUint16(img[56:], 2)
	le.PutUint16(img[58:], 64) // section header size, though there are none
	le.PutUint16(img[60:], 0)
	le.PutUint16(img[62:], 0)

	load := img[elfHeaderSize:]
	le.PutUint32(load[0:], 1)   // PT_LOAD
	le.PutUint32(load[4:], 4|1) // PF_R|PF_X
	le.PutUint64(load[8:], 0)
	le.PutUint64(load[16:], base)
	le.PutUint64(load[24:], base)
	le.PutUint64(load[32:], uint64(len(img)))
	le.PutUint64(load[40:], uint64(len(img)))
	le.PutUint64(load[48:], 0x1000)

	stack := img[elfHeaderSize+phdrSize:]
	le.PutUint32(stack[0:], 0x6474e551) // PT_GNU_STACK
	le.PutUint32(stack[4:], 4|2)        // PF_R|PF_W
	le.PutUint64(stack[48:], 16)
}
