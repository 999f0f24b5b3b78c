//go:build deps

package internal

import (
	_ "github.com/containerd/containerd/v2/client"
	_ "github.com/containerd/containerd/v2/pkg/oci"
	_ "github.com/containerd/containerd/v2/pkg/namespaces"
	_ "github.com/containerd/errdefs"
	_ "github.com/opencontainers/runtime-spec/specs-go"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/validation"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "sigs.k8s.io/yaml"
	_ "github.com/vishvananda/netlink"
)
