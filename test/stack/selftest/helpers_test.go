// Package selftest checks the local stack end to end: real Pods running real etcd on the local
// kubelet, their networking, DNS, volumes, Jobs and the fault injection the operator's tests use.
package selftest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdplan/etcdplan/test/stack"
)

// Waits are generous: CI machines have two busy cores. No test asserts on how long anything takes.
const (
	startTimeout = 10 * time.Minute
	waitTimeout  = 5 * time.Minute
)

var (
	etcdImage    = "quay.io/coreos/etcd:" + stack.EtcdVersion
	busyboxImage = "busybox:1.37"
)

var shared struct {
	once sync.Once
	st   *stack.Stack
	err  error
}

// startStack returns the stack, starting it once per test binary.
func startStack(t *testing.T) *stack.Stack {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		shared.st, shared.err = stack.Start(ctx)
	})
	if shared.err != nil {
		t.Fatalf("starting the local stack: %v", shared.err)
	}
	return shared.st
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace enforcing the "restricted" Pod Security Standard, waits for
// its default ServiceAccount and deletes it when the test ends.
func newNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "selftest-" + prefix + "-",
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, c, ns.Name)
		}
		_ = c.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	waitFor(ctx, t, "the default ServiceAccount in "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return ns.Name
}

// waitFor polls cond every second until it holds; transient API errors are retried.
func waitFor(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

func dumpPods(t *testing.T, c kubernetes.Interface, ns string) {
	pods, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods in %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s on %q: phase %s, ip %q, conditions %s", ns, p.Name, p.Spec.NodeName, p.Status.Phase,
			p.Status.PodIP, conditions(&p))
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			t.Logf("  container %s: ready=%v restarts=%d state=%s last=%s", cs.Name, cs.Ready, cs.RestartCount,
				stateString(cs.State), stateString(cs.LastTerminationState))
		}
	}
	events, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

func conditions(p *corev1.Pod) string {
	var s []string
	for _, c := range p.Status.Conditions {
		s = append(s, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return strings.Join(s, ",")
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ": " + s.Waiting.Message + ")"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(exit %d, %s)", s.Terminated.ExitCode, s.Terminated.Reason)
	}
	return "-"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPodReady waits until the Pod is Ready with an IP and returns it.
func waitPodReady(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	return waitPod(ctx, t, c, ns, name, "Ready", func(p *corev1.Pod) bool { return podReady(p) && p.Status.PodIP != "" })
}

// waitPodDone waits until the Pod has Succeeded or Failed and returns it.
func waitPodDone(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	return waitPod(ctx, t, c, ns, name, "to finish", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
}

// waitPod waits until the Pod meets cond and returns it.
func waitPod(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(ctx, t, "pod "+ns+"/"+name+" "+what, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return cond(p), nil
	})
	return pod
}

func waitPodGone(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	waitFor(ctx, t, "pod "+ns+"/"+name+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func createPod(ctx context.Context, t *testing.T, c kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// restrictedPod is a Pod that meets the "restricted" Pod Security Standard.
func restrictedPod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	nonRoot, uid := true, int64(65532)
	grace := int64(5)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"selftest": name}},
		Spec: corev1.PodSpec{
			Containers:                    containers,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &nonRoot,
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				FSGroup:        &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
}

func restrictedContainer(name, image string, command ...string) corev1.Container {
	no, yes := false, true
	return corev1.Container{
		Name:    name,
		Image:   image,
		Command: command,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// etcdContainer runs an etcd member with its data in the volume "data" at /var/lib/etcd,
// Ready when /health says so.
func etcdContainer(args ...string) corev1.Container {
	c := restrictedContainer("etcd", etcdImage, append([]string{"etcd", "--data-dir=/var/lib/etcd/data"}, args...)...)
	c.Ports = []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2379)}},
		PeriodSeconds:    2,
		FailureThreshold: 3,
	}
	return c
}

// singleEtcdArgs makes a one-member cluster listening on all of the Pod's addresses.
func singleEtcdArgs(name, advertiseHost string) []string {
	return []string{
		"--name=" + name,
		"--listen-client-urls=http://0.0.0.0:2379",
		"--advertise-client-urls=http://" + advertiseHost + ":2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=" + name + "=http://127.0.0.1:2380",
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func pvcVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

// createPVC creates a claim on the default StorageClass and waits until it is Bound.
func createPVC(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	_, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pvc *corev1.PersistentVolumeClaim
	waitFor(ctx, t, "PVC "+ns+"/"+name+" Bound", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		pvc = p
		return err == nil && p.Status.Phase == corev1.ClaimBound, err
	})
	return pvc
}

// etcdClient connects to etcd members from the host.
func etcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	for i, e := range endpoints {
		endpoints[i] = "http://" + e + ":2379"
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// etcdGet reads key from one member (linearizable); "" when it is absent.
func etcdGet(ctx context.Context, ip, key string) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + ip + ":2379"},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

func etcdPut(ctx context.Context, ip, key, value string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + ip + ":2379"},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, key, value)
	return err
}
