package selftest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// An etcd Pod becomes Ready with an IP, and etcd answers there from the host.
func TestEtcdPodReady(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "etcd")

	pod := restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...))
	pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
	createPod(ctx, t, c, pod)
	ready := waitPodReady(ctx, t, c, ns, "etcd")
	if net.ParseIP(ready.Status.PodIP) == nil {
		t.Fatalf("pod IP %q", ready.Status.PodIP)
	}
	if err := etcdPut(ctx, ready.Status.PodIP, "hello", "world"); err != nil {
		t.Fatalf("put at %s: %v", ready.Status.PodIP, err)
	}
	if v, err := etcdGet(ctx, ready.Status.PodIP, "hello"); err != nil || v != "world" {
		t.Fatalf("get at %s = %q, %v; want world", ready.Status.PodIP, v, err)
	}
}

// Two Pods reach each other by their headless-Service DNS names: a container in each writes to
// the other's etcd through hostname.subdomain.namespace.svc.cluster.local.
func TestHeadlessServiceDNS(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "dns")
	// Published before ready: the put container exits, and a Pod with a finished container
	// is never Ready again, so only a Service that publishes not-ready Pods keeps naming it.
	createHeadlessService(ctx, t, c, ns, "peers", "dns", true)

	fqdn := func(host string) string { return host + ".peers." + ns + ".svc.cluster.local" }
	for _, p := range []struct{ name, other string }{{"a", "b"}, {"b", "a"}} {
		put := restrictedContainer("put", etcdImage, "etcdctl",
			"--endpoints=http://"+fqdn(p.other)+":2379", "--dial-timeout=20s", "--command-timeout=30s",
			"put", "from-"+p.name, p.name)
		pod := restrictedPod(ns, p.name, etcdContainer(singleEtcdArgs(p.name, fqdn(p.name))...), put)
		pod.Labels["app"] = "dns"
		pod.Spec.Hostname = p.name
		pod.Spec.Subdomain = "peers"
		// etcd keeps running; the put container is retried until it succeeds once.
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
		createPod(ctx, t, c, pod)
	}
	ips := map[string]string{}
	for _, name := range []string{"a", "b"} {
		waitFor(ctx, t, "pod "+name+" running with an IP", func(ctx context.Context) (bool, error) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ips[name] = p.Status.PodIP
			return p.Status.PodIP != "", nil
		})
	}
	for _, p := range []struct{ name, other string }{{"a", "b"}, {"b", "a"}} {
		// The key from-a is in b's etcd: a reached b by name.
		waitFor(ctx, t, fmt.Sprintf("key from-%s in %s's etcd", p.name, p.other), func(ctx context.Context) (bool, error) {
			v, err := etcdGet(ctx, ips[p.other], "from-"+p.name)
			return v == p.name, err
		})
	}
}

// createHeadlessService creates a headless Service selecting app=<app> on ports 2379 and 2380.
func createHeadlessService(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name, app string, publishNotReady bool) {
	t.Helper()
	_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{"app": app},
			PublishNotReadyAddresses: publishNotReady,
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 2379},
				{Name: "peer", Port: 2380},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// Three hand-written Pods form a three-member etcd cluster through their DNS names, as the
// operator's members will; it serves puts and gets on every member's Pod IP.
func TestEtcdThreeMembers(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "cluster")
	createHeadlessService(ctx, t, c, ns, "members", "members", true)

	fqdn := func(host string) string { return host + ".members." + ns + ".svc.cluster.local" }
	names := []string{"m0", "m1", "m2"}
	var initial string
	for i, n := range names {
		if i > 0 {
			initial += ","
		}
		initial += n + "=http://" + fqdn(n) + ":2380"
	}
	for _, n := range names {
		pod := restrictedPod(ns, n, etcdContainer(
			"--name="+n,
			"--listen-client-urls=http://0.0.0.0:2379",
			"--advertise-client-urls=http://"+fqdn(n)+":2379",
			"--listen-peer-urls=http://0.0.0.0:2380",
			"--initial-advertise-peer-urls=http://"+fqdn(n)+":2380",
			"--initial-cluster="+initial,
			"--initial-cluster-state=new",
			"--initial-cluster-token="+ns,
		))
		pod.Labels["app"] = "members"
		pod.Spec.Hostname = n
		pod.Spec.Subdomain = "members"
		pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
		createPod(ctx, t, c, pod)
	}
	var ips []string
	for _, n := range names {
		ips = append(ips, waitPodReady(ctx, t, c, ns, n).Status.PodIP)
	}
	cli := etcdClient(t, append([]string(nil), ips...)...)
	waitFor(ctx, t, "three started members", func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false, err
		}
		started := 0
		for _, m := range resp.Members {
			if m.Name != "" {
				started++
			}
		}
		return len(resp.Members) == 3 && started == 3, nil
	})
	for i, ip := range ips {
		key, value := fmt.Sprintf("key-%d", i), fmt.Sprintf("value-%d", i)
		waitFor(ctx, t, "a put at "+names[i], func(ctx context.Context) (bool, error) {
			return true, etcdPut(ctx, ip, key, value)
		})
		for j, other := range ips {
			v, err := etcdGet(ctx, other, key)
			if err != nil || v != value {
				t.Fatalf("get %s at %s = %q, %v; want %q (put at %s)", key, names[j], v, err, value, names[i])
			}
		}
	}
}

// A Pod deleted and created again on the same PVC finds its data; its emptyDir is new.
func TestPVCKeepsDataEmptyDirDoesNot(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "volumes")
	createPVC(ctx, t, c, ns, "data")

	pod := func(script string) *corev1.Pod {
		ctr := restrictedContainer("sh", busyboxImage, "sh", "-c", script)
		ctr.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "scratch", MountPath: "/scratch"}}
		p := restrictedPod(ns, "volumes", ctr)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Volumes = []corev1.Volume{pvcVolume("data", "data"), emptyDir("scratch")}
		return p
	}
	createPod(ctx, t, c, pod(`echo kept > /data/marker && echo gone > /scratch/marker && test -s /scratch/marker`))
	if p := waitPodDone(ctx, t, c, ns, "volumes"); p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("writer pod %s: %s", p.Status.Phase, exitCodes(p))
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, "volumes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(ctx, t, c, ns, "volumes")

	// Exit 3: the PVC lost its data; exit 4: the emptyDir outlived its Pod.
	createPod(ctx, t, c, pod(`test "$(cat /data/marker)" = kept || exit 3; test ! -e /scratch/marker || exit 4; test -d /scratch || exit 5`))
	p := waitPodDone(ctx, t, c, ns, "volumes")
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("checker pod %s: %s (3: PVC data lost, 4: emptyDir kept, 5: no emptyDir)", p.Status.Phase, exitCodes(p))
	}
}

func exitCodes(p *corev1.Pod) string {
	s := ""
	for _, cs := range p.Status.ContainerStatuses {
		s += fmt.Sprintf("%s: %s; ", cs.Name, stateString(cs.State))
	}
	return s
}

// A Job runs to completion.
func TestJobCompletes(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "job")

	tmpl := restrictedPod(ns, "", restrictedContainer("job", busyboxImage, "sh", "-c", "echo hello from a job"))
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	backoff := int32(2)
	_, err := c.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "hello"}}, Spec: tmpl.Spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "job hello complete", func(ctx context.Context) (bool, error) {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				t.Fatalf("job failed: %s", cond.Message)
			}
		}
		return false, nil
	})
}

// A cut Pod cannot be reached, and can again once healed.
func TestCutAndHeal(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "cut")

	pod := restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...))
	pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
	createPod(ctx, t, c, pod)
	ip := waitPodReady(ctx, t, c, ns, "etcd").Status.PodIP
	if err := etcdPut(ctx, ip, "k", "before"); err != nil {
		t.Fatalf("put before the cut: %v", err)
	}

	if err := st.CutPod(ctx, ns, "etcd"); err != nil {
		t.Fatal(err)
	}
	// Unreachable: three connection attempts in a row fail.
	waitFor(ctx, t, "the cut pod to be unreachable", func(ctx context.Context) (bool, error) {
		for range 3 {
			if reachable(ip) {
				return false, nil
			}
		}
		return true, nil
	})
	if err := st.HealPod(ctx, ns, "etcd"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the healed pod to answer", func(ctx context.Context) (bool, error) {
		v, err := etcdGet(ctx, ip, "k")
		return v == "before", err
	})
}

// reachable reports whether a TCP connection to etcd at ip succeeds within two seconds.
func reachable(ip string) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "2379"), 2*time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// A killed container is restarted; a wiped PVC comes back empty: etcd restarted on it has
// lost the key written before.
func TestKillContainerAndWipePVC(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "faults")
	createPVC(ctx, t, c, ns, "data")

	pod := restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...))
	pod.Spec.Volumes = []corev1.Volume{pvcVolume("data", "data")}
	createPod(ctx, t, c, pod)
	ip := waitPodReady(ctx, t, c, ns, "etcd").Status.PodIP
	if err := etcdPut(ctx, ip, "k", "v"); err != nil {
		t.Fatal(err)
	}

	// Killed: restarted on the same data.
	if err := st.KillContainer(ctx, ns, "etcd", "etcd"); err != nil {
		t.Fatal(err)
	}
	waitRestartedReady(ctx, t, c, ns, "etcd", 1)
	waitFor(ctx, t, "the key after a restart", func(ctx context.Context) (bool, error) {
		v, err := etcdGet(ctx, ip, "k")
		return v == "v", err
	})

	// Wiped and killed: restarted on an empty directory, a new etcd without the key.
	if err := st.WipePVC(ctx, ns, "data"); err != nil {
		t.Fatal(err)
	}
	if err := st.KillContainer(ctx, ns, "etcd", "etcd"); err != nil {
		t.Fatal(err)
	}
	waitRestartedReady(ctx, t, c, ns, "etcd", 2)
	waitFor(ctx, t, "etcd on the wiped volume to answer", func(ctx context.Context) (bool, error) {
		v, err := etcdGet(ctx, ip, "k")
		if err != nil {
			return false, err
		}
		if v != "" {
			t.Fatalf("key k = %q after the PVC was wiped", v)
		}
		return true, nil
	})
}

func waitRestartedReady(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string, restarts int32) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("pod %s restarted %d times and Ready", name, restarts), func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount >= restarts && cs.Ready && podReady(p) {
				return true, nil
			}
		}
		return false, nil
	})
}
