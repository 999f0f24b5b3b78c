package pauseprog

import "encoding/binary"

// arm64 is the program for AArch64. System calls: write 64, rt_sigaction
// 134, prctl 167, ppoll 73 (there is no pause; ppoll of no descriptors and no timeout
// waits for a signal), exit_group 94; number in x8, arguments in x0-x4.
var arm64 = arch{machine: 183, code: arm64Code}

func arm64Code(l layout) ([]byte, int) {
	var a a64
	sigaction := func(sig uint16, act int) {
		a.movz(8, 134)
		a.movz(0, sig)
		a.adr(1, act)
		a.movz(2, 0)
		a.movz(3, 8) // the mask's size
		a.svc()
		a.cbnz(0, "fail")
	}
	sigaction(sigTERM, l.actExit)
	sigaction(sigINT, l.actExit)
	sigaction(sigCHLD, l.actIgn)
	a.movz(8, 167)
	a.movz(0, prSetName)
	a.adr(1, l.name)
	a.svc()
	a.cbnz(0, "fail")
	a.label("wait")
	a.movz(8, 73)
	for r := uint32(0); r <= 4; r++ {
		a.movz(r, 0)
	}
	a.svc()
	a.branch("wait")
	a.label("term")
	a.movz(8, 94)
	a.movz(0, 0)
	a.svc()
	a.label("fail")
	a.movz(8, 64)
	a.movz(0, 2)
	a.adr(1, l.failMsg)
	a.movz(2, uint16(len(failMessage)))
	a.svc()
	a.movz(8, 94)
	a.movz(0, 1)
	a.svc()
	return a.done(), a.labels["term"]
}

// a64 assembles the few AArch64 instructions the program needs; each is
// four bytes.
type a64 struct {
	words  []uint32
	labels map[string]int
	fixups []a64fixup
}

// a64fixup is a branch at word index at to label, of kind cbnz or b.
type a64fixup struct {
	at    int
	label string
}

func (a *a64) emit(w uint32) { a.words = append(a.words, w) }
func (a *a64) pc() int       { return 4 * len(a.words) }

// movz sets register r to v (MOVZ Xr, #v).
func (a *a64) movz(r uint32, v uint16) { a.emit(0xd2800000 | uint32(v)<<5 | r) }

// adr sets register r to the address target bytes after the first
// instruction.
func (a *a64) adr(r uint32, target int) {
	imm := uint32(target-a.pc()) & 0x1fffff
	a.emit(0x10000000 | (imm&3)<<29 | (imm>>2)<<5 | r)
}

func (a *a64) svc() { a.emit(0xd4000001) }

func (a *a64) cbnz(r uint32, label string) {
	a.fixups = append(a.fixups, a64fixup{at: len(a.words), label: label})
	a.emit(0xb5000000 | r)
}

func (a *a64) branch(label string) {
	a.fixups = append(a.fixups, a64fixup{at: len(a.words), label: label})
	a.emit(0x14000000)
}

func (a *a64) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = a.pc()
}

func (a *a64) done() []byte {
	for _, f := range a.fixups {
		off := uint32((a.labels[f.label] - 4*f.at) / 4)
		if a.words[f.at]&0xfc000000 == 0x14000000 {
			a.words[f.at] |= off & 0x3ffffff
		} else {
			a.words[f.at] |= (off & 0x7ffff) << 5
		}
	}
	out := make([]byte, 0, 4*len(a.words))
	for _, w := range a.words {
		out = binary.LittleEndian.AppendUint32(out, w)
	}
	return out
}
