package pauseprog

import "encoding/binary"

// amd64 is the program for x86-64. System calls: write 1, rt_sigaction
// 13, prctl 157, pause 34, exit_group 231; number in eax, arguments in
// rdi, rsi, rdx, r10.
var amd64 = arch{machine: 62, code: amd64Code}

func amd64Code(l layout) ([]byte, int) {
	var a x86
	sigaction := func(sig uint32, act int) {
		a.movEAX(13)
		a.movEDI(sig)
		a.leaRSI(act)
		a.b(0x31, 0xd2)               // xor edx, edx
		a.b(0x41, 0xba).u32(8)        // mov r10d, 8 (the mask's size)
		a.b(0x0f, 0x05)               // syscall
		a.b(0x85, 0xc0)               // test eax, eax
		a.b(0x0f, 0x85).rel32("fail") // jnz fail
	}
	sigaction(sigTERM, l.actExit)
	sigaction(sigINT, l.actExit)
	sigaction(sigCHLD, l.actIgn)
	a.movEAX(157)
	a.movEDI(prSetName)
	a.leaRSI(l.name)
	a.b(0x0f, 0x05)
	a.b(0x85, 0xc0)
	a.b(0x0f, 0x85).rel32("fail")
	a.label("wait")
	a.movEAX(34)
	a.b(0x0f, 0x05)
	a.b(0xe9).rel32("wait") // jmp wait
	a.label("term")
	a.movEAX(231)
	a.b(0x31, 0xff) // xor edi, edi
	a.b(0x0f, 0x05)
	a.label("fail")
	a.movEAX(1)
	a.movEDI(2)
	a.leaRSI(l.failMsg)
	a.b(0xba).u32(uint32(len(failMessage))) // mov edx, len
	a.b(0x0f, 0x05)
	a.movEAX(231)
	a.movEDI(1)
	a.b(0x0f, 0x05)
	return a.done(), a.labels["term"]
}

// x86 assembles the few x86-64 instructions the program needs. Jumps take
// 32-bit displacements, so that the code's length does not depend on
// where its labels are.
type x86 struct {
	buf    []byte
	labels map[string]int
	fixups []fixup
}

// fixup is a 32-bit displacement at off to be filled with label's address
// less the end of the instruction (off+4).
type fixup struct {
	off   int
	label string
}

func (a *x86) b(bs ...byte) *x86 { a.buf = append(a.buf, bs...); return a }

func (a *x86) u32(v uint32) *x86 {
	a.buf = binary.LittleEndian.AppendUint32(a.buf, v)
	return a
}

func (a *x86) movEAX(v uint32) { a.b(0xb8).u32(v) }
func (a *x86) movEDI(v uint32) { a.b(0xbf).u32(v) }

// leaRSI loads into rsi the address target bytes after the first
// instruction.
func (a *x86) leaRSI(target int) {
	a.b(0x48, 0x8d, 0x35)
	a.u32(uint32(int32(target - (len(a.buf) + 4))))
}

func (a *x86) rel32(label string) *x86 {
	a.fixups = append(a.fixups, fixup{off: len(a.buf), label: label})
	return a.u32(0)
}

func (a *x86) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.buf)
}

func (a *x86) done() []byte {
	for _, f := range a.fixups {
		binary.LittleEndian.PutUint32(a.buf[f.off:], uint32(int32(a.labels[f.label]-(f.off+4))))
	}
	return a.buf
}
