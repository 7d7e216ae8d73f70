package node

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestExpand(t *testing.T) {
	lookup := envLookup([]kv{{"A", "x"}, {"POD_NAME", "etcd-0"}})
	for in, want := range map[string]string{
		"plain":                       "plain",
		"--name=$(POD_NAME)":          "--name=etcd-0",
		"$(A)$(A)-$(B)":               "xx-$(B)",
		"$$(A) costs $$5":             "$(A) costs $5",
		"unterminated $(A":            "unterminated $(A",
		"a lone $ stays":              "a lone $ stays",
		"http://$(POD_NAME).svc:2380": "http://etcd-0.svc:2380",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResolvConfAndHosts(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Namespace: "db"},
		Spec: v1.PodSpec{Hostname: "etcd-0", Subdomain: "etcd",
			HostAliases: []v1.HostAlias{{IP: "10.88.0.9", Hostnames: []string{"x", "y"}}}}}
	rc, err := resolvConf(pod, "10.88.0.1", "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	want := "nameserver 10.88.0.1\nsearch db.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
	if rc != want {
		t.Fatalf("resolv.conf:\n%s\nwant:\n%s", rc, want)
	}
	pod.Spec.DNSPolicy = v1.DNSNone
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"10.88.0.53"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}}}
	if rc, _ := resolvConf(pod, "10.88.0.1", "cluster.local"); rc != "nameserver 10.88.0.53\noptions ndots:2\n" {
		t.Fatalf("dnsPolicy None: %q", rc)
	}
	hosts := hostsFile(pod, "10.88.1.2", "cluster.local")
	for _, line := range []string{"127.0.0.1\tlocalhost", "10.88.1.2\tetcd-0.etcd.db.svc.cluster.local\tetcd-0", "10.88.0.9\tx\ty"} {
		if !strings.Contains(hosts, line+"\n") {
			t.Errorf("hosts lacks %q:\n%s", line, hosts)
		}
	}
}

func TestCredentials(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{3000}}}}
	c := &v1.Container{SecurityContext: &v1.SecurityContext{RunAsGroup: ptr.To[int64](1001)}}
	uid, gid, groups, err := credentials(pod, c, nil)
	if err != nil || uid != 1000 || gid != 1001 || len(groups) != 3 || groups[1] != 2000 || groups[2] != 3000 {
		t.Fatalf("got %d %d %v %v", uid, gid, groups, err)
	}
	root := &v1.Pod{}
	if uid, gid, groups, _ := credentials(root, &v1.Container{}, nil); uid != -1 || gid != -1 || groups != nil {
		t.Fatalf("root keeps credentials: %d %d %v", uid, gid, groups)
	}
	nonRoot := &v1.Container{SecurityContext: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}}
	if _, _, _, err := credentials(root, nonRoot, nil); err == nil {
		t.Fatal("runAsNonRoot with a root image must fail")
	}
	if uid, _, _, err := credentials(root, nonRoot, ptr.To[int64](65532)); err != nil || uid != 65532 {
		t.Fatalf("image user: %d %v", uid, err)
	}
}

func TestResourceValue(t *testing.T) {
	k := &Kubelet{cfg: Config{Capacity: DefaultCapacity()}}
	w := &podWorker{k: k}
	c := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("64Mi")}}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*c}}}
	for _, tt := range []struct {
		res, divisor, want string
	}{
		{"limits.cpu", "", "2"},
		{"limits.cpu", "1m", "1500"},
		{"limits.memory", "1Mi", "64"},
	} {
		ref := &v1.ResourceFieldSelector{Resource: tt.res}
		if tt.divisor != "" {
			ref.Divisor = resource.MustParse(tt.divisor)
		}
		if got, err := w.resourceValue(pod, c, ref); err != nil || got != tt.want {
			t.Errorf("%s/%s: %s %v, want %s", tt.res, tt.divisor, got, err, tt.want)
		}
	}
	noLimit := &v1.Container{Name: "n"}
	if got, _ := w.resourceValue(pod, noLimit, &v1.ResourceFieldSelector{Resource: "limits.cpu"}); got != "4" {
		t.Errorf("no limit: node allocatable expected, got %s", got)
	}
}

func TestPhase(t *testing.T) {
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	exited := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
	}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	tests := []struct {
		policy v1.RestartPolicy
		states []v1.ContainerState
		last   []v1.ContainerState
		want   v1.PodPhase
	}{
		{v1.RestartPolicyAlways, []v1.ContainerState{waiting}, nil, v1.PodPending},
		{v1.RestartPolicyAlways, []v1.ContainerState{running, exited(1)}, nil, v1.PodRunning},
		{v1.RestartPolicyNever, []v1.ContainerState{exited(0), exited(0)}, nil, v1.PodSucceeded},
		{v1.RestartPolicyNever, []v1.ContainerState{exited(0), exited(2)}, nil, v1.PodFailed},
		{v1.RestartPolicyOnFailure, []v1.ContainerState{exited(2)}, nil, v1.PodRunning},
		{v1.RestartPolicyOnFailure, []v1.ContainerState{exited(0)}, nil, v1.PodSucceeded},
		// Waiting after a crash counts as stopped, not pending.
		{v1.RestartPolicyAlways, []v1.ContainerState{waiting}, []v1.ContainerState{exited(1)}, v1.PodRunning},
	}
	for i, tt := range tests {
		w := &podWorker{pod: &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tt.policy}}}
		for j, st := range tt.states {
			c := &container{w: w}
			c.status.State = st
			if tt.last != nil {
				c.status.LastTerminationState = tt.last[j]
			}
			w.ctrs = append(w.ctrs, c)
		}
		if got := w.phase(); got != tt.want {
			t.Errorf("case %d: phase %s, want %s", i, got, tt.want)
		}
	}
}
