package node

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerEnv builds a container's environment in Kubernetes' order: the in-cluster API
// variables, envFrom sources, then env entries, each able to refer to the ones before it
// with $(NAME). The image's environment and PATH come first, under all of these.
func (w *podWorker) containerEnv(ctx context.Context, c *v1.Container) ([]kv, error) {
	pod := w.podCopy()
	var env []kv
	set := func(name, value string) {
		for i := range env {
			if env[i].name == name {
				env[i].value = value
				return
			}
		}
		env = append(env, kv{name, value})
	}
	k := w.k.cfg
	set("KUBERNETES_SERVICE_HOST", k.APIHost)
	set("KUBERNETES_SERVICE_PORT", k.APIPort)
	set("KUBERNETES_SERVICE_PORT_HTTPS", k.APIPort)
	set("KUBERNETES_PORT", "tcp://"+k.APIHost+":"+k.APIPort)

	for _, from := range c.EnvFrom {
		data, err := w.envFromData(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for name, value := range data {
			set(from.Prefix+name, value)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, envLookup(env)))
			continue
		}
		value, ok, err := w.envValueFrom(ctx, pod, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, value)
		}
	}
	return env, nil
}

type kv struct{ name, value string }

func envLookup(env []kv) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, e := range env {
			if e.name == name {
				return e.value, true
			}
		}
		return "", false
	}
}

func (w *podWorker) envFromData(ctx context.Context, ns string, from v1.EnvFromSource) (map[string]string, error) {
	core := w.k.client.CoreV1()
	switch {
	case from.ConfigMapRef != nil:
		cm, err := core.ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("configmap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := core.Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("secret %s: %w", from.SecretRef.Name, err)
		}
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

// envValueFrom resolves a valueFrom; ok is false when an optional key is missing.
func (w *podWorker) envValueFrom(ctx context.Context, pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource) (string, bool, error) {
	core := w.k.client.CoreV1()
	switch {
	case src.FieldRef != nil:
		v, err := w.fieldValue(pod, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := w.resourceValue(pod, c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := core.ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %s: %w", ref.Name, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if isOptional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("configmap %s has no key %s", ref.Name, ref.Key)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := core.Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if isOptional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// fieldValue resolves a downward API field path.
func (w *podWorker) fieldValue(pod *v1.Pod, path string) (string, error) {
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return w.k.cfg.NodeIP, nil
	case "status.podIP", "status.podIPs":
		return ip, nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// formatMap renders labels or annotations as the downward API does: key="value" lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

// resourceValue resolves a resourceFieldRef: a limit falls back to the node's allocatable.
func (w *podWorker) resourceValue(pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector) (string, error) {
	target := c
	if ref.ContainerName != "" {
		target = nil
		for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range list {
				if list[i].Name == ref.ContainerName {
					target = &list[i]
				}
			}
		}
		if target == nil {
			return "", fmt.Errorf("no container %s", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	list := target.Resources.Limits
	if kind == "requests" {
		list = target.Resources.Requests
	}
	q, found := list[v1.ResourceName(name)]
	if !found {
		q = w.k.cfg.Capacity[v1.ResourceName(name)]
		if kind == "requests" {
			q = resource.Quantity{}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == string(v1.ResourceCPU) {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

// expand replaces $(NAME) with defined variables, as Kubernetes does in env values, command
// and args: $$ is a literal $, and undefined references stay as written.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(list []string, lookup func(string) (string, bool)) []string {
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = expand(s, lookup)
	}
	return out
}
