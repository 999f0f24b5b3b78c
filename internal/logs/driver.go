package logs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The log driver's arguments. containerd's shim turns the query of the
// task's binary:// URI into the program's arguments as key-value pairs, in
// no particular order ("k1 v1 k2 v2"), so the driver is recognized by a key
// among the pairs rather than by its first argument.
const (
	argPath     = "log-driver"
	argMaxSize  = "max-size"
	argMaxFiles = "max-files"
)

// DrainTimeout bounds how long the driver keeps reading after the shim
// asks it to stop (SIGTERM, sent when the task is deleted, after the shim
// closed its ends of the pipes). The shim kills the driver after 12 s.
const DrainTimeout = 10 * time.Second

// DriverConfig is what the log driver is told: where to write and how to
// rotate.
type DriverConfig struct {
	Path     string // the live log file, <restartCount>.log
	MaxSize  int64  // bytes; 0 never rotates
	MaxFiles int    // files kept, the live one included
}

// Args returns cfg as the arguments of the task's binary:// log URI
// (cio.BinaryIO's args).
func (cfg DriverConfig) Args() map[string]string {
	return map[string]string{
		argPath:     cfg.Path,
		argMaxSize:  strconv.FormatInt(cfg.MaxSize, 10),
		argMaxFiles: strconv.Itoa(cfg.MaxFiles),
	}
}

// IsDriver tells whether a program's arguments (without the program name)
// are those of a log driver started by the shim.
func IsDriver(args []string) bool {
	if len(args)%2 != 0 {
		return false
	}
	for i := 0; i < len(args); i += 2 {
		if args[i] == argPath {
			return true
		}
	}
	return false
}

// ParseDriverArgs reads the key-value pairs that Args produced.
func ParseDriverArgs(args []string) (DriverConfig, error) {
	var cfg DriverConfig
	if len(args)%2 != 0 {
		return cfg, fmt.Errorf("log driver: arguments %q are not key-value pairs", args)
	}
	for i := 0; i < len(args); i += 2 {
		k, v := args[i], args[i+1]
		var err error
		switch k {
		case argPath:
			cfg.Path = v
		case argMaxSize:
			cfg.MaxSize, err = strconv.ParseInt(v, 10, 64)
		case argMaxFiles:
			cfg.MaxFiles, err = strconv.Atoi(v)
		default:
			err = errors.New("unknown argument")
		}
		if err != nil {
			return cfg, fmt.Errorf("log driver: %s %q: %w", k, v, err)
		}
	}
	if cfg.Path == "" {
		return cfg, errors.New("log driver: no " + argPath + " path")
	}
	return cfg, nil
}

// The descriptors the shim hands the driver (containerd's runtime/v2
// logging protocol): the read ends of the container's stdout and stderr
// pipes, and the write end of a pipe the driver signals readiness on.
const (
	fdStdout = 3
	fdStderr = 4
	fdReady  = 5
)

// RunDriver is the log driver program: the runc shim starts the staticlet
// binary with the pairs of DriverConfig.Args and the descriptors above,
// waits for it to be ready before it starts the container, and keeps it
// until the task is deleted. It returns the exit code.
//
// The driver holds the only read ends of the container's output pipes and
// is a child of the shim, not of staticlet: it writes while staticlet is
// stopped or restarting, and the container never waits on staticlet.
func RunDriver(args []string) int {
	cfg, err := ParseDriverArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, fd := range []int{fdStdout, fdStderr, fdReady} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			fmt.Fprintf(os.Stderr, "log driver: descriptor %d: %v: the driver is run by containerd's shim, with the container's stdout, stderr and a ready pipe as descriptors 3, 4 and 5\n", fd, err)
			return 2
		}
	}
	// A terminal's signals are not for the driver; SIGTERM is the shim's
	// request to finish.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	err = Drive(cfg, DriverIO{
		Stdout: os.NewFile(fdStdout, "container-stdout"),
		Stderr: os.NewFile(fdStderr, "container-stderr"),
		Ready:  os.NewFile(fdReady, "ready"),
		Stop:   term,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// DriverIO is what the driver reads, and how it is told to be ready and to
// stop.
type DriverIO struct {
	Stdout, Stderr io.Reader
	// Ready gets one byte and is closed once the driver is ready: the shim
	// of containerd 1.6 and 1.7 waits for the byte or EOF, that of 2.x
	// checks that the byte came.
	Ready io.WriteCloser
	// Stop asks the driver to finish: it keeps reading until both streams
	// end or Drain passes.
	Stop <-chan os.Signal
	// Drain is how long to keep reading after Stop; DrainTimeout if 0.
	Drain time.Duration
}

// Drive writes both streams into cfg's log file until they end, and
// returns once everything read is written.
//
// The driver is ready even when the file cannot be opened: it then drops
// output until it can, rather than failing the container's start or making
// it block or die on a pipe nobody reads.
func Drive(cfg DriverConfig, dio DriverIO) error {
	w, openErr := NewWriter(WriterConfig{Path: cfg.Path, MaxSize: cfg.MaxSize, MaxFiles: cfg.MaxFiles})
	if w == nil {
		dio.Ready.Close()
		return openErr
	}
	if openErr != nil {
		fmt.Fprintf(os.Stderr, "log driver: %v; dropping output until the file can be opened\n", openErr)
	}
	var (
		wg       sync.WaitGroup
		copyErrs = make([]error, 2) // read only once wg is done
		errs     []error
	)
	for i, s := range []struct {
		name string
		r    io.Reader
	}{{Stdout, dio.Stdout}, {Stderr, dio.Stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copyErrs[i] = w.Copy(s.name, s.r)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Ready only once both streams are being read: lines of the two
	// streams then reach the file in the order they were written, as far
	// as two pipes can tell.
	_, werr := dio.Ready.Write([]byte{0})
	if err := errors.Join(werr, dio.Ready.Close()); err != nil {
		w.Close()
		return fmt.Errorf("log driver: signalling ready: %w", err)
	}
	finished := func() { errs = append(errs, copyErrs...) }
	select {
	case <-done:
		finished()
	case <-dio.Stop:
		// The shim closed its ends of the pipes before asking: what the
		// container wrote is in the pipes and EOF follows it, unless a
		// process of the container still holds them.
		select {
		case <-done:
			finished()
		case <-time.After(cmp.Or(dio.Drain, DrainTimeout)):
			// The blocked reads die with the process; Close writes what
			// was read.
			errs = append(errs, errors.New("log driver: streams still open after SIGTERM; stopping"))
		}
	}
	errs = append(errs, w.Close())
	if n := w.Dropped(); n > 0 {
		errs = append(errs, fmt.Errorf("log driver: %d bytes of output could not be written to %s", n, cfg.Path))
	}
	return errors.Join(errs...)
}
