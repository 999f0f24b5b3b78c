package nodeinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Machine is what the node object tells of the machine, read by Read.
type Machine struct {
	// MachineID is /etc/machine-id (or D-Bus's copy of it).
	MachineID string
	// SystemUUID is the firmware's product UUID (DMI), empty where the
	// machine has none.
	SystemUUID string
	// BootID changes with each boot.
	BootID string
	// KernelVersion is the kernel's release, as `uname -r` prints it.
	KernelVersion string
	// OSImage is os-release's PRETTY_NAME, or "Linux".
	OSImage string
	// CPUs is the number of online CPUs.
	CPUs int
	// MemoryBytes is the machine's memory (MemTotal of /proc/meminfo).
	MemoryBytes uint64
	// HugePages is the memory reserved in huge pages, by page size in
	// bytes: every size the kernel supports, 0 where none are reserved.
	HugePages map[uint64]uint64
}

// The files Machine is read from, below the root given to Read.
const (
	machineIDFile     = "etc/machine-id"
	dbusMachineIDFile = "var/lib/dbus/machine-id"
	productUUIDFile   = "sys/class/dmi/id/product_uuid"
	bootIDFile        = "proc/sys/kernel/random/boot_id"
	osReleaseFile     = "proc/sys/kernel/osrelease"
	etcOSRelease      = "etc/os-release"
	usrOSRelease      = "usr/lib/os-release"
	cpuOnlineFile     = "sys/devices/system/cpu/online"
	meminfoFile       = "proc/meminfo"
	hugePagesDir      = "sys/kernel/mm/hugepages"
)

// Read reads the machine's description from the files under root ("/"
// on the node). What it cannot read stays empty and is named in the
// error, which joins every failure; the rest is still returned. A system
// UUID the machine lacks is no error.
func Read(root string) (Machine, error) {
	var m Machine
	var errs []error
	read := func(paths ...string) string {
		for i, p := range paths {
			b, err := os.ReadFile(filepath.Join(root, p))
			if err == nil {
				return strings.TrimSpace(string(b))
			}
			if i == len(paths)-1 {
				errs = append(errs, fmt.Errorf("reading the machine's %s: %w", p, err))
			}
		}
		return ""
	}
	m.MachineID = read(machineIDFile, dbusMachineIDFile)
	m.BootID = read(bootIDFile)
	m.KernelVersion = read(osReleaseFile)
	m.OSImage = OSImage([]byte(read(etcOSRelease, usrOSRelease)))
	if b, err := os.ReadFile(filepath.Join(root, productUUIDFile)); err == nil {
		m.SystemUUID = strings.TrimSpace(string(b))
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("reading the machine's %s: %w", productUUIDFile, err))
	}
	var err error
	if m.CPUs, err = CountCPUs(read(cpuOnlineFile)); err != nil {
		errs = append(errs, err)
	}
	if m.MemoryBytes, err = MemTotal([]byte(read(meminfoFile))); err != nil {
		errs = append(errs, err)
	}
	if m.HugePages, err = readHugePages(filepath.Join(root, hugePagesDir)); err != nil {
		errs = append(errs, err)
	}
	return m, errors.Join(errs...)
}

// OSImage is the PRETTY_NAME of an os-release file, unquoted; "Linux"
// when it has none, as the kubelet says.
func OSImage(osRelease []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(osRelease))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || k != "PRETTY_NAME" {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		} else {
			v = strings.Trim(v, `'"`)
		}
		if v != "" {
			return v
		}
	}
	return "Linux"
}

// CountCPUs counts the CPUs of a CPU list such as /sys's online file
// ("0-3,8,10-11" is 7).
func CountCPUs(list string) (int, error) {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("reading the online CPUs %q: %w", list, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("reading the online CPUs %q: bad range %q", list, part)
			}
		}
		n += b - a + 1
	}
	if n == 0 {
		return 0, fmt.Errorf("reading the online CPUs %q: none", list)
	}
	return n, nil
}

// MemTotal is the machine's memory in bytes, from /proc/meminfo.
func MemTotal(meminfo []byte) (uint64, error) {
	v, ok := MeminfoValue(meminfo, "MemTotal")
	if !ok {
		return 0, errors.New("reading the machine's memory: no MemTotal in /proc/meminfo")
	}
	return v, nil
}

// MeminfoValue is a field of /proc/meminfo in bytes ("MemTotal:
// 16318028 kB"), and whether it is there.
func MeminfoValue(meminfo []byte, key string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		return n, true
	}
	return 0, false
}

// readHugePages reads the pages reserved of each huge page size, from
// dir's hugepages-<size>kB/nr_hugepages; none when the kernel has no
// huge pages.
func readHugePages(dir string) (map[uint64]uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[uint64]uint64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the huge page sizes: %w", err)
	}
	out := make(map[uint64]uint64, len(entries))
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, ok = strings.CutSuffix(kb, "kB")
		size, err := strconv.ParseUint(kb, 10, 64)
		if !ok || err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, fmt.Errorf("reading the huge pages of %s: %w", e.Name(), err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading the huge pages of %s: %w", e.Name(), err)
		}
		out[size*1024] = n * size * 1024
	}
	return out, nil
}
