package kubeapi

import (
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// nodeRolePrefix starts the labels that give a node its roles.
const nodeRolePrefix = "node-role.kubernetes.io/"

// nodeCollection serves the one node: the store's.
func (s *Server) nodeCollection() *collection {
	return &collection{
		resource: v1.Resource("nodes"),
		snapshot: func(string) ([]runtime.Object, uint64) {
			rev := s.cfg.Store.Revision()
			return []runtime.Object{s.node()}, rev
		},
		table: tableForm{columns: nodeColumns(), cells: nodeCells},
		empty: func() runtime.Object { return &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}} },
		list: func(items []runtime.Object, rev string) runtime.Object {
			list := &v1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: rev}, Items: []v1.Node{}}
			list.APIVersion, list.Kind = "v1", "NodeList"
			for _, obj := range items {
				list.Items = append(list.Items, *obj.(*v1.Node))
			}
			return list
		},
	}
}

// node is the store's node, with its CDI devices in its capacity and a
// UID derived from its name.
func (s *Server) node() *v1.Node {
	n := s.cfg.Store.Node()
	if s.cfg.Devices != nil {
		status.AddDeviceCapacity(n, s.cfg.Devices().Devices)
	}
	if n.Name == "" {
		n.Name = s.cfg.NodeName
	}
	if n.UID == "" {
		n.UID = types.UID(status.DerivedUID("node", n.Name))
	}
	return n
}

func nodeColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		stringColumn("Status", "The status of the node", 0),
		stringColumn("Roles", "The roles of the node", 0),
		ageColumn(),
		stringColumn("Version", "Kubelet Version reported by the node.", 0),
		stringColumn("Internal-IP", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1),
		stringColumn("External-IP", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1),
		stringColumn("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
		stringColumn("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
		stringColumn("Container-Runtime", "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1),
	}
}

func nodeCells(obj runtime.Object, now time.Time) []any {
	n := obj.(*v1.Node)
	var roles []string
	for k := range n.Labels {
		if role, ok := strings.CutPrefix(k, nodeRolePrefix); ok && role != "" {
			roles = append(roles, role)
		}
	}
	sort.Strings(roles)
	rolesText := strings.Join(roles, ",")
	address := func(t v1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	info := n.Status.NodeInfo
	return []any{n.Name, printers.NodeStatus(n), orNone(rolesText), printers.Age(n.CreationTimestamp.Time, now),
		info.KubeletVersion, address(v1.NodeInternalIP), address(v1.NodeExternalIP),
		orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion)}
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
