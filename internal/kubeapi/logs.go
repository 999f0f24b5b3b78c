package kubeapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticlet/staticlet/internal/status"
)

// addPodLog adds pods/log to the pods resource when the server has
// Config.Logs to read logs with.
func (s *Server) addPodLog() {
	pods := s.find(v1.SchemeGroupVersion, "pods")
	if pods == nil || s.cfg.Logs == nil {
		return
	}
	if pods.subresources == nil {
		pods.subresources = map[string]subresource{}
	}
	pods.subresources["log"] = subresource{kind: "Pod", verbs: []string{verbGet}, serve: s.podLog}
}

// podLog serves pods/log as the apiserver and the kubelet answer it
// together: the apiserver's checks of the options and the container, the
// kubelet's of the container's state, then the log as plain text.
func (s *Server) podLog(w http.ResponseWriter, r *http.Request, req request) {
	if req.verb != verbGet {
		s.writeStatus(w, r, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed, Reason: metav1.StatusReasonMethodNotAllowed,
			Message: "pods/log is read with GET only",
		}})
		return
	}
	opts, err := podLogOptions(r.URL.Query(), req.name)
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	p := s.podNamed(req.namespace, req.name)
	if p == nil {
		s.writeStatus(w, r, apierrors.NewNotFound(v1.Resource("pods"), req.name))
		return
	}
	container, err := pickContainer(p, opts.Container)
	if err == nil {
		err = logState(p, container, opts.Previous)
	}
	if err != nil {
		s.writeStatus(w, r, err)
		return
	}
	rc, err := s.cfg.Logs(r.Context(), p.Namespace+"/"+p.Name, container, logOpenerOptions(opts))
	if err != nil {
		// The kubelet answers every failure to read a log with 400, which
		// the apiserver passes on.
		s.writeStatus(w, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	defer rc.Close()
	s.streamLog(w, r, rc)
}

// streamLog copies a log stream to the client, flushing after every read
// so that a follower sees lines as they come.
func (s *Server) streamLog(w http.ResponseWriter, r *http.Request, rc io.Reader) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rctl := http.NewResponseController(w)
	if rctl.Flush() != nil {
		return
	}
	buf := make([]byte, 32*1024)
	for {
		n, rerr := rc.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil || rctl.Flush() != nil {
				return // the client went away
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && r.Context().Err() == nil {
				s.log.Warn("reading container log", "path", r.URL.Path, "err", rerr)
			}
			return
		}
	}
}

// podNamed is a copy of the pod namespace/name, or nil.
func (s *Server) podNamed(namespace, name string) *v1.Pod {
	pods, _ := s.cfg.Store.PodsAt()
	for i := range pods {
		if pods[i].Namespace == namespace && pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

// podLogOptions decodes the query of a pods/log request as the apiserver
// does (with apimachinery's conversions of query parameters: a malformed
// one is a 400, an unknown one ignored, insecureSkipTLSVerifyBackend
// among them) and validates it as the apiserver does (422).
func podLogOptions(q url.Values, name string) (*v1.PodLogOptions, error) {
	opts := &v1.PodLogOptions{}
	bools := map[string]*bool{"follow": &opts.Follow, "previous": &opts.Previous, "timestamps": &opts.Timestamps}
	for key, out := range bools {
		if vals, ok := q[key]; ok {
			if err := runtime.Convert_Slice_string_To_bool(&vals, out, nil); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
	}
	ints := map[string]**int64{"tailLines": &opts.TailLines, "sinceSeconds": &opts.SinceSeconds, "limitBytes": &opts.LimitBytes}
	for key, out := range ints {
		if vals, ok := q[key]; ok {
			if err := runtime.Convert_Slice_string_To_Pointer_int64(&vals, out, nil); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
	}
	if vals, ok := q["sinceTime"]; ok {
		if err := metav1.Convert_Slice_string_To_Pointer_v1_Time(&vals, &opts.SinceTime, nil); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	opts.Container = q.Get("container")
	if errs := validatePodLogOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
	}
	return opts, nil
}

// validatePodLogOptions is the apiserver's validation of PodLogOptions
// (without the alpha stream selection).
func validatePodLogOptions(opts *v1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if opts.TailLines != nil && *opts.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *opts.TailLines, apivalidation.IsNegativeErrorMsg))
	}
	if opts.LimitBytes != nil && *opts.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *opts.LimitBytes, "must be greater than 0"))
	}
	switch {
	case opts.SinceSeconds != nil && opts.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case opts.SinceSeconds != nil && *opts.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *opts.SinceSeconds, "must be greater than 0"))
	}
	if opts.Stream != nil {
		errs = append(errs, field.Forbidden(field.NewPath("stream"), "may not be specified"))
	}
	return errs
}

// logOpenerOptions are the options of the log reader for opts.
func logOpenerOptions(opts *v1.PodLogOptions) status.LogOptions {
	out := status.LogOptions{Follow: opts.Follow, Previous: opts.Previous, Timestamps: opts.Timestamps, TailLines: -1}
	if opts.TailLines != nil {
		out.TailLines = *opts.TailLines
	}
	if opts.SinceSeconds != nil {
		out.SinceSeconds = *opts.SinceSeconds
	}
	if opts.SinceTime != nil {
		// The apiserver passes it on to the kubelet in whole seconds.
		out.SinceTime = opts.SinceTime.Truncate(time.Second)
	}
	if opts.LimitBytes != nil {
		out.LimitBytes = *opts.LimitBytes
	}
	return out
}

// pickContainer is the container a request for a log, an exec or an
// attach is for, as the apiserver picks it: the one named, which must be
// the pod's, else the pod's only container.
func pickContainer(p *v1.Pod, name string) (string, error) {
	var names []string
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range list {
			names = append(names, c.Name)
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	if name != "" {
		for _, n := range names {
			if n == name {
				return name, nil
			}
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, p.Name))
	}
	switch len(p.Spec.Containers) {
	case 1:
		return p.Spec.Containers[0].Name, nil
	case 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", p.Name))
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", p.Name, names))
	}
}

// logState answers, as the kubelet does, why a container has no log to
// read yet (or no previous one), from the pod's status.
func logState(p *v1.Pod, container string, previous bool) error {
	cs, ok := findStatus(p, container)
	if !ok {
		return logError("container %q in pod %q is not available", container, p.Name)
	}
	last := cs.LastTerminationState.Terminated
	lastOK := last != nil && last.ContainerID != ""
	switch {
	case previous:
		if !lastOK {
			return logError("previous terminated container %q in pod %q not found", container, p.Name)
		}
	case cs.State.Running != nil:
	case cs.State.Terminated != nil:
		if cs.State.Terminated.ContainerID == "" && !lastOK {
			return logError("container %q in pod %q is terminated", container, p.Name)
		}
	case last != nil:
		if !lastOK {
			return logError("container %q in pod %q is terminated", container, p.Name)
		}
	case cs.State.Waiting != nil:
		switch reason := cs.State.Waiting.Reason; reason {
		case "ErrImagePull":
			return logError("container %q in pod %q is waiting to start: image can't be pulled", container, p.Name)
		case "ImagePullBackOff":
			return logError("container %q in pod %q is waiting to start: trying and failing to pull image", container, p.Name)
		default:
			return logError("container %q in pod %q is waiting to start: %v", container, p.Name, reason)
		}
	default:
		return logError("container %q in pod %q is waiting to start - no logs yet", container, p.Name)
	}
	return nil
}

// logError is the kubelet's 400 about a container's log, as the
// apiserver passes it on.
func logError(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

func findStatus(p *v1.Pod, name string) (v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name {
				return cs, true
			}
		}
	}
	return v1.ContainerStatus{}, false
}
