package nodeinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// statFile is the kernel's CPU time counters, below the root given to
// ReadCPUTime.
const statFile = "proc/stat"

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every
// architecture Linux runs staticlet on.
const userHZ = 100

// ReadCPUTime is the CPU time, in ns, the machine's CPUs together have
// spent busy since boot: read at both ends of a window, its growth
// divided by the window is the cores used.
func ReadCPUTime(root string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(root, statFile))
	if err != nil {
		return 0, fmt.Errorf("reading the machine's CPU time: %w", err)
	}
	return BusyCPUTime(b)
}

// BusyCPUTime is the busy CPU time of /proc/stat's "cpu" line, in ns:
// user, nice, system, irq and softirq. Idle, iowait and steal (time a
// hypervisor gave others) are not this machine's work; guest and
// guest_nice are left out as user and nice already count them.
func BusyCPUTime(stat []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var busy uint64
		// user nice system idle iowait irq softirq steal guest guest_nice
		for i, v := range f[1:min(len(f), 8)] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading the machine's CPU time: field %d of /proc/stat's cpu line: %w", i+1, err)
			}
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		return busy * (1e9 / userHZ), nil
	}
	return 0, errors.New("reading the machine's CPU time: no cpu line in /proc/stat")
}
