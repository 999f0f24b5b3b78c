package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/sandbox/spec"
)

// The pod files in a pod's directory, and where containers see them.
var etcFileNames = map[string]string{
	"/etc/hosts":       "etc-hosts",
	"/etc/resolv.conf": "resolv.conf",
	"/etc/hostname":    "hostname",
}

// writePodFiles writes p's /etc/hosts, /etc/resolv.conf and /etc/hostname
// into its directory, from the host's files as they are now; /etc/hosts
// names the pod at podIP when it has one.
func (r *Runtime) writePodFiles(p *pod.Pod, podIP string) error {
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading the host's /etc/hosts: %w", err)
	}
	resolv, err := os.ReadFile(r.cfg.Node.ResolvConf)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading %s: %w", r.cfg.Node.ResolvConf, err)
	}
	hostName, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the host name: %w", err)
	}
	files := spec.PodFilesFor(p, string(hosts), string(resolv), hostName, podIP)
	dir := r.PodDir(string(p.UID))
	for name, content := range map[string]string{"etc-hosts": files.Hosts, "resolv.conf": files.Resolv, "hostname": files.Hostname} {
		if err := writeFileAtomic(filepath.Join(dir, name), []byte(content)); err != nil {
			return fmt.Errorf("writing the pod's %s: %w", name, err)
		}
	}
	return nil
}

// etcFiles are the pod files of the sandbox with UID uid that exist.
func (r *Runtime) etcFiles(uid string) map[string]string {
	out := make(map[string]string, len(etcFileNames))
	for dst, name := range etcFileNames {
		path := filepath.Join(r.PodDir(uid), name)
		if _, err := os.Stat(path); err == nil {
			out[dst] = path
		}
	}
	return out
}

// writeFileAtomic replaces path with data through a rename, so a container
// never reads half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	// On disk before the rename: a power cut after it must not leave
	// the new name with no content.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
