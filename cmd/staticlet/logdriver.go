package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticlet/staticlet/internal/logs"
)

// logDriver turns --container-log-max-size and --container-log-max-files
// into the arguments the shim gives the log driver (this binary, see main)
// for a container logging to a given file.
func logDriver(maxSize string, maxFiles int) (func(logPath string) map[string]string, error) {
	q, err := resource.ParseQuantity(maxSize)
	if err != nil {
		return nil, fmt.Errorf("--container-log-max-size %q: %w", maxSize, err)
	}
	size, ok := q.AsInt64()
	if !ok || size < 0 {
		return nil, fmt.Errorf("--container-log-max-size %q: want a size in bytes such as 10Mi", maxSize)
	}
	if size > 0 && size < 4*logs.MaxLineSize {
		// A file must hold more than one record or two.
		return nil, fmt.Errorf("--container-log-max-size %q: want at least %d bytes (64Ki)", maxSize, 4*logs.MaxLineSize)
	}
	if maxFiles < 2 {
		// As the kubelet: the live file and at least one rotated.
		return nil, fmt.Errorf("--container-log-max-files %d: want at least 2", maxFiles)
	}
	return func(logPath string) map[string]string {
		return logs.DriverConfig{Path: logPath, MaxSize: size, MaxFiles: maxFiles}.Args()
	}, nil
}
