/*
 * The log forwarder for AArch64; the same program as amd64.S, which says
 * what it does. Built by build.sh into arm64.bin.
 */
	.set SYS_close, 57
	.set SYS_read, 63
	.set SYS_write, 64
	.set SYS_ppoll, 73
	.set SYS_exit_group, 94
	.set SYS_nanosleep, 101
	.set SYS_rt_sigaction, 134
	.set SYS_rt_sigprocmask, 135
	.set SYS_socket, 198
	.set SYS_connect, 203
	.set SYS_sendmsg, 211

	.text
	.globl _start
_start:
	mov x19, sp			/* [x19] argc, [x19+8] argv[0], ... */

	mov x0, #15
	adr x1, act_term
	bl sigaction
	mov x0, #2
	adr x1, act_term
	bl sigaction
	mov x0, #13
	adr x1, act_ign
	bl sigaction
	mov x0, #1
	adr x1, act_ign
	bl sigaction

	ldr x9, [x19]			/* argc */
	ldr x20, [x19, #8]		/* argv[0] */
	ldr x10, [x19, x9, lsl #3]	/* argv[argc-1] */
1:	ldrb w11, [x10]
	cbz w11, 2f
	add x10, x10, #1
	b 1b
2:	add x10, x10, #1
	sub x10, x10, x20
	ldr x12, =iov_base
	str x20, [x12]
	str x10, [x12, #8]

	mov x8, #SYS_write
	mov x0, #5
	adr x1, zero
	mov x2, #1
	svc #0
	mov x8, #SYS_close
	mov x0, #5
	svc #0

connect:
	mov x8, #SYS_rt_sigprocmask
	mov x0, #0			/* SIG_BLOCK */
	adr x1, stopmask
	ldr x2, =oldmask
	mov x3, #8
	svc #0
	mov x8, #SYS_socket
	mov x0, #1			/* AF_UNIX */
	mov x1, #1			/* SOCK_STREAM */
	movk x1, #8, lsl #16		/* |SOCK_CLOEXEC (0x80000) */
	mov x2, #0
	svc #0
	tbnz x0, #63, sleep
	mov x21, x0
	mov x8, #SYS_connect
	ldr x1, =addr
	mov x2, #110
	svc #0
	tbnz x0, #63, lost
	mov x8, #SYS_sendmsg
	mov x0, x21
	ldr x1, =msg
	mov x2, #0x4000			/* MSG_NOSIGNAL */
	svc #0
	tbnz x0, #63, lost
	ldr x12, =sock
	str x21, [x12]
	bl unmask
	mov x8, #SYS_read
	mov x0, x21
	ldr x1, =ack
	mov x2, #1
	svc #0
	cmp x0, #1
	b.ne lost
	ldr x12, =ack
	ldrb w11, [x12]
	cmp w11, #'d'
	b.eq exit
lost:
	ldr x12, =sock
	mov x11, #-1
	str x11, [x12]
	mov x8, #SYS_close
	mov x0, x21
	svc #0
sleep:
	bl unmask
	ldr x12, =stopping
	ldr x11, [x12]
	cbz x11, 4f
	ldr x12, =tries
	ldr x11, [x12]
	subs x11, x11, #1
	str x11, [x12]
	b.mi exit
4:	mov x8, #SYS_nanosleep
	adr x0, retry
	mov x1, #0
	svc #0
	b connect

term:
	ldr x12, =sock
	ldr x0, [x12]
	tbz x0, #63, 5f
	ldr x12, =stopping
	mov x11, #1
	str x11, [x12]
	b connect
5:	ldr x12, =pfd
	str w0, [x12]
	mov x8, #SYS_ppoll
	mov x0, x12
	mov x1, #1
	ldr x2, =wait
	mov x3, #0
	mov x4, #0
	svc #0
exit:
	mov x8, #SYS_exit_group
	mov x0, #0
	svc #0

unmask:
	mov x8, #SYS_rt_sigprocmask
	mov x0, #2			/* SIG_SETMASK */
	ldr x1, =oldmask
	mov x2, #0
	mov x3, #8
	svc #0
	ret

sigaction:
	mov x8, #SYS_rt_sigaction
	mov x2, #0
	mov x3, #8
	svc #0
	cbnz x0, fail
	ret
fail:
	mov x8, #SYS_exit_group
	mov x0, #1
	svc #0

	.ltorg
	.balign 8
act_term:	.quad term, 0x04000000, term, 0x4002
stopmask:	.quad 0x4002
act_ign:	.quad 1, 0x04000000, term, 0
retry:		.quad 0, 500000000
zero:		.byte 0

	.data
	.balign 8
msg:		.quad 0, 0, iov, 1, cmsg, 24, 0
iov:
iov_base:	.quad 0
iov_len:	.quad 0
cmsg:		.quad 24
		.long 1, 1
		.long 3, 4
sock:		.quad -1
oldmask:	.quad 0
stopping:	.quad 0
tries:		.quad 0
pfd:		.long 0
		.short 1, 0
ack:		.byte 0
	.balign 8
wait:		.quad 10, 0			/* ppoll writes back what is left */
	.balign 2
addr:		.short 1
		.ascii "STATICLET-LOG-DAEMON-SOCKET"
		.fill 108 - 27, 1, 0
