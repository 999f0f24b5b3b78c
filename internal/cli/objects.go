package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/status/printers"
)

// objectKind is the kind of object a command on ConfigMaps or Secrets
// takes, named by its resource as the API and kubectl name it.
type objectKind string

const (
	configMapKind objectKind = "configmaps"
	secretKind    objectKind = "secrets"
)

// singular is the kind's name for one object: "configmap".
func (k objectKind) singular() string { return strings.TrimSuffix(string(k), "s") }

// aliases are the other names kubectl takes for the kind.
func (k objectKind) aliases() []string {
	if k == configMapKind {
		return []string{"configmap", "cm"}
	}
	return []string{"secret"}
}

// keys lists the namespace and name of each object of the kind that the
// running staticlet has, in namespace ns (every one when empty).
func (k objectKind) keys(ctx context.Context, c *status.Client, ns string) ([]nsName, error) {
	var keys []nsName
	if k == configMapKind {
		l, err := c.ConfigMaps(ctx, ns)
		if err != nil {
			return nil, err
		}
		for _, cm := range l.Items {
			keys = append(keys, nsName{cm.Namespace, cm.Name})
		}
		return keys, nil
	}
	l, err := c.Secrets(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, s := range l.Items {
		keys = append(keys, nsName{s.Namespace, s.Name})
	}
	return keys, nil
}

// resolve turns the name a command was given into the object's namespace
// and name, by the rule pods follow (see status.Store.Pod):
// "namespace/name", a name in the namespace of -n, else the object of that
// name in "default", else the only one of that name in any namespace.
func (k objectKind) resolve(ctx context.Context, cf *clientFlags, name string) (nsName, error) {
	if ns, bare, ok := strings.Cut(name, "/"); ok {
		return nsName{ns, bare}, nil
	}
	if cf.namespace != "" {
		return nsName{cf.namespace, name}, nil
	}
	keys, err := k.keys(ctx, cf.client(), "")
	if err != nil {
		return nsName{}, err
	}
	var found []string
	for _, key := range keys {
		if key.name != name {
			continue
		}
		if key.namespace == defaultNS {
			return key, nil
		}
		found = append(found, key.namespace+"/"+key.name)
	}
	switch len(found) {
	case 0:
		return nsName{}, fmt.Errorf("%s %q %w", k.singular(), name, status.ErrNotFound)
	case 1:
		ns, _, _ := strings.Cut(found[0], "/")
		return nsName{ns, name}, nil
	}
	return nsName{}, fmt.Errorf("%s name %q is ambiguous (%s): use namespace/name or -n", k.singular(), name, strings.Join(found, ", "))
}

// defaultNS is the namespace a bare name resolves to first, as in kubectl.
const defaultNS = "default"

// getObjectsCommand is `get configmaps` or `get secrets`.
func getObjectsCommand(k objectKind) *cobra.Command {
	var (
		cf clientFlags
		of outputFlags
	)
	short := "List ConfigMaps: NAMESPACE NAME DATA AGE SOURCE"
	if k == secretKind {
		short = "List Secrets, never their values: NAMESPACE NAME TYPE DATA AGE SOURCE"
	}
	cmd := &cobra.Command{
		Use:     string(k) + " [NAME]",
		Aliases: k.aliases(),
		Short:   short,
		Long: short + `

SOURCE is the manifest file (or URL) the object was read from and the
line its document starts on; -o wide adds KEYS, each key with the size of
its value in bytes. -o json|yaml prints the API's objects; a Secret is
never served with its data: its keys and sizes are in the annotation
staticlet.io/keys. -o name, jsonpath, go-template and custom-columns print
what kubectl prints for the same objects.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGetObjects(cmd, k, &cf, args, &of)
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVarP(&cf.namespace, "namespace", "n", "", "list only this namespace (default: every namespace); a bare NAME is looked up in default, then in any namespace that has it")
	of.add(cmd, kubeFormats(true), true)
	cmd.ValidArgsFunction = completeObjects(k, &cf)
	return cmd
}

func runGetObjects(cmd *cobra.Command, k objectKind, cf *clientFlags, args []string, of *outputFlags) error {
	p, err := of.printer()
	if err != nil {
		return err
	}
	ctx, c := cmd.Context(), cf.client()
	var key *nsName
	if len(args) == 1 {
		resolved, err := k.resolve(ctx, cf, args[0])
		if err != nil {
			return err
		}
		key = &resolved
	}
	if k == configMapKind {
		return getConfigMaps(ctx, cmd, c, cf.namespace, key, of, p)
	}
	return getSecrets(ctx, cmd, c, cf.namespace, key, of, p)
}

// getConfigMaps prints the ConfigMap key, or with none those of ns.
func getConfigMaps(ctx context.Context, cmd *cobra.Command, c *status.Client, ns string, key *nsName, of *outputFlags, p *printers.Printer) error {
	var (
		items []v1.ConfigMap
		obj   any
	)
	if key != nil {
		cm, err := c.ConfigMap(ctx, key.namespace, key.name)
		if err != nil {
			return err
		}
		items, obj = []v1.ConfigMap{*cm}, cm
	} else {
		list, err := c.ConfigMaps(ctx, ns)
		if err != nil {
			return err
		}
		items, obj = list.Items, list
	}
	return printKube(cmd.OutOrStdout(), of, p, "ConfigMap", items, key != nil, obj, func(w io.Writer, wide bool) error {
		return printers.ConfigMaps(w, items, wide, time.Now())
	})
}

// getSecrets prints the Secret key, or with none those of ns.
func getSecrets(ctx context.Context, cmd *cobra.Command, c *status.Client, ns string, key *nsName, of *outputFlags, p *printers.Printer) error {
	var (
		items []v1.Secret
		obj   any
	)
	if key != nil {
		s, err := c.Secret(ctx, key.namespace, key.name, nil)
		if err != nil {
			return err
		}
		items, obj = []v1.Secret{*s}, s
	} else {
		list, err := c.Secrets(ctx, ns)
		if err != nil {
			return err
		}
		items, obj = list.Items, list
	}
	return printKube(cmd.OutOrStdout(), of, p, "Secret", items, key != nil, obj, func(w io.Writer, wide bool) error {
		return printers.Secrets(w, items, wide, time.Now())
	})
}

// describeObjectCommand is `describe configmap` or `describe secret`.
func describeObjectCommand(k objectKind) *cobra.Command {
	var cf clientFlags
	short := "Show a ConfigMap's keys and values"
	if k == secretKind {
		short = "Show a Secret's type and keys, each with its size in bytes, never a value"
	}
	cmd := &cobra.Command{
		Use:     k.singular() + " NAME",
		Aliases: append([]string{string(k)}, k.aliases()[1:]...),
		Short:   short,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, out := cmd.Context(), cf.client(), cmd.OutOrStdout()
			key, err := k.resolve(ctx, &cf, args[0])
			if err != nil {
				return err
			}
			if k == configMapKind {
				cm, err := c.ConfigMap(ctx, key.namespace, key.name)
				if err != nil {
					return err
				}
				return printers.DescribeConfigMap(out, cm)
			}
			s, err := c.Secret(ctx, key.namespace, key.name, nil)
			if err != nil {
				return err
			}
			return printers.DescribeSecret(out, s)
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVarP(&cf.namespace, "namespace", "n", "", "the object's namespace (a bare name is looked up in default, then in any namespace that has it)")
	cmd.ValidArgsFunction = completeObjects(k, &cf)
	return cmd
}

// completeObjects completes the one NAME of a command on objects of kind
// k, from the running staticlet (nothing when none answers in time).
func completeObjects(k objectKind, cf *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(orBackground(cmd.Context()), completionTimeout)
		defer cancel()
		keys, err := k.keys(ctx, cf.client(), "")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, name := range shortNames(keys, cf.namespace) {
			if strings.HasPrefix(name, toComplete) {
				out = append(out, name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
