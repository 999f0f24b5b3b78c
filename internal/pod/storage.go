package pod

// StorageUsage is the local ephemeral storage one pod uses on the node's
// disk, as the kubelet counts it for its limits: each running container's
// writable layer and log, and each emptyDir volume on disk (not one of
// medium Memory, which is a tmpfs sized by its limit).
type StorageUsage struct {
	Pod Key
	UID string
	// Containers are the pod's running init and app containers.
	Containers []ContainerStorage
	// EmptyDirs are the bytes used by each disk-backed emptyDir volume of
	// the pod, by volume name.
	EmptyDirs map[string]int64
}

// ContainerStorage is the local ephemeral storage of one running container.
type ContainerStorage struct {
	Name string
	ID   string
	// RootfsBytes is what the container wrote to its writable layer (its
	// snapshot's upper directory).
	RootfsBytes int64
	// LogBytes is the size of the container's log files of this run,
	// rotated ones included.
	LogBytes int64
}

// Bytes is what the container uses in all: writable layer and logs.
func (c ContainerStorage) Bytes() int64 { return c.RootfsBytes + c.LogBytes }
