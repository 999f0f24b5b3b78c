package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/staticlet/staticlet/internal/status"
)

func execCommand() *cobra.Command {
	var (
		cf        clientFlags
		container string
		stdin     bool
		tty       bool
	)
	cmd := &cobra.Command{
		Use:                   "exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARGS...]",
		Short:                 "Run a command in a container of a pod",
		DisableFlagsInUseLine: true,
		Long: `exec runs a command in a running container of a pod, in the container's
namespaces and as its main process runs (user, environment, working
directory), the way exec probes run. -c names the container (needed when
the pod has several), -i sends staticlet's standard input to the command,
-t with -i runs it on a terminal when the input is one. staticlet exits
with the command's exit code.`,
		Example: `  # the hostname the pod sees
  staticlet exec etcd-node1 -- cat /etc/hostname

  # a shell in container etcd of pod kube-system/etcd-node1
  staticlet exec -it -n kube-system etcd-node1 -c etcd -- sh

  # a file into the container
  staticlet exec -i etcd-node1 -- sh -c 'cat > /tmp/config' < config`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); len(args) < 2 || dash > 1 || dash == 0 {
				return errors.New("exec needs a pod and a command: staticlet exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := status.ExecOptions{
				Container: container,
				Command:   args[1:],
				Stdout:    cmd.OutOrStdout(),
				Stderr:    cmd.ErrOrStderr(),
			}
			if stdin {
				opts.Stdin = cmd.InOrStdin()
			}
			// As kubectl: -t without -i asks for no terminal, and one
			// whose input is not a terminal gets none.
			if tty && stdin {
				in, ok := opts.Stdin.(*os.File)
				if ok && term.IsTerminal(int(in.Fd())) {
					restore, err := setupTerminal(ctx, in, &opts)
					if err != nil {
						return err
					}
					defer restore()
				} else {
					fmt.Fprintln(cmd.ErrOrStderr(), "Unable to use a TTY - input is not a terminal or the right kind of file")
				}
			}
			code, err := cf.client().Exec(ctx, cf.podName(args[0]), opts)
			if err != nil && ctx.Err() != nil && cmd.Context().Err() == nil {
				// A signal ended it, and the command with it: exit as a
				// shell does for SIGINT.
				return &exitError{code: 130, err: errors.New("interrupted: the command was killed")}
			}
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code, err: fmt.Errorf("command terminated with exit code %d", code), raw: true}
			}
			return nil
		},
	}
	cf.add(cmd)
	cf.addNamespace(cmd)
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "container name; may be left out for a pod with one container")
	f.BoolVarP(&stdin, "stdin", "i", false, "send standard input to the command")
	f.BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (with -i, when standard input is one)")
	cmd.ValidArgsFunction = completePods(&cf, 1, "")
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainers(&cf))
	return cmd
}

// setupTerminal puts terminal in in raw mode, so that every key goes to
// the command, and has opts carry the terminal's size, at first and after
// each SIGWINCH. The function it returns stops following the size and
// restores the terminal.
func setupTerminal(ctx context.Context, in *os.File, opts *status.ExecOptions) (func(), error) {
	fd := int(in.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("setting the terminal to raw mode: %w", err)
	}
	opts.TTY = true
	size := func() (status.TermSize, bool) {
		w, h, err := term.GetSize(fd)
		if err != nil || w <= 0 || h <= 0 || w > 0xffff || h > 0xffff {
			return status.TermSize{}, false
		}
		return status.TermSize{Cols: uint16(w), Rows: uint16(h)}, true
	}
	opts.Size, _ = size()

	resize := make(chan status.TermSize)
	opts.Resize = resize
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-winch:
			case <-ctx.Done():
				return
			}
			s, ok := size()
			if !ok {
				continue
			}
			select {
			case resize <- s:
			case <-ctx.Done():
				return
			}
		}
	})
	return func() {
		signal.Stop(winch)
		cancel()
		wg.Wait()
		_ = term.Restore(fd, state)
	}, nil
}
