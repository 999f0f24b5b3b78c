package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/staticlet/staticlet/internal/pod"
)

// SyncVolumes rewrites the configMap, secret, projected and downwardAPI
// volumes of pod p, whose running sandbox is sb, from what p holds now
// (its Objects), so that a container sees an edited ConfigMap or Secret
// without a restart, as the kubelet's periodic remount does: the new
// files are swapped in whole through the volume's ..data link. A volume
// whose files are already as wanted is left alone (its files are read and
// compared, nothing is written), so a call that changes nothing is cheap.
// A volume whose files cannot be made, its object or a key having gone
// missing, keeps the files it had, as with the kubelet; the error then
// names each such volume (a pod.WaitingError, its message quoting no
// value), and the other volumes are still written. A pod whose directory
// is gone is left alone. Like a container start, which prepares the same
// volumes, it must not run at once with another call for the same pod.
func (r *Runtime) SyncVolumes(ctx context.Context, p *pod.Pod, sb pod.Record) error {
	if sb.PodUID == "" {
		return fmt.Errorf("syncing the volumes of pod %s: sandbox %s has no pod UID", p, sb.ID)
	}
	podDir := r.PodDir(sb.PodUID)
	if _, err := os.Stat(podDir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	for i := range p.Spec.Volumes {
		if err := ctx.Err(); err != nil {
			return err
		}
		v := &p.Spec.Volumes[i]
		if dir, ok := apiVolumeDir(podDir, v); ok {
			errs = append(errs, r.writeAPIVolume(p, v, dir))
		}
	}
	return errors.Join(errs...)
}
