package pod

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks here follow the apiserver's for the pod's and the containers'
// security contexts, the host namespaces, sysctls, seccomp and AppArmor
// (and their older annotations), and spec.os. The kubelet runs the same
// checks on a static pod before it admits it.

const (
	// maxSysctlName is the longest sysctl name the apiserver accepts.
	maxSysctlName = 253
	// maxAppArmorProfile is PATH_MAX less one, the longest profile name.
	maxAppArmorProfile = 4095
)

// sysctlName matches a sysctl name: segments of lower-case letters, digits,
// '-' and '_' (neither of those at either end), joined by '.' or '/', as
// sysctl(8) writes them (net.ipv4.ip_forward, net/ipv4/conf/eth0.100/forwarding).
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// hostUsers is whether the pod's containers use the host's user namespace
// (spec.hostUsers unset means they do).
func hostUsers(s *v1.PodSpec) bool {
	return s.HostUsers == nil || *s.HostUsers
}

// podSecurity checks spec.securityContext and the host namespace settings.
func (v *validator) podSecurity(s *v1.PodSpec, p *field.Path) {
	if !hostUsers(s) {
		// The apiserver accepts it, and a kubelet with user namespaces
		// runs the pod in one; staticlet would run it in the host's, with
		// what the pod asked for on the strength of one (procMount
		// Unmasked) given to host root.
		v.add(p.Child("hostUsers"), "user namespaces are not supported by staticlet, which would run this pod in the host's; remove hostUsers or set it to true")
		// A user namespace is not shared with the host's other namespaces.
		for _, f := range []struct {
			name string
			set  bool
		}{{"hostNetwork", s.HostNetwork}, {"hostPID", s.HostPID}, {"hostIPC", s.HostIPC}} {
			if f.set {
				v.addErrs(field.Forbidden(p.Child(f.name), "may not be set when hostUsers is false"))
			}
		}
	}
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace && s.HostPID {
		v.addErrs(field.Invalid(p.Child("shareProcessNamespace"), true, "may not be true when hostPID is true"))
	}
	sc := s.SecurityContext
	if sc == nil {
		return
	}
	sp := p.Child("securityContext")
	v.ids(sc.RunAsUser, sc.RunAsGroup, sp)
	if sc.FSGroup != nil {
		v.check(sp.Child("fsGroup"), *sc.FSGroup, validation.IsValidGroupID(*sc.FSGroup))
	}
	for i, g := range sc.SupplementalGroups {
		v.check(sp.Child("supplementalGroups").Index(i), g, validation.IsValidGroupID(g))
	}
	if sc.FSGroupChangePolicy != nil {
		enum(v, sp.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy, v1.FSGroupChangeAlways, v1.FSGroupChangeOnRootMismatch)
	}
	if sc.SupplementalGroupsPolicy != nil {
		enum(v, sp.Child("supplementalGroupsPolicy"), *sc.SupplementalGroupsPolicy, v1.SupplementalGroupsPolicyMerge, v1.SupplementalGroupsPolicyStrict)
	}
	if sc.SELinuxChangePolicy != nil {
		enum(v, sp.Child("seLinuxChangePolicy"), *sc.SELinuxChangePolicy, v1.SELinuxChangePolicyMountOption, v1.SELinuxChangePolicyRecursive)
	}
	v.sysctls(s, sp.Child("sysctls"))
	v.seccomp(sc.SeccompProfile, sp.Child("seccompProfile"))
	v.appArmor(sc.AppArmorProfile, sp.Child("appArmorProfile"))
}

// ids checks a runAsUser and a runAsGroup: both are 31-bit, as the
// apiserver has them.
func (v *validator) ids(user, group *int64, p *field.Path) {
	if user != nil {
		v.check(p.Child("runAsUser"), *user, validation.IsValidUserID(*user))
	}
	if group != nil {
		v.check(p.Child("runAsGroup"), *group, validation.IsValidGroupID(*group))
	}
}

// containerSecurity checks a container's securityContext.
func (v *validator) containerSecurity(sc *v1.SecurityContext, p *field.Path, s *v1.PodSpec) {
	if sc == nil {
		return
	}
	v.ids(sc.RunAsUser, sc.RunAsGroup, p)
	if sc.ProcMount != nil {
		enum(v, p.Child("procMount"), *sc.ProcMount, v1.DefaultProcMount, v1.UnmaskedProcMount)
		if *sc.ProcMount == v1.UnmaskedProcMount && hostUsers(s) {
			v.addErrs(field.Invalid(p.Child("procMount"), *sc.ProcMount, "may be Unmasked only when hostUsers is false"))
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		// A privileged process, or one with CAP_SYS_ADMIN, can always
		// gain privileges, so forbidding escalation would be a lie.
		if sc.Privileged != nil && *sc.Privileged {
			v.addErrs(field.Invalid(p.Child("allowPrivilegeEscalation"), false, "may not be false when privileged is true"))
		}
		if sc.Capabilities != nil {
			for i, c := range sc.Capabilities.Add {
				if c == "CAP_SYS_ADMIN" {
					v.addErrs(field.Invalid(p.Child("capabilities", "add").Index(i), c, "may not be added when allowPrivilegeEscalation is false"))
				}
			}
		}
	}
	v.seccomp(sc.SeccompProfile, p.Child("seccompProfile"))
	v.appArmor(sc.AppArmorProfile, p.Child("appArmorProfile"))
}

// sysctls checks the pod's sysctls: their names, that none is given
// twice, and that none would change a namespace the pod shares with the
// host.
func (v *validator) sysctls(s *v1.PodSpec, p *field.Path) {
	seen := map[string]bool{}
	for i, sc := range s.SecurityContext.Sysctls {
		np := p.Index(i).Child("name")
		switch {
		case sc.Name == "":
			v.addErrs(field.Required(np, ""))
			continue
		case len(sc.Name) > maxSysctlName || !sysctlName.MatchString(sc.Name):
			v.addErrs(field.Invalid(np, sc.Name, fmt.Sprintf("must be a sysctl name of at most %d characters: "+
				"segments of lower-case letters, digits, '-' and '_' (starting and ending with a letter or digit) "+
				"separated by '.' or '/', e.g. 'net.ipv4.ip_forward'", maxSysctlName)))
		case seen[sc.Name]:
			v.addErrs(field.Duplicate(np, sc.Name))
		}
		seen[sc.Name] = true
		switch ns, _ := SysctlNamespace(sc.Name); {
		case ns == SysctlNet && s.HostNetwork:
			v.addErrs(field.Invalid(np, sc.Name, "may not be set when hostNetwork is true"))
		case ns == SysctlIPC && s.HostIPC:
			v.addErrs(field.Invalid(np, sc.Name, "may not be set when hostIPC is true"))
		}
	}
}

// Namespaces a sysctl can belong to, as SysctlNamespace names them.
const (
	SysctlNet = "network"
	SysctlIPC = "IPC"
)

// SysctlNamespace tells whether a sysctl belongs to a namespace a pod can
// have of its own (SysctlNet or SysctlIPC), and to which. The name may be
// written with '/' separators (net/ipv4/ip_forward).
func SysctlNamespace(name string) (ns string, ok bool) {
	if i := strings.IndexAny(name, "./"); i >= 0 && name[i] == '/' {
		// In the '/' form a '.' is part of a segment; swapping the two
		// gives the '.' form's prefixes.
		name = strings.Map(func(r rune) rune {
			switch r {
			case '/':
				return '.'
			case '.':
				return '/'
			}
			return r
		}, name)
	}
	switch {
	case strings.HasPrefix(name, "net."):
		return SysctlNet, true
	case strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"),
		name == "kernel.sem", strings.HasPrefix(name, "fs.mqueue."):
		return SysctlIPC, true
	}
	return "", false
}

// seccomp checks a seccompProfile: a known type, and a localhostProfile,
// a path below the kubelet's seccomp directory, exactly when the type is
// Localhost.
func (v *validator) seccomp(sp *v1.SeccompProfile, p *field.Path) {
	if sp == nil {
		return
	}
	if sp.Type == "" {
		v.addErrs(field.Required(p.Child("type"), "type is required when seccompProfile is set"))
	} else {
		enum(v, p.Child("type"), sp.Type, v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined)
	}
	lp := p.Child("localhostProfile")
	switch {
	case sp.Type == v1.SeccompProfileTypeLocalhost && sp.LocalhostProfile == nil:
		v.addErrs(field.Required(lp, "must be set when type is Localhost"))
	case sp.Type == v1.SeccompProfileTypeLocalhost:
		v.relativePath(*sp.LocalhostProfile, lp, false)
	case sp.LocalhostProfile != nil:
		v.addErrs(field.Invalid(lp, *sp.LocalhostProfile, "may be set only when type is Localhost"))
	}
}

// appArmor checks an appArmorProfile the same way as seccomp: a known type,
// and a profile name exactly when the type is Localhost.
func (v *validator) appArmor(ap *v1.AppArmorProfile, p *field.Path) {
	if ap == nil {
		return
	}
	lp := p.Child("localhostProfile")
	switch ap.Type {
	case v1.AppArmorProfileTypeLocalhost:
		switch name := ap.LocalhostProfile; {
		case name == nil || *name == "":
			v.addErrs(field.Required(lp, "must be set when type is Localhost"))
		case strings.TrimSpace(*name) != *name:
			v.addErrs(field.Invalid(lp, *name, "must not have leading or trailing whitespace"))
		case len(*name) > maxAppArmorProfile:
			v.addErrs(field.TooLong(lp, *name, maxAppArmorProfile))
		}
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			v.addErrs(field.Invalid(lp, *ap.LocalhostProfile, "may be set only when type is Localhost"))
		}
	case "":
		v.addErrs(field.Required(p.Child("type"), "type is required when appArmorProfile is set"))
	default:
		enum(v, p.Child("type"), ap.Type, v1.AppArmorProfileTypeLocalhost, v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined)
	}
}

// podOS checks spec.os. staticlet runs Linux containers, so a Windows pod
// is refused here, as the kubelet on a Linux node refuses it at admission;
// a Linux pod may not carry Windows options.
func (v *validator) podOS(s *v1.PodSpec, p *field.Path) {
	if s.OS == nil {
		return
	}
	op := p.Child("os", "name")
	switch s.OS.Name {
	case v1.Linux:
	case v1.Windows:
		v.add(op, "staticlet runs Linux containers; a pod for windows cannot run on this node")
		return
	case "":
		v.addErrs(field.Required(op, ""))
		return
	default:
		v.addErrs(field.NotSupported(op, s.OS.Name, []v1.OSName{v1.Linux, v1.Windows}))
		return
	}
	if sc := s.SecurityContext; sc != nil && sc.WindowsOptions != nil {
		v.addErrs(field.Forbidden(p.Child("securityContext", "windowsOptions"), "may not be set for a linux pod"))
	}
	visitContainers(s, p, func(c *v1.Container, cp *field.Path) {
		if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil {
			v.addErrs(field.Forbidden(cp.Child("securityContext", "windowsOptions"), "may not be set for a linux pod"))
		}
	})
}

// hostProcess checks Windows host process containers as the apiserver
// does on any pod: a container and its pod agree when both say, every
// container or none is one, and such a pod is on the host's network.
func (v *validator) hostProcess(s *v1.PodSpec, p *field.Path) {
	var podHP *bool
	if sc := s.SecurityContext; sc != nil && sc.WindowsOptions != nil {
		podHP = sc.WindowsOptions.HostProcess
	}
	containers, hostProcess := 0, 0
	visitContainers(s, p, func(c *v1.Container, cp *field.Path) {
		containers++
		var hp *bool
		if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil {
			hp = sc.WindowsOptions.HostProcess
		}
		if podHP != nil && hp != nil && *podHP != *hp {
			v.addErrs(field.Invalid(cp.Child("securityContext", "windowsOptions", "hostProcess"), *hp,
				fmt.Sprintf("pod hostProcess value must be identical if both are specified, was %v", *podHP)))
		}
		if hp != nil && *hp || hp == nil && podHP != nil && *podHP {
			hostProcess++
		}
	})
	if hostProcess == 0 {
		return
	}
	if hostProcess != containers {
		v.addErrs(field.Invalid(p, "", "If pod contains any hostProcess containers then all containers must be HostProcess containers"))
	}
	if !s.HostNetwork {
		v.addErrs(field.Invalid(p.Child("hostNetwork"), s.HostNetwork, "hostNetwork must be true if pod contains any hostProcess containers"))
	}
}

// visitContainers calls fn with each init and app container and its path.
func visitContainers(s *v1.PodSpec, p *field.Path, fn func(c *v1.Container, cp *field.Path)) {
	for i := range s.InitContainers {
		fn(&s.InitContainers[i], p.Child("initContainers").Index(i))
	}
	for i := range s.Containers {
		fn(&s.Containers[i], p.Child("containers").Index(i))
	}
}

// securityAnnotations checks the annotations that came before the seccomp
// and AppArmor fields, which the apiserver still checks: their values, the
// containers they name, and that they agree with the fields where both are
// given.
func (v *validator) securityAnnotations(pd *v1.Pod, p *field.Path) {
	s := &pd.Spec
	for _, k := range sets.List(sets.KeySet(pd.Annotations)) {
		val := pd.Annotations[k]
		kp := p.Key(k)
		switch {
		case k == v1.SeccompPodAnnotationKey:
			v.seccompAnnotation(val, kp)
			if sc := s.SecurityContext; sc != nil {
				v.seccompAgrees(val, sc.SeccompProfile, field.NewPath("spec", "securityContext", "seccompProfile"))
			}
		case strings.HasPrefix(k, v1.SeccompContainerAnnotationKeyPrefix):
			v.seccompAnnotation(val, kp)
			name := strings.TrimPrefix(k, v1.SeccompContainerAnnotationKeyPrefix)
			visitContainers(s, field.NewPath("spec"), func(c *v1.Container, cp *field.Path) {
				if c.Name == name && c.SecurityContext != nil {
					v.seccompAgrees(val, c.SecurityContext.SeccompProfile, cp.Child("securityContext", "seccompProfile"))
				}
			})
		case strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):
			name := strings.TrimPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix)
			if !containerNames(s).Has(name) {
				v.addErrs(field.Invalid(kp, name, "names no container of this pod"))
			}
			if val != "" && val != v1.DeprecatedAppArmorBetaProfileRuntimeDefault && val != v1.DeprecatedAppArmorBetaProfileNameUnconfined &&
				!strings.HasPrefix(val, v1.DeprecatedAppArmorBetaProfileNamePrefix) {
				v.addErrs(field.Invalid(kp, val, "must be runtime/default, unconfined or localhost/<profile>"))
			}
			v.appArmorAgrees(s, name, val)
		case k == v1.PodDeletionCost:
			if _, err := strconv.ParseInt(val, 10, 32); err != nil {
				v.addErrs(field.Invalid(kp, val, "must be a 32-bit integer"))
			}
		}
	}
}

// seccompAnnotation checks the value of a seccomp annotation.
func (v *validator) seccompAnnotation(val string, p *field.Path) {
	switch {
	case val == v1.SeccompProfileRuntimeDefault, val == v1.DeprecatedSeccompProfileDockerDefault, val == v1.SeccompProfileNameUnconfined:
	case strings.HasPrefix(val, v1.SeccompLocalhostProfileNamePrefix):
		v.relativePath(strings.TrimPrefix(val, v1.SeccompLocalhostProfileNamePrefix), p, false)
	default:
		v.addErrs(field.Invalid(p, val, "must be runtime/default, docker/default, unconfined or localhost/<path>"))
	}
}

// profileForms returns the annotation values that say what a seccomp or
// AppArmor profile field of type typ says (the two share type names and
// annotation forms; seccomp alone has the extra docker/default), or nil
// for a type the annotations cannot say.
func profileForms(typ string, localhost *string, extraDefault ...string) []string {
	switch typ {
	case string(v1.SeccompProfileTypeUnconfined):
		return []string{v1.SeccompProfileNameUnconfined}
	case string(v1.SeccompProfileTypeRuntimeDefault):
		return append([]string{v1.SeccompProfileRuntimeDefault}, extraDefault...)
	case string(v1.SeccompProfileTypeLocalhost):
		if localhost == nil {
			return []string{} // reported as missing; no annotation agrees
		}
		return []string{v1.SeccompLocalhostProfileNamePrefix + *localhost}
	}
	return nil
}

// agrees checks that an annotation says what the profile field at p says,
// given the annotation values that would (from profileForms).
func (v *validator) agrees(val string, forms []string, p *field.Path, what string) {
	if forms != nil && !slices.Contains(forms, val) {
		v.addErrs(field.Forbidden(p, fmt.Sprintf("must agree with the %s annotation (%s)", what, val)))
	}
}

// seccompAgrees checks that a seccomp annotation says what the field at p
// says, when both are given.
func (v *validator) seccompAgrees(val string, sp *v1.SeccompProfile, p *field.Path) {
	if sp != nil {
		v.agrees(val, profileForms(string(sp.Type), sp.LocalhostProfile, v1.DeprecatedSeccompProfileDockerDefault), p, "seccomp")
	}
}

// appArmorAgrees checks that the AppArmor annotation of container name
// says what its profile field (its own, else the pod's) says.
func (v *validator) appArmorAgrees(s *v1.PodSpec, name, val string) {
	var podProfile *v1.AppArmorProfile
	if s.SecurityContext != nil {
		podProfile = s.SecurityContext.AppArmorProfile
	}
	visitContainers(s, field.NewPath("spec"), func(c *v1.Container, cp *field.Path) {
		ap := podProfile
		if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
			ap = c.SecurityContext.AppArmorProfile
		}
		if c.Name == name && ap != nil {
			v.agrees(val, profileForms(string(ap.Type), ap.LocalhostProfile), cp.Child("securityContext", "appArmorProfile"), "AppArmor")
		}
	})
}
