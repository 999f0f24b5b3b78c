/*
 * The log forwarder for x86-64 (see ../forwarder.go): hands a container's
 * output pipes to staticlet's log daemon and holds them until the shim
 * asks it to stop. Built by build.sh into amd64.bin; Linux system calls
 * only, no C library.
 *
 * Descriptors from the shim: 3 and 4 the read ends of the container's
 * stdout and stderr, 5 the pipe the shim waits on for one byte.
 */
	.intel_syntax noprefix

	.set SYS_read, 0
	.set SYS_write, 1
	.set SYS_close, 3
	.set SYS_poll, 7
	.set SYS_rt_sigaction, 13
	.set SYS_rt_sigprocmask, 14
	.set SYS_nanosleep, 35
	.set SYS_socket, 41
	.set SYS_connect, 42
	.set SYS_sendmsg, 46
	.set SYS_exit_group, 231

	.text
	.globl _start
_start:
	mov rbp, rsp			/* [rbp] argc, [rbp+8] argv[0], ... */

	/* SIGTERM and SIGINT: finish; SIGPIPE and SIGHUP: ignored. */
	mov edi, 15
	lea rsi, [rip + act_term]
	call sigaction
	mov edi, 2
	lea rsi, [rip + act_term]
	call sigaction
	mov edi, 13
	lea rsi, [rip + act_ign]
	call sigaction
	mov edi, 1
	lea rsi, [rip + act_ign]
	call sigaction

	/* The message: the arguments, argv[0] to the end of the last one. */
	mov rcx, [rbp]
	mov r12, [rbp + 8]
	mov rsi, [rbp + 8*rcx]
1:	cmp byte ptr [rsi], 0
	je 2f
	inc rsi
	jmp 1b
2:	inc rsi
	sub rsi, r12
	mov [rip + iov_base], r12
	mov [rip + iov_len], rsi

	/* Ready at once: the pipes hold the output until the daemon reads. */
	mov eax, SYS_write
	mov edi, 5
	lea rsi, [rip + zero]
	mov edx, 1
	syscall
	mov eax, SYS_close
	mov edi, 5
	syscall

connect:
	/* SIGTERM and SIGINT wait while a connection is made: the handler
	 * then finds the socket that has the pipes, or none. */
	mov eax, SYS_rt_sigprocmask
	xor edi, edi			/* SIG_BLOCK */
	lea rsi, [rip + stopmask]
	lea rdx, [rip + oldmask]
	mov r10d, 8
	syscall
	mov eax, SYS_socket
	mov edi, 1			/* AF_UNIX */
	mov esi, 0x80001		/* SOCK_STREAM|SOCK_CLOEXEC */
	xor edx, edx
	syscall
	test rax, rax
	js sleep
	mov r14, rax
	mov eax, SYS_connect
	mov rdi, r14
	lea rsi, [rip + addr]
	mov edx, 110
	syscall
	test rax, rax
	js lost
	mov eax, SYS_sendmsg
	mov rdi, r14
	lea rsi, [rip + msg]
	mov edx, 0x4000			/* MSG_NOSIGNAL */
	syscall
	test rax, rax
	js lost
	mov [rip + sock], r14
	call unmask
	/* One byte 'd' says the streams ended and the daemon wrote
	 * everything: the forwarder's work is done, and it exits, as a log
	 * driver does at the end of its streams. EOF or an error says the
	 * daemon went away, and the pipes go to the next one. */
	mov eax, SYS_read
	mov rdi, r14
	lea rsi, [rip + ack]
	mov edx, 1
	syscall
	cmp rax, 1
	jne lost
	cmp byte ptr [rip + ack], 'd'
	je exit
lost:
	mov qword ptr [rip + sock], -1
	mov eax, SYS_close
	mov rdi, r14
	syscall
sleep:
	call unmask
	cmp qword ptr [rip + stopping], 0
	je 4f
	dec qword ptr [rip + tries]
	js exit
4:	mov eax, SYS_nanosleep
	lea rdi, [rip + retry]
	xor esi, esi
	syscall
	jmp connect

/* The handler of SIGTERM and SIGINT. It never returns. Once the daemon
 * has the pipes, wait (10 s at most) for it to say it wrote everything,
 * or to go away; then exit 0. Before that (a container that ended as soon
 * as it started), try once more to hand the pipes over: what they hold is
 * lost once the forwarder exits. With no daemon to take them, exit. */
term:
	mov rdi, [rip + sock]
	test rdi, rdi
	jns 5f
	mov qword ptr [rip + stopping], 1
	jmp connect
5:	mov [rip + pfd], edi
	mov eax, SYS_poll
	lea rdi, [rip + pfd]
	mov esi, 1
	mov edx, 10000
	syscall
exit:
	mov eax, SYS_exit_group
	xor edi, edi
	syscall

/* unmask sets the signal mask back to what it was before connect. */
unmask:
	mov eax, SYS_rt_sigprocmask
	mov edi, 2			/* SIG_SETMASK */
	lea rsi, [rip + oldmask]
	xor edx, edx
	mov r10d, 8
	syscall
	ret

/* sigaction(edi = signal, rsi = action); exits 1 on failure. */
sigaction:
	mov eax, SYS_rt_sigaction
	xor edx, edx
	mov r10d, 8
	syscall
	test rax, rax
	jnz fail
	ret
fail:
	mov eax, SYS_exit_group
	mov edi, 1
	syscall

	.section .rodata
	.balign 8
act_term:	.quad term, 0x04000000, term, 0x4002	/* SA_RESTORER; never returns; both blocked in it */
stopmask:	.quad 0x4002			/* SIGTERM, SIGINT */
act_ign:	.quad 1, 0x04000000, term, 0	/* SIG_IGN */
retry:		.quad 0, 500000000		/* 0.5 s between tries */
zero:		.byte 0

	.data
	.balign 8
msg:		.quad 0, 0, iov, 1, cmsg, 24, 0	/* struct msghdr */
iov:
iov_base:	.quad 0
iov_len:	.quad 0
cmsg:		.quad 24			/* CMSG_LEN(2 descriptors) */
		.long 1, 1			/* SOL_SOCKET, SCM_RIGHTS */
		.long 3, 4
sock:		.quad -1
oldmask:	.quad 0
stopping:	.quad 0
tries:		.quad 0			/* tries left once stopping, after the first */
pfd:		.long 0
		.short 1, 0			/* POLLIN */
ack:		.byte 0
	.balign 2
addr:		.short 1			/* AF_UNIX */
		.ascii "STATICLET-LOG-DAEMON-SOCKET"	/* replaced by the path */
		.fill 108 - 27, 1, 0
