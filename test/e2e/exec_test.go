package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestExec runs commands in a hostNetwork pod and in a pod on the pod
// network with `staticlet exec`: output, exit codes, input, a terminal
// driven through a pseudo-terminal, and a client that goes away.
func TestExec(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("pn.yaml", harness.SleeperPod("pn", "x", false))
	// hn has an init container too, which has run to its end.
	e.Write("hn.yaml", strings.Replace(harness.SleeperPod("hn", "x", true), "\n  containers:\n",
		"\n  initContainers:\n  - {name: init, image: localhost/busybox:test, command: [\"true\"]}\n  containers:\n", 1))
	hn, pn := "hn-"+harness.TestNode, "pn-"+harness.TestNode
	d.WaitPod(hn, 30*time.Second, "pod hn running", harness.Running)
	d.WaitPod(pn, 30*time.Second, "pod pn running with an IP", func(p *v1.Pod) bool { return harness.Running(p) && p.Status.PodIP != "" })
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantOut  string
		wantErr  string // stderr, or with a trailing "..." a part of it
		wantCode int
	}{
		{name: "pod network: the pod's hostname", args: []string{pn, "--", "cat", "/etc/hostname"}, wantOut: pn + "\n"},
		{name: "pod network: its own network namespace", args: []string{pn, "--", "sh", "-c", "hostname; ls /sys/class/net | grep -c eth0"}, wantOut: pn + "\n1\n"},
		{name: "host network: the host's hostname", args: []string{hn, "--", "hostname"}, wantOut: host + "\n"},
		{name: "exit code", args: []string{hn, "--", "sh", "-c", "echo out; echo err >&2; exit 3"},
			wantOut: "out\n", wantErr: "err\ncommand terminated with exit code 3\n", wantCode: 3},
		{name: "stdin", args: []string{"-i", hn, "--", "cat"}, stdin: "hi\n", wantOut: "hi\n"},
		{name: "stdin, long", args: []string{"-i", pn, "--", "wc", "-c"}, stdin: strings.Repeat("0123456789", 100000), wantOut: "1000000\n"},
		{name: "no stdin without -i", args: []string{hn, "--", "cat"}, stdin: "hi\n"},
		{name: "-t without -i: no terminal", args: []string{"-t", hn, "--", "sh", "-c", "test -t 0 || test -t 1 || echo none"}, wantOut: "none\n"},
		{name: "-it with a pipe: no terminal", args: []string{"-it", hn, "--", "sh", "-c", "test -t 1 || echo none"}, stdin: "",
			wantOut: "none\n", wantErr: "Unable to use a TTY - input is not a terminal or the right kind of file\n"},
		{name: "namespace and container", args: []string{"-n", "default", "-c", "main", hn, "--", "true"}},
		{name: "no such container", args: []string{"-c", "nope", hn, "--", "true"},
			wantErr: `error: exec in pod "` + hn + `": container "nope" not found in pod default/` + hn + "\n", wantCode: 1},
		{name: "container not running", args: []string{"-c", "init", hn, "--", "true"},
			wantErr: `error: exec in pod "` + hn + `": container init is not running` + "\n", wantCode: 1},
		{name: "no such command", args: []string{hn, "--", "/nonexistent"}, wantErr: "error: exec in pod...", wantCode: 1},
		{name: "no command", args: []string{hn}, wantErr: "error: exec needs a pod and a command...", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := execStaticlet(d, strings.NewReader(tt.stdin), tt.args...)
			errOK := errOut == tt.wantErr
			if prefix, ok := strings.CutSuffix(tt.wantErr, "..."); ok {
				errOK = strings.Contains(errOut, prefix)
			}
			if out != tt.wantOut || !errOK || code != tt.wantCode {
				t.Errorf("staticlet exec %q = stdout %.80q, stderr %q, exit %d; want %.80q, %q, %d",
					tt.args, out, errOut, code, tt.wantOut, tt.wantErr, tt.wantCode)
			}
		})
	}

	t.Run("completion", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"exec", "h"}, hn + "\n"},
			{[]string{"exec", hn, "-c", "i"}, "init\n"},
		} {
			// The word being completed is last; the directive follows.
			args := append([]string{"__complete", "--status-socket=" + d.Socket}, tt.args...)
			out, err := exec.Command(harness.Binary(t), args...).Output()
			if got, _, _ := strings.Cut(string(out), ":"); err != nil || got != tt.want {
				t.Errorf("completing staticlet %s = %q, %v; want %q", strings.Join(tt.args, " "), out, err, tt.want)
			}
		}
	})

	t.Run("terminal", func(t *testing.T) {
		term := openPTY(t)
		term.setSize(t, 30, 100)
		c := execCommand(d, "-it", pn, "--", "sh")
		c.Stdin, c.Stdout, c.Stderr = term.slave, term.slave, term.slave
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		done := startCmd(t, c)
		before, err := unix.IoctlGetTermios(int(term.slave.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}

		// busybox's shell asks the terminal where its cursor is after the
		// prompt; no answer is needed.
		term.waitFor(t, "the shell's prompt", regexp.MustCompile(`[#$] `))
		term.typeIn(t, "echo $((6*7))\r")
		term.waitFor(t, "the shell's answer", regexp.MustCompile(`\r\n42\r\n`))
		term.typeIn(t, "stty size\r")
		term.waitFor(t, "the size it started with", regexp.MustCompile(`\r\n30 100\r\n`))

		// A resize reaches the command as the terminal's new size.
		term.setSize(t, 40, 120)
		sizes := regexp.MustCompile(`\r\n\d+ \d+\r\n`)
		asked := 1
		harness.WaitFor(t, 20*time.Second, "the new size in the container", func() (bool, string) {
			out := term.out.String()
			if strings.Contains(out, "\r\n40 120\r\n") {
				return true, ""
			}
			// One question at a time: ask again once the last one got its answer.
			if len(sizes.FindAllString(out, -1)) >= asked {
				term.typeIn(t, "stty size\r")
				asked++
			}
			return false, fmt.Sprintf("%q", lastBytes(out, 200))
		})

		term.typeIn(t, "exit 5\r")
		if code := waitExit(t, c, done); code != 5 {
			t.Errorf("staticlet exec -it ... sh after exit 5 exited %d, want 5; terminal: %q", code, lastBytes(term.out.String(), 300))
		}
		// The terminal is as staticlet found it.
		after, err := unix.IoctlGetTermios(int(term.slave.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
			t.Errorf("terminal after exec: lflag %#x iflag %#x oflag %#x, want %#x %#x %#x as before",
				after.Lflag, after.Iflag, after.Oflag, before.Lflag, before.Iflag, before.Oflag)
		}
	})

	t.Run("client goes away", func(t *testing.T) {
		c := execCommand(d, hn, "--", "sleep", "1234")
		done := startCmd(t, c)
		harness.WaitFor(t, 20*time.Second, "sleep 1234 running", func() (bool, string) {
			return len(processesRunning("sleep 1234")) == 1, fmt.Sprint(processesRunning("sleep 1234"))
		})
		// As a lost connection would, a killed client closes it.
		c.Process.Kill()
		<-done
		harness.WaitFor(t, 20*time.Second, "sleep 1234 gone", func() (bool, string) {
			pids := processesRunning("sleep 1234")
			return len(pids) == 0, fmt.Sprint(pids)
		})
		// An interrupted client ends the command too, and says so.
		c = execCommand(d, hn, "--", "sleep", "1235")
		var errOut harness.SyncBuffer
		c.Stderr = &errOut
		done = startCmd(t, c)
		harness.WaitFor(t, 20*time.Second, "sleep 1235 running", func() (bool, string) {
			return len(processesRunning("sleep 1235")) == 1, fmt.Sprint(processesRunning("sleep 1235"))
		})
		c.Process.Signal(os.Interrupt)
		if code := waitExit(t, c, done); code != 130 || errOut.String() != "error: interrupted: the command was killed\n" {
			t.Errorf("staticlet exec after SIGINT: exit %d, stderr %q; want 130 and that it was killed", code, errOut.String())
		}
		harness.WaitFor(t, 20*time.Second, "sleep 1235 gone", func() (bool, string) {
			pids := processesRunning("sleep 1235")
			return len(pids) == 0, fmt.Sprint(pids)
		})

		if _, errOut, code := execStaticlet(d, nil, hn, "--", "true"); code != 0 {
			t.Errorf("exec after a client went away: exit %d, %s", code, errOut)
		}
	})
}

// execCommand is `staticlet exec` with args, against d.
func execCommand(d *harness.Daemon, args ...string) *exec.Cmd {
	return exec.Command(harness.Binary(d.T), append([]string{"exec", "--status-socket", d.Socket}, args...)...)
}

// execStaticlet runs `staticlet exec` with args and stdin, and returns its
// output and exit code.
func execStaticlet(d *harness.Daemon, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	d.T.Helper()
	c := execCommand(d, args...)
	var out, errOut bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = stdin, &out, &errOut
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		d.T.Fatalf("running staticlet exec: %v", err)
	}
	return out.String(), errOut.String(), c.ProcessState.ExitCode()
}

// startCmd starts c, kills it if it still runs when the test ends, and
// returns a channel closed once it has exited.
func startCmd(t *testing.T, c *exec.Cmd) <-chan struct{} {
	t.Helper()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = c.Process.Kill()
			<-done
		}
	})
	return done
}

// waitExit waits for c, started by startCmd, to exit and returns its code.
func waitExit(t *testing.T, c *exec.Cmd, done <-chan struct{}) int {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit", c)
	}
	return c.ProcessState.ExitCode()
}

// processesRunning lists the processes, on the whole host, whose command
// line is want (its arguments joined by spaces).
func processesRunning(want string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		var pid int
		if _, err := fmt.Sscan(ent.Name(), &pid); err != nil {
			continue
		}
		if strings.Join(harness.Cmdline(pid), " ") == want && harness.ProcessRunning(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func lastBytes(s string, n int) string { return s[max(0, len(s)-n):] }

// pty is a pseudo-terminal: the test holds the master side, as a terminal
// emulator would, and runs a process on the slave side.
type pty struct {
	master, slave *os.File
	out           *harness.SyncBuffer // what the master read: the terminal's screen
}

// openPTY opens a pseudo-terminal, copies what it shows into out, and
// closes it at the end of the test.
func openPTY(t *testing.T) *pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("the pty's number: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	p := &pty{master: master, slave: slave, out: &harness.SyncBuffer{}}
	go func() { _, _ = io.Copy(p.out, master) }() // ends when master is closed
	return p
}

// setSize sets the terminal's size, as a terminal emulator does when its
// window changes: the kernel signals SIGWINCH to the foreground processes.
func (p *pty) setSize(t *testing.T, rows, cols uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatalf("setting the pty's size: %v", err)
	}
}

// typeIn types s on the terminal's keyboard.
func (p *pty) typeIn(t *testing.T, s string) {
	t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		t.Fatalf("typing %q: %v", s, err)
	}
}

// waitFor waits until the terminal has shown what re matches.
func (p *pty) waitFor(t *testing.T, what string, re *regexp.Regexp) {
	t.Helper()
	harness.WaitFor(t, 20*time.Second, what, func() (bool, string) {
		out := p.out.String()
		return re.MatchString(out), fmt.Sprintf("%q", lastBytes(out, 200))
	})
}
