package nodeinfo

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		root string
		want Machine
	}{
		{"testdata/debian", Machine{
			MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "8d3c5b6e-1f2a-4b3c-8d4e-5f6a7b8c9d0e",
			BootID: "6b2f3c1e-8d1a-4c1e-9f2e-5a7b0c3d4e5f", KernelVersion: "6.12.48+deb13-amd64",
			OSImage: "Debian GNU/Linux 13 (trixie)", CPUs: 4, MemoryBytes: 16318028 * 1024,
			HugePages: map[uint64]uint64{2 << 20: 512 * 2 << 20, 1 << 30: 0},
		}},
		// D-Bus's machine ID, /usr/lib's os-release without PRETTY_NAME,
		// no DMI and no huge pages.
		{"testdata/minimal", Machine{
			MachineID: "fedcba9876543210fedcba9876543210", BootID: "b00710d0-0000-4000-8000-000000000001",
			KernelVersion: "6.1.0", OSImage: "Linux", CPUs: 5, MemoryBytes: 2048000 * 1024,
			HugePages: map[uint64]uint64{},
		}},
	} {
		got, err := Read(tc.root)
		if err != nil {
			t.Errorf("Read(%q): %v", tc.root, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Read(%q) = %+v, want %+v", tc.root, got, tc.want)
		}
	}
}

// TestReadMissing: what cannot be read is named, the rest still read.
func TestReadMissing(t *testing.T) {
	m, err := Read(t.TempDir())
	if err == nil {
		t.Fatal("Read of an empty tree: no error")
	}
	if m.OSImage != "Linux" || m.CPUs != 0 {
		t.Errorf("Read of an empty tree = %+v", m)
	}
}

func TestOSImage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`PRETTY_NAME="Ubuntu 24.04.1 LTS"`, "Ubuntu 24.04.1 LTS"},
		{"NAME=x\nPRETTY_NAME='Fedora Linux 41'\n", "Fedora Linux 41"},
		{`PRETTY_NAME=Arch`, "Arch"},
		{`PRETTY_NAME="a \"quoted\" name"`, `a "quoted" name`},
		{`PRETTY_NAME=""`, "Linux"},
		{"", "Linux"},
	} {
		if got := OSImage([]byte(tc.in)); got != tc.want {
			t.Errorf("OSImage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCountCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  bool
	}{
		{"0", 1, false},
		{"0-3\n", 4, false},
		{"0-3,8,10-11", 7, false},
		{"", 0, true},
		{"3-1", 0, true},
		{"x", 0, true},
	} {
		got, err := CountCPUs(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("CountCPUs(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestResources(t *testing.T) {
	m := Machine{CPUs: 4, MemoryBytes: 8 << 30, HugePages: map[uint64]uint64{2 << 20: 1 << 30, 1 << 30: 0}}
	for _, tc := range []struct {
		name            string
		maxPods         int
		storage         uint64
		capacity, alloc map[v1.ResourceName]string
	}{
		{"every resource", 110, 100 << 30,
			map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110", "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"},
			map[v1.ResourceName]string{"cpu": "4", "memory": "7Gi", "ephemeral-storage": "100Gi", "pods": "110", "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"}},
		{"no pod limit, no storage read", 0, 0,
			map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"},
			map[v1.ResourceName]string{"cpu": "4", "memory": "7Gi", "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"}},
	} {
		capacity, alloc := Resources(m, tc.maxPods, tc.storage)
		for _, c := range []struct {
			what string
			got  v1.ResourceList
			want map[v1.ResourceName]string
		}{{"capacity", capacity, tc.capacity}, {"allocatable", alloc, tc.alloc}} {
			got := map[v1.ResourceName]string{}
			for k, q := range c.got {
				got[k] = q.String()
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: %s = %v, want %v", tc.name, c.what, got, c.want)
			}
		}
	}
}

func TestDefaultRouteInterfaces(t *testing.T) {
	route := `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
staticlet0	0000D50A	00000000	0001	0	0	0	00FFFFFF	0	0	0
wg0	00000000	00000000	0000	0	0	0	00000000	0	0	0
eth0	00000000	010200C0	0003	0	0	100	00000000	0	0	0
eth1	00000000	010300C0	0003	0	0	200	00000000	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
`
	if got, want := DefaultRouteInterfaces([]byte(route)), []string{"eth0", "eth1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultRouteInterfaces = %v, want %v", got, want)
	}
	v6 := `fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     ens3
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
`
	if got, want := DefaultRouteInterfacesV6([]byte(v6)), []string{"ens3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultRouteInterfacesV6 = %v, want %v", got, want)
	}
}

func TestBusyCPUTime(t *testing.T) {
	stat := "cpu  100 20 30 4000 50 6 7 8 9 10\ncpu0 50 10 15 2000 25 3 3 4 4 5\nintr 1\n"
	got, err := BusyCPUTime([]byte(stat))
	// user+nice+system+irq+softirq = 163 ticks of 10ms.
	if want := uint64(163 * 10_000_000); err != nil || got != want {
		t.Errorf("BusyCPUTime = %d, %v; want %d", got, err, want)
	}
	if _, err := BusyCPUTime([]byte("intr 1\n")); err == nil {
		t.Error("BusyCPUTime without a cpu line: no error")
	}
}

// TestOnThisMachine reads the machine the test runs on: what every
// Linux host has.
func TestOnThisMachine(t *testing.T) {
	m, _ := Read("/")
	if m.CPUs == 0 || m.MemoryBytes == 0 || m.KernelVersion == "" || m.BootID == "" {
		t.Errorf("Read(/) = %+v", m)
	}
	if _, err := ReadCPUTime("/"); err != nil {
		t.Error(err)
	}
	if n, err := FilesystemBytes(t.TempDir()); err != nil || n == 0 {
		t.Errorf("FilesystemBytes = %d, %v", n, err)
	}
}
