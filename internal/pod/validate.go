package pod

import (
	"fmt"
	"math"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation follows the apiserver's rules for what a Pod may say (the
// subset a static pod can use), and adds staticlet's own: whatever needs an
// apiserver (configMap and secret references, service account tokens,
// persistent volume claims) or a feature staticlet lacks is rejected with
// the reason, instead of a pod that never starts.

// problem is one validation error: a field path and a message.
type problem struct {
	field string
	msg   string
}

// validator collects problems.
type validator struct {
	problems []problem
}

// add records a staticlet-specific problem at p.
func (v *validator) add(p *field.Path, format string, args ...any) {
	v.problems = append(v.problems, problem{field: p.String(), msg: fmt.Sprintf(format, args...)})
}

// addErrs records apimachinery validation errors with their usual wording
// ("Invalid value: ...", "Required value").
func (v *validator) addErrs(errs ...*field.Error) {
	for _, e := range errs {
		v.problems = append(v.problems, problem{field: e.Field, msg: e.ErrorBody()})
	}
}

// check records an Invalid error for each message of a validation helper.
func (v *validator) check(p *field.Path, value any, msgs []string) {
	for _, m := range msgs {
		v.addErrs(field.Invalid(p, value, m))
	}
}

// enum records NotSupported at p unless value is one of allowed.
func enum[T ~string](v *validator, p *field.Path, value T, allowed ...T) {
	if !slices.Contains(allowed, value) {
		v.addErrs(field.NotSupported(p, value, allowed))
	}
}

// noAPIServer is the tail of every message about what needs an apiserver.
const noAPIServer = "staticlet runs without one"

var (
	// Fields a downward API env var may name; labels and annotations also
	// take a subscript, metadata.labels['app'].
	envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs",
		"status.podIP", "status.podIPs")
	volumeFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid",
		"metadata.labels", "metadata.annotations")
	subscriptFieldPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)
	resourceFieldNames = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage")
	linuxStopSignals   = stopSignals()
	standardFinalizers = sets.New("kubernetes", metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)
	hostPathTypes      = sets.New(v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory,
		v1.HostPathFileOrCreate, v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev)
)

// validate checks a defaulted pod; nodeName is needed to check the full name.
func validate(p *v1.Pod, nodeName string) []problem {
	v := &validator{}
	meta := field.NewPath("metadata")
	if p.Name == "" {
		v.addErrs(field.Required(meta.Child("name"), "a static pod needs a name"))
	} else if msgs := validation.IsDNS1123Subdomain(p.Name); len(msgs) > 0 {
		v.check(meta.Child("name"), p.Name, msgs)
	} else if full := FullName(p.Name, nodeName); len(validation.IsDNS1123Subdomain(full)) > 0 {
		v.check(meta.Child("name"), p.Name, prefixed(fmt.Sprintf("with the node name appended, %q: ", full), validation.IsDNS1123Subdomain(full)))
	}
	if p.Namespace != "" {
		v.check(meta.Child("namespace"), p.Namespace, validation.IsDNS1123Label(p.Namespace))
	}
	v.addErrs(metavalidation.ValidateLabels(p.Labels, meta.Child("labels"))...)
	v.addErrs(apivalidation.ValidateAnnotations(p.Annotations, meta.Child("annotations"))...)
	v.finalizers(p.Finalizers, meta.Child("finalizers"))
	v.spec(&p.Spec, field.NewPath("spec"))
	v.securityAnnotations(p, meta.Child("annotations"))
	v.ownAnnotations(p, meta.Child("annotations"))
	v.cdiAnnotations(p, meta.Child("annotations"))
	return v.problems
}

// stopSignals returns the signal names a Linux container's
// lifecycle.stopSignal may give: those of core/v1's Signal.
func stopSignals() sets.Set[string] {
	s := sets.New(strings.Fields(`SIGABRT SIGALRM SIGBUS SIGCHLD SIGCLD SIGCONT SIGFPE SIGHUP SIGILL SIGINT
		SIGIO SIGIOT SIGKILL SIGPIPE SIGPOLL SIGPROF SIGPWR SIGQUIT SIGSEGV SIGSTKFLT SIGSTOP SIGSYS
		SIGTERM SIGTRAP SIGTSTP SIGTTIN SIGTTOU SIGURG SIGUSR1 SIGUSR2 SIGVTALRM SIGWINCH SIGXCPU
		SIGXFSZ SIGRTMIN SIGRTMAX`)...)
	for i := 1; i <= 15; i++ {
		s.Insert(fmt.Sprintf("SIGRTMIN+%d", i))
	}
	for i := 1; i <= 14; i++ {
		s.Insert(fmt.Sprintf("SIGRTMAX-%d", i))
	}
	return s
}

// finalizers checks metadata.finalizers: qualified names, or one of the
// standard ones without a domain, and not both dependents policies.
func (v *validator) finalizers(fs []string, p *field.Path) {
	v.addErrs(apivalidation.ValidateFinalizers(fs, p)...)
	for i, f := range fs {
		if !strings.Contains(f, "/") && !standardFinalizers.Has(f) {
			v.addErrs(field.Invalid(p.Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
}

func prefixed(prefix string, msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = prefix + m
	}
	return out
}

func (v *validator) spec(s *v1.PodSpec, p *field.Path) {
	volumes := v.volumes(s, p.Child("volumes"))
	if len(s.Containers) == 0 {
		v.addErrs(field.Required(p.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	all := containerNames(s)
	for i := range s.InitContainers {
		// Init containers are checked each on its own for host port
		// clashes, as the apiserver does: they run one after another.
		v.container(&s.InitContainers[i], p.Child("initContainers").Index(i), containerContext{
			init: true, spec: s, volumes: volumes, all: all, names: names, hostPorts: sets.New[string](),
		})
	}
	hostPorts := sets.New[string]()
	for i := range s.Containers {
		v.container(&s.Containers[i], p.Child("containers").Index(i), containerContext{
			spec: s, volumes: volumes, all: all, names: names, hostPorts: hostPorts,
		})
	}
	if len(s.EphemeralContainers) > 0 {
		v.add(p.Child("ephemeralContainers"), "ephemeral containers are not supported for static pods")
	}
	enum(v, p.Child("restartPolicy"), s.RestartPolicy, v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever)
	v.dns(s, p)
	if s.Hostname != "" {
		v.check(p.Child("hostname"), s.Hostname, validation.IsDNS1123Label(s.Hostname))
	}
	if h := s.HostnameOverride; h != nil {
		hp := p.Child("hostnameOverride")
		if s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN {
			v.addErrs(field.Forbidden(hp, "may not be specified when setHostnameAsFQDN is true"))
		}
		if s.HostNetwork {
			v.addErrs(field.Forbidden(hp, "may not be specified when hostNetwork is true"))
		}
		if len(*h) > 64 {
			v.addErrs(field.TooLong(hp, "", 64))
		}
		v.check(hp, *h, validation.IsDNS1123Subdomain(*h))
	}
	if s.Subdomain != "" {
		v.check(p.Child("subdomain"), s.Subdomain, validation.IsDNS1123Label(s.Subdomain))
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		v.addErrs(field.Invalid(p.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if s.ServiceAccountName != "" {
		v.check(p.Child("serviceAccountName"), s.ServiceAccountName, validation.IsDNS1123Subdomain(s.ServiceAccountName))
	}
	if len(s.ResourceClaims) > 0 {
		v.add(p.Child("resourceClaims"), "resource claims need an apiserver; %s", noAPIServer)
	}
	v.podSecurity(s, p)
	v.podOS(s, p)
	v.hostProcess(s, p)
	v.placement(s, p)
}

func (v *validator) dns(s *v1.PodSpec, p *field.Path) {
	enum(v, p.Child("dnsPolicy"), s.DNSPolicy, v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone)
	c := s.DNSConfig
	if s.DNSPolicy == v1.DNSNone && (c == nil || len(c.Nameservers) == 0) {
		v.addErrs(field.Required(p.Child("dnsConfig", "nameservers"), "at least one nameserver is required when dnsPolicy is None"))
	}
	if c == nil {
		return
	}
	if len(c.Nameservers) > 3 {
		v.addErrs(field.TooMany(p.Child("dnsConfig", "nameservers"), len(c.Nameservers), 3))
	}
	for i, ns := range c.Nameservers {
		v.addErrs(validation.IsValidIP(p.Child("dnsConfig", "nameservers").Index(i), ns)...)
	}
	sp := p.Child("dnsConfig", "searches")
	if len(c.Searches) > 32 {
		v.addErrs(field.TooMany(sp, len(c.Searches), 32))
	}
	// resolv.conf's search line holds at most 2048 characters.
	if n := len(strings.Join(c.Searches, " ")); n > 2048 {
		v.addErrs(field.Invalid(sp, n, "must have at most 2048 characters, with the spaces between the domains"))
	}
	for i, d := range c.Searches {
		// A domain may end in a dot and hold underscores (SRV names); "."
		// alone is the root.
		if d != "." {
			v.check(sp.Index(i), d, validation.IsDNS1123SubdomainWithUnderscore(strings.TrimSuffix(d, ".")))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			v.addErrs(field.Required(p.Child("dnsConfig", "options").Index(i).Child("name"), ""))
		}
	}
}

// volumeSet maps volume names to their sources.
type volumeSet map[string]*v1.VolumeSource

func (s volumeSet) has(name string) bool { _, ok := s[name]; return ok }

// volumes checks the pod's volumes and returns them by name.
func (v *validator) volumes(spec *v1.PodSpec, p *field.Path) volumeSet {
	vols := spec.Volumes
	set := volumeSet{}
	for i := range vols {
		vol := &vols[i]
		vp := p.Index(i)
		if vol.Name == "" {
			v.addErrs(field.Required(vp.Child("name"), ""))
		} else if msgs := validation.IsDNS1123Label(vol.Name); len(msgs) > 0 {
			v.check(vp.Child("name"), vol.Name, msgs)
		} else if set.has(vol.Name) {
			v.addErrs(field.Duplicate(vp.Child("name"), vol.Name))
		} else {
			set[vol.Name] = &vol.VolumeSource
		}
		types := volumeTypes(&vol.VolumeSource)
		if len(types) == 0 {
			continue // defaulting makes it an emptyDir
		}
		if len(types) > 1 {
			v.add(vp, "may not specify more than one volume type, found %s", strings.Join(types, ", "))
			continue
		}
		v.volumeSource(spec, &vol.VolumeSource, types[0], vp)
	}
	return set
}

func (v *validator) volumeSource(spec *v1.PodSpec, src *v1.VolumeSource, typ string, p *field.Path) {
	tp := p.Child(typ)
	switch typ {
	case "hostPath":
		switch hp := src.HostPath.Path; {
		case hp == "":
			v.addErrs(field.Required(tp.Child("path"), ""))
		case hasBackstep(hp):
			v.addErrs(field.Invalid(tp.Child("path"), hp, "must not contain '..'"))
		}
		if t := src.HostPath.Type; t != nil && !hostPathTypes.Has(*t) {
			v.addErrs(field.NotSupported(tp.Child("type"), *t, sets.List(hostPathTypes)))
		}
	case "emptyDir":
		// The apiserver takes any medium; the kubelet fails to set up a
		// volume of one it does not know, or of huge pages of a size the
		// pod does not request, so staticlet refuses those here.
		m := src.EmptyDir.Medium
		switch {
		case IsHugePagesMedium(m):
			if _, err := HugePageSize(spec, m); err != nil {
				v.addErrs(field.Invalid(tp.Child("medium"), m, err.Error()))
			}
		case m != v1.StorageMediumDefault && m != v1.StorageMediumMemory:
			v.addErrs(field.NotSupported(tp.Child("medium"), m, []v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumHugePages, v1.StorageMediumHugePagesPrefix + "<size>"}))
		}
		if q := src.EmptyDir.SizeLimit; q != nil && q.Sign() < 0 {
			v.addErrs(field.Invalid(tp.Child("sizeLimit"), q.String(), "must be greater than or equal to 0"))
		}
	case "downwardAPI":
		v.downwardAPIVolume(src.DownwardAPI, tp)
	case "configMap":
		v.objectVolume(src.ConfigMap.Name, tp.Child("name"), src.ConfigMap.DefaultMode, src.ConfigMap.Items, tp)
	case "secret":
		v.objectVolume(src.Secret.SecretName, tp.Child("secretName"), src.Secret.DefaultMode, src.Secret.Items, tp)
	case "projected":
		v.fileMode(src.Projected.DefaultMode, tp.Child("defaultMode"))
		v.projected(src.Projected, tp)
	case "persistentVolumeClaim":
		v.add(tp, "%s volumes need an apiserver; %s — use a hostPath volume", typ, noAPIServer)
	default:
		v.add(tp, "volume type %s is not supported by staticlet; use hostPath, emptyDir, configMap, secret, projected or downwardAPI", typ)
	}
}

func (v *validator) downwardAPIVolume(d *v1.DownwardAPIVolumeSource, p *field.Path) {
	v.fileMode(d.DefaultMode, p.Child("defaultMode"))
	v.downwardAPIFiles(d.Items, p, nil)
}

// downwardAPIFiles checks the files of a downwardAPI volume or projected
// source; paths, when not nil, holds the paths of the projected volume's
// other files, and gets these.
func (v *validator) downwardAPIFiles(items []v1.DownwardAPIVolumeFile, p *field.Path, paths sets.Set[string]) {
	for i, item := range items {
		ip := p.Child("items").Index(i)
		v.relativePath(item.Path, ip.Child("path"), true)
		// The volume's own entries (..data, the timestamped directories)
		// start with "..".
		if strings.HasPrefix(item.Path, "..") && !strings.HasPrefix(item.Path, "../") {
			v.addErrs(field.Invalid(ip.Child("path"), item.Path, "must not start with '..'"))
		}
		v.fileMode(item.Mode, ip.Child("mode"))
		v.uniquePath(paths, item.Path, p)
		switch {
		case item.FieldRef != nil && item.ResourceFieldRef != nil:
			v.add(ip, "may not have both fieldRef and resourceFieldRef")
		case item.FieldRef != nil:
			v.fieldRef(item.FieldRef, ip.Child("fieldRef"), volumeFieldPaths)
		case item.ResourceFieldRef != nil:
			if item.ResourceFieldRef.ContainerName == "" {
				v.addErrs(field.Required(ip.Child("resourceFieldRef", "containerName"), "a downwardAPI volume must name the container"))
			}
			v.resourceFieldRef(item.ResourceFieldRef, ip.Child("resourceFieldRef"))
		default:
			v.addErrs(field.Required(ip, "one of fieldRef or resourceFieldRef"))
		}
	}
}

// relativePath checks a path that must stay below a directory.
func (v *validator) relativePath(rel string, p *field.Path, required bool) {
	switch {
	case rel == "":
		if required {
			v.addErrs(field.Required(p, ""))
		}
	case path.IsAbs(rel):
		v.addErrs(field.Invalid(p, rel, "must be a relative path"))
	case hasBackstep(rel):
		v.addErrs(field.Invalid(p, rel, "must not contain '..'"))
	}
}

// hasBackstep reports whether a path has a ".." element.
func hasBackstep(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "..")
}

func (v *validator) fieldRef(f *v1.ObjectFieldSelector, p *field.Path, allowed sets.Set[string]) {
	if f.APIVersion != "v1" {
		v.addErrs(field.NotSupported(p.Child("apiVersion"), f.APIVersion, []string{"v1"}))
	}
	m := subscriptFieldPath.FindStringSubmatch(f.FieldPath)
	switch {
	case m == nil && !allowed.Has(f.FieldPath):
		v.addErrs(field.NotSupported(p.Child("fieldPath"), f.FieldPath, sets.List(allowed)))
	case m == nil:
	case m[1] == "annotations":
		// Annotation keys are matched without regard to case.
		v.check(p.Child("fieldPath"), f.FieldPath, validation.IsQualifiedName(strings.ToLower(m[2])))
	default:
		v.check(p.Child("fieldPath"), f.FieldPath, validation.IsQualifiedName(m[2]))
	}
}

func (v *validator) resourceFieldRef(r *v1.ResourceFieldSelector, p *field.Path) {
	if !resourceFieldNames.Has(r.Resource) && !strings.HasPrefix(r.Resource, "limits.hugepages-") &&
		!strings.HasPrefix(r.Resource, "requests.hugepages-") {
		v.addErrs(field.NotSupported(p.Child("resource"), r.Resource, sets.List(resourceFieldNames)))
	}
	if r.Divisor.Sign() < 0 {
		v.addErrs(field.Invalid(p.Child("divisor"), r.Divisor.String(), "must not be negative"))
	} else {
		v.divisor(r.Resource, r.Divisor, p.Child("divisor"))
	}
}

// containerContext is what checking one container needs from its pod.
type containerContext struct {
	init      bool
	spec      *v1.PodSpec
	volumes   volumeSet
	all       sets.Set[string] // every container name, init and app
	names     sets.Set[string] // container names so far, init and app
	hostPorts sets.Set[string] // hostIP/protocol/port so far: the container's own, an app container's and those before it
}

func (v *validator) container(c *v1.Container, p *field.Path, cc containerContext) {
	switch {
	case c.Name == "":
		v.addErrs(field.Required(p.Child("name"), ""))
	case len(validation.IsDNS1123Label(c.Name)) > 0:
		v.check(p.Child("name"), c.Name, validation.IsDNS1123Label(c.Name))
	case cc.names.Has(c.Name):
		v.addErrs(field.Duplicate(p.Child("name"), c.Name))
	default:
		cc.names.Insert(c.Name)
	}
	switch {
	case c.Image == "":
		v.addErrs(field.Required(p.Child("image"), "a container needs an image"))
	case strings.TrimSpace(c.Image) != c.Image:
		v.addErrs(field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	enum(v, p.Child("imagePullPolicy"), c.ImagePullPolicy, v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)
	enum(v, p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError)

	sidecar := cc.init && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
	switch {
	case c.RestartPolicy == nil:
	case cc.init && !sidecar && !slices.Contains([]v1.ContainerRestartPolicy{v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure}, *c.RestartPolicy):
		v.addErrs(field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []v1.ContainerRestartPolicy{
			v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure}))
	case cc.init && !sidecar:
		// ContainerRestartRules (on by default since 1.35) lets an init
		// container override the pod's restartPolicy.
		v.add(p.Child("restartPolicy"), "per-container restart policies are not supported by staticlet; only Always (a sidecar) is, on an init container; use spec.restartPolicy")
	case !cc.init:
		v.add(p.Child("restartPolicy"), "per-container restart policies are not supported by staticlet; use spec.restartPolicy")
	}
	if len(c.RestartPolicyRules) > 0 {
		v.add(p.Child("restartPolicyRules"), "container restart rules are not supported by staticlet; use spec.restartPolicy")
	}
	if cc.init && !sidecar {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil},
		} {
			if f.set {
				v.addErrs(field.Forbidden(p.Child(f.name), "may not be set for init containers without restartPolicy=Always"))
			}
		}
	} else {
		v.probe(c.LivenessProbe, p.Child("livenessProbe"), true)
		v.probe(c.ReadinessProbe, p.Child("readinessProbe"), false)
		v.probe(c.StartupProbe, p.Child("startupProbe"), true)
		v.lifecycle(c.Lifecycle, p.Child("lifecycle"), cc.spec)
	}

	v.ports(c, p.Child("ports"), cc)
	v.env(c, p, cc.all)
	v.mounts(c, p, cc.volumes)
	v.resources(&c.Resources, p.Child("resources"))
	v.containerSecurity(c.SecurityContext, p.Child("securityContext"), cc.spec)
	v.resizePolicy(c, p.Child("resizePolicy"), cc.spec.RestartPolicy)
}

func (v *validator) ports(c *v1.Container, p *field.Path, cc containerContext) {
	names := sets.New[string]()
	for i, port := range c.Ports {
		pp := p.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				v.check(pp.Child("name"), port.Name, msgs)
			} else if names.Has(port.Name) {
				v.addErrs(field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		v.check(pp.Child("containerPort"), port.ContainerPort, validation.IsValidPortNum(int(port.ContainerPort)))
		if port.HostPort != 0 {
			v.check(pp.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))
			key := fmt.Sprintf("%s/%s/%d", port.HostIP, port.Protocol, port.HostPort)
			if cc.hostPorts.Has(key) {
				v.addErrs(field.Duplicate(pp.Child("hostPort"), port.HostPort))
			}
			cc.hostPorts.Insert(key)
		}
		// The apiserver asks this of app containers only.
		if cc.spec.HostNetwork && !cc.init && port.HostPort != port.ContainerPort {
			v.addErrs(field.Invalid(pp.Child("hostPort"), port.HostPort, "must match containerPort when hostNetwork is true"))
		}
		enum(v, pp.Child("protocol"), port.Protocol, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)
		// The apiserver takes any hostIP. A port on the host's network,
		// or not published, never uses it; a published port is published
		// on that address, which must be one (the kubelet's portmap
		// plugin leaves a port with a host name unpublished).
		if port.HostIP != "" && port.HostPort != 0 && !cc.spec.HostNetwork {
			if _, err := netip.ParseAddr(port.HostIP); err != nil {
				v.addErrs(field.Invalid(pp.Child("hostIP"), port.HostIP, "must be an IP address to publish the hostPort on"))
			}
		}
	}
}

func (v *validator) env(c *v1.Container, p *field.Path, containers sets.Set[string]) {
	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		// The apiserver accepts any printable ASCII but '=' in a name
		// (RelaxedEnvironmentVariableValidation, on by default since 1.32).
		if msgs := validation.IsRelaxedEnvVarName(e.Name); len(msgs) > 0 {
			v.check(ep.Child("name"), e.Name, msgs)
		}
		vf := e.ValueFrom
		if vf == nil {
			continue
		}
		vp := ep.Child("valueFrom")
		if e.Value != "" {
			v.addErrs(field.Invalid(vp, "", "may not be specified when value is not empty"))
		}
		n := 0
		if vf.FieldRef != nil {
			n++
			v.fieldRef(vf.FieldRef, vp.Child("fieldRef"), envFieldPaths)
		}
		if vf.ResourceFieldRef != nil {
			n++
			v.resourceFieldRef(vf.ResourceFieldRef, vp.Child("resourceFieldRef"))
			if name := vf.ResourceFieldRef.ContainerName; name != "" && !containers.Has(name) {
				v.addErrs(field.NotFound(vp.Child("resourceFieldRef", "containerName"), name))
			}
		}
		if r := vf.ConfigMapKeyRef; r != nil {
			n++
			v.keySelector(r.Name, r.Key, vp.Child("configMapKeyRef"))
		}
		if r := vf.SecretKeyRef; r != nil {
			n++
			v.keySelector(r.Name, r.Key, vp.Child("secretKeyRef"))
		}
		if vf.FileKeyRef != nil {
			n++
			v.add(vp.Child("fileKeyRef"), "fileKeyRef is not supported by staticlet")
		}
		if n != 1 {
			v.add(vp, "must have exactly one source, found %d", n)
		}
	}
	for i, ef := range c.EnvFrom {
		ep := p.Child("envFrom").Index(i)
		if ef.Prefix != "" {
			v.check(ep.Child("prefix"), ef.Prefix, validation.IsRelaxedEnvVarName(ef.Prefix))
		}
		if ef.ConfigMapRef != nil {
			v.objectName(ef.ConfigMapRef.Name, ep.Child("configMapRef", "name"))
		}
		if ef.SecretRef != nil {
			v.objectName(ef.SecretRef.Name, ep.Child("secretRef", "name"))
		}
		switch {
		case ef.ConfigMapRef != nil && ef.SecretRef != nil:
			v.addErrs(field.Forbidden(ep, "may not have more than one field specified at a time"))
		case ef.ConfigMapRef == nil && ef.SecretRef == nil:
			v.addErrs(field.Required(ep, "one of configMapRef or secretRef"))
		}
	}
}

// containerNames returns the names of the pod's init and app containers,
// looked up once per env var: a scan per lookup would cost time quadratic
// in the manifest.
func containerNames(s *v1.PodSpec) sets.Set[string] {
	names := sets.New[string]()
	for _, list := range [][]v1.Container{s.InitContainers, s.Containers} {
		for _, c := range list {
			names.Insert(c.Name)
		}
	}
	return names
}

func (v *validator) mounts(c *v1.Container, p *field.Path, volumes volumeSet) {
	paths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if m.Name == "" {
			v.addErrs(field.Required(mp.Child("name"), ""))
		} else if !volumes.has(m.Name) {
			v.addErrs(field.NotFound(mp.Child("name"), m.Name))
		}
		// A relative mountPath is taken from the container's root, as
		// the kubelet takes it.
		abs := path.Clean("/" + m.MountPath)
		switch {
		case m.MountPath == "":
			v.addErrs(field.Required(mp.Child("mountPath"), ""))
		case paths.Has(abs):
			v.addErrs(field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(abs)
		if m.SubPath != "" && m.SubPathExpr != "" {
			v.addErrs(field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		v.relativePath(m.SubPath, mp.Child("subPath"), false)
		v.relativePath(m.SubPathExpr, mp.Child("subPathExpr"), false)
		if m.MountPropagation != nil {
			enum(v, mp.Child("mountPropagation"), *m.MountPropagation, v1.MountPropagationNone, v1.MountPropagationHostToContainer, v1.MountPropagationBidirectional)
			if *m.MountPropagation == v1.MountPropagationBidirectional &&
				(c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged) {
				v.addErrs(field.Forbidden(mp.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
			}
		}
		v.recursiveReadOnly(m, mp.Child("recursiveReadOnly"))
	}
	if len(c.VolumeDevices) > 0 {
		v.add(p.Child("volumeDevices"), "volume devices need a persistentVolumeClaim block volume, which needs an apiserver; %s", noAPIServer)
	}
}

// probe checks a liveness, readiness or startup probe; liveness and startup
// probes (once) must succeed once to count, and may shorten the grace
// period of the kill they cause, which a readiness probe does not cause.
func (v *validator) probe(pr *v1.Probe, p *field.Path, once bool) {
	if pr == nil {
		return
	}
	h := &pr.ProbeHandler
	v.handler(p, map[string]bool{"exec": h.Exec != nil, "httpGet": h.HTTPGet != nil, "tcpSocket": h.TCPSocket != nil, "grpc": h.GRPC != nil},
		h.Exec, h.HTTPGet, h.TCPSocket)
	if h.GRPC != nil {
		v.check(p.Child("grpc", "port"), h.GRPC.Port, validation.IsValidPortNum(int(h.GRPC.Port)))
	}
	for _, f := range []struct {
		name  string
		value int32
		min   int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds, 0},
		{"timeoutSeconds", pr.TimeoutSeconds, 1},
		{"periodSeconds", pr.PeriodSeconds, 1},
		{"successThreshold", pr.SuccessThreshold, 1},
		{"failureThreshold", pr.FailureThreshold, 1},
	} {
		if f.value < f.min {
			v.addErrs(field.Invalid(p.Child(f.name), f.value, fmt.Sprintf("must be greater than or equal to %d", f.min)))
		}
	}
	if once && pr.SuccessThreshold != 1 {
		v.addErrs(field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if !once && pr.TerminationGracePeriodSeconds != nil {
		v.addErrs(field.Invalid(p.Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must not be set for a readinessProbe"))
	} else if pr.TerminationGracePeriodSeconds != nil && *pr.TerminationGracePeriodSeconds <= 0 {
		v.addErrs(field.Invalid(p.Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
}

// lifecycle checks a container's hooks, of which a sleep may not outlast
// the pod's grace period, and its stop signal.
func (v *validator) lifecycle(l *v1.Lifecycle, p *field.Path, spec *v1.PodSpec) {
	if l == nil {
		return
	}
	grace := spec.TerminationGracePeriodSeconds
	if sig := l.StopSignal; sig != nil {
		// The signals differ by OS, so the pod must say which it is for.
		switch {
		case spec.OS == nil:
			v.addErrs(field.Forbidden(p.Child("stopSignal"), "may not be set for containers with empty `spec.os.name`"))
		case spec.OS.Name == v1.Linux && !linuxStopSignals.Has(string(*sig)):
			v.addErrs(field.NotSupported(p.Child("stopSignal"), *sig, sets.List(linuxStopSignals)))
		}
	}
	for _, f := range []struct {
		name string
		h    *v1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		h := f.h
		if h == nil {
			continue
		}
		hp := p.Child(f.name)
		v.handler(hp, map[string]bool{"exec": h.Exec != nil, "httpGet": h.HTTPGet != nil, "tcpSocket": h.TCPSocket != nil, "sleep": h.Sleep != nil},
			h.Exec, h.HTTPGet, h.TCPSocket)
		if h.Sleep != nil && (h.Sleep.Seconds < 0 || grace != nil && h.Sleep.Seconds > *grace) {
			msg := "must be greater than or equal to 0"
			if grace != nil {
				msg = fmt.Sprintf("must be between 0 and terminationGracePeriodSeconds (%d), inclusive", *grace)
			}
			v.addErrs(field.Invalid(hp.Child("sleep", "seconds"), h.Sleep.Seconds, msg))
		}
	}
}

// handler checks that exactly one of the handlers in set is given, and the
// common ones (exec, httpGet, tcpSocket) when they are.
func (v *validator) handler(p *field.Path, set map[string]bool, exec *v1.ExecAction, get *v1.HTTPGetAction, tcp *v1.TCPSocketAction) {
	var given []string
	for _, name := range sets.List(sets.KeySet(set)) {
		if set[name] {
			given = append(given, name)
		}
	}
	switch {
	case len(given) == 0:
		v.addErrs(field.Required(p, "must specify a handler type: one of "+strings.Join(sets.List(sets.KeySet(set)), ", ")))
	case len(given) > 1:
		v.addErrs(field.Forbidden(p.Child(given[1]), "may not specify more than one handler type"))
	}
	if exec != nil && len(exec.Command) == 0 {
		v.addErrs(field.Required(p.Child("exec", "command"), ""))
	}
	if get != nil {
		v.port(get.Port, p.Child("httpGet", "port"))
		enum(v, p.Child("httpGet", "scheme"), get.Scheme, v1.URISchemeHTTP, v1.URISchemeHTTPS)
		for i, h := range get.HTTPHeaders {
			v.check(p.Child("httpGet", "httpHeaders").Index(i).Child("name"), h.Name, validation.IsHTTPHeaderName(h.Name))
		}
	}
	if tcp != nil {
		v.port(tcp.Port, p.Child("tcpSocket", "port"))
	}
}

// port checks a port given as a number or a container port name.
func (v *validator) port(port intstr.IntOrString, p *field.Path) {
	if port.Type == intstr.String {
		v.check(p, port.StrVal, validation.IsValidPortName(port.StrVal))
		return
	}
	v.check(p, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))
}

// recursiveReadOnly checks a mount's recursiveReadOnly: a known mode, and
// one that makes submounts read-only only on a read-only mount that
// propagates nothing.
func (v *validator) recursiveReadOnly(m v1.VolumeMount, p *field.Path) {
	if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return
	}
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			v.addErrs(field.Forbidden(p, "may be set only when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
			v.addErrs(field.Forbidden(p, "may be set only when mountPropagation is None or unset"))
		}
	default:
		enum(v, p, *m.RecursiveReadOnly, v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible)
	}
}
