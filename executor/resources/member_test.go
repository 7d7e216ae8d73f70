package resources

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

func demo() *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "u1"}}
	c.Spec.Replicas, c.Spec.Version = 3, "3.6.16"
	c.Spec.Storage.Size = resource.MustParse("1Gi")
	return c
}

func TestMemberPodIsSafeAndRestricted(t *testing.T) {
	c := demo()
	c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}
	c.Spec.Options.ExtraArgs = map[string]string{"log-level": "warn"}
	p := MemberPod(c, Images{EtcdRepository: "quay.io/coreos/etcd", Operator: "op:1"},
		MemberSpec{Name: "demo-3", Version: "3.6.16", InitialCluster: []string{"demo-0=http://a:2380", "demo-3=http://b:2380"}})
	etcd := p.Spec.Containers[0]
	require.Equal(t, "quay.io/coreos/etcd:v3.6.16", etcd.Image)
	require.Nil(t, etcd.LivenessProbe, "no liveness probe may kill a member during an election")
	require.Equal(t, "/health?exclude=NOSPACE", etcd.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, int32(vocab.MetricsPort), etcd.ReadinessProbe.HTTPGet.Port.IntVal)
	args := strings.Join(etcd.Command, " ")
	for _, want := range []string{"--initial-cluster-state=existing", "--initial-cluster=demo-0=http://a:2380,demo-3=http://b:2380",
		"--initial-advertise-peer-urls=http://b:2380", "--listen-metrics-urls=http://0.0.0.0:2381", "--log-level=warn"} {
		require.Contains(t, args, want)
	}
	require.Equal(t, "GOMAXPROCS", etcd.Env[0].Name, "GOMAXPROCS follows the CPU limit")
	require.True(t, *etcd.SecurityContext.ReadOnlyRootFilesystem)
	require.Equal(t, []corev1.Capability{"ALL"}, etcd.SecurityContext.Capabilities.Drop)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.Spec.SecurityContext.SeccompProfile.Type)
	require.True(t, *p.Spec.SecurityContext.RunAsNonRoot)
	require.Equal(t, "demo", p.Spec.Subdomain)
	require.Equal(t, "demo-3", p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	require.Equal(t, "learner", p.Labels[v1alpha1.LabelRole])
	require.Equal(t, c.Spec.ConfigHash(), p.Annotations[vocab.AnnotationConfigHash])
	require.Equal(t, c.Spec.ConfigFields(), p.Annotations[vocab.AnnotationConfigFields])
	require.Equal(t, []string{"/manager", "preflight", "--data-dir=" + vocab.DataDir, "--expect-data=false",
		"--resolve=demo-3.demo.ns.svc"}, p.Spec.InitContainers[0].Command, "etcd starts once its own name resolves")
}

func TestSeedBootstrapsAlone(t *testing.T) {
	p := MemberPod(demo(), Images{}, MemberSpec{Name: "demo-0", Version: "3.6.16", Seed: true, InitialCluster: []string{"demo-0=http://x:2380"}})
	require.Contains(t, p.Spec.Containers[0].Command, "--initial-cluster-state=new")
	require.Equal(t, "voter", p.Labels[v1alpha1.LabelRole])
	require.Equal(t, "true", p.Annotations[vocab.AnnotationSeed])
	require.Empty(t, p.Spec.Containers[0].Env, "no CPU limit, no GOMAXPROCS")
}

func TestPDBKeepsQuorum(t *testing.T) {
	for voters, min := range map[int]int32{1: 1, 3: 2, 4: 3, 5: 3} {
		require.Equal(t, min, PDB(demo(), voters).Spec.MinAvailable.IntVal, "%d voters", voters)
	}
	require.True(t, Headless(demo()).Spec.PublishNotReadyAddresses, "peers find each other before they are ready")
}

// A drill runs where the cluster's members may (node affinity, selector, tolerations), but
// is not placed among them: with one member per node required, it still finds a node.
func TestDrillRunsWhereMembersMayButNotAmongThem(t *testing.T) {
	c := demo()
	zone := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}
	c.Spec.Affinity = &corev1.Affinity{NodeAffinity: zone, PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname",
			LabelSelector: &metav1.LabelSelector{MatchLabels: ClusterLabels(c)}}}}}
	c.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "b1"}}
	p := DrillPod(b, c, Images{EtcdRepository: "etcd", Operator: "op:1"}, Restore{}, "3.6.16")
	require.Equal(t, &corev1.Affinity{NodeAffinity: zone}, p.Spec.Affinity)
	require.Equal(t, c.Spec.Tolerations, p.Spec.Tolerations)

	c.Spec.Affinity.NodeAffinity = nil
	require.Nil(t, DrillPod(b, c, Images{}, Restore{}, "3.6.16").Spec.Affinity)
}

// With TLS on both sides, a member listens and advertises https, requires client
// certificates on each side, and mounts its Secrets whole (never through subPath, so a
// renewed certificate reaches it); its metrics and probes stay plain on their own port.
func TestMemberPodServesTLS(t *testing.T) {
	c := demo()
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	p := MemberPod(c, Images{EtcdRepository: "quay.io/coreos/etcd", Operator: "op:1"}, MemberSpec{Name: "demo-3", Version: "3.6.16"})
	etcd := p.Spec.Containers[0]
	args := strings.Join(etcd.Command, " ")
	for _, want := range []string{"--listen-client-urls=https://0.0.0.0:2379", "--listen-peer-urls=https://0.0.0.0:2380,https://0.0.0.0:2382",
		"--advertise-client-urls=https://demo-3.demo.ns.svc:2379", "--initial-advertise-peer-urls=https://demo-3.demo.ns.svc:2380",
		"--listen-metrics-urls=http://0.0.0.0:2381", "--client-cert-auth=true", "--peer-client-cert-auth=true",
		"--cert-file=/etc/etcd/tls/server/tls.crt", "--trusted-ca-file=/etc/etcd/tls/trust/ca.crt",
		"--peer-trusted-ca-file=/etc/etcd/tls/trust/ca.crt",
		"--peer-cert-file=/etc/etcd/tls/peer/tls.crt", "--peer-key-file=/etc/etcd/tls/peer/tls.key"} {
		require.Contains(t, args, want)
	}
	require.Equal(t, "https", p.Annotations[vocab.AnnotationClientScheme])
	secrets := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	require.Equal(t, map[string]string{"server-tls": "demo-server-tls", "peer-tls": "demo-3-peer-tls", "trust": "demo-trust"}, secrets,
		"the cluster's own CA is trusted from its trust Secret")
	for _, m := range etcd.VolumeMounts {
		require.Empty(t, m.SubPath)
	}

	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "srv", PeerSecretName: "peers", ClientSecretName: "op"}
	p = MemberPod(c, Images{}, MemberSpec{Name: "demo-3", Version: "3.6.16"})
	require.Equal(t, "peers", p.Spec.Volumes[2].Secret.SecretName, "one peer Secret names every member")
	require.Len(t, p.Spec.Volumes, 3, "no trust Secret: each Secret's ca.crt is trusted")
	require.Contains(t, strings.Join(p.Spec.Containers[0].Command, " "), "--trusted-ca-file=/etc/etcd/tls/server/ca.crt")

	c.Spec.TLS = nil
	p = MemberPod(c, Images{}, MemberSpec{Name: "demo-3", Version: "3.6.16"})
	require.NotContains(t, strings.Join(p.Spec.Containers[0].Command, " "), "https")
	require.NotContains(t, p.Annotations, vocab.AnnotationClientScheme)
	require.Len(t, p.Spec.Volumes, 1)
}

// While TLS is switched on, a member serves TLS beside plain text: clients both ways on one
// port, peers plain on the first port and TLS on the second; it advertises plain text, and
// its Pod's flags say how it serves.
func TestMemberPodServesTLSBesidePlainText(t *testing.T) {
	c := demo()
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	both := plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}
	p := MemberPod(c, Images{}, MemberSpec{Name: "demo-3", Version: "3.6.16", Listen: both})
	args := strings.Join(p.Spec.Containers[0].Command, " ")
	for _, want := range []string{"--listen-client-urls=http://0.0.0.0:2379,https://0.0.0.0:2379",
		"--listen-peer-urls=http://0.0.0.0:2380,https://0.0.0.0:2382", "--advertise-client-urls=http://demo-3.demo.ns.svc:2379",
		"--initial-advertise-peer-urls=http://demo-3.demo.ns.svc:2380", "--client-cert-auth=true", "--peer-cert-file=/etc/etcd/tls/peer/tls.crt"} {
		require.Contains(t, args, want)
	}
	require.Equal(t, both, Served(p))
	require.Equal(t, plan.ListenBoth, p.Annotations[vocab.AnnotationClientScheme])
	require.Len(t, p.Spec.Volumes, 4, "data, server, peer and trust")

	p = MemberPod(c, Images{}, MemberSpec{Name: "demo-3", Version: "3.6.16", Listen: plan.Listen{Peer: plan.ListenBoth}})
	require.Equal(t, plan.Listen{Client: plan.ListenTLS, Peer: plan.ListenBoth}, Served(p))
	p = MemberPod(c, Images{}, MemberSpec{Name: "demo-3", Version: "3.6.16"})
	require.Equal(t, Serving(c, plan.Listen{}), Served(p))
	c.Spec.TLS = nil
	require.Equal(t, plan.Listen{Client: plan.ListenPlain, Peer: plan.ListenPlain}, Served(MemberPod(c, Images{}, MemberSpec{Name: "demo-3"})))
	require.Equal(t, "http://demo-3.demo.ns.svc:2380", NewPeerURL(c, "demo-3", plan.Listen{}))
}

// While a side is switched off and a member still serves TLS on it, the members serve by
// the TLS last in use for that side, and by the spec for the other.
func TestTLSInUseWhileASideIsSwitchedOff(t *testing.T) {
	c := demo()
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Client: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSProvided},
		ServerSecretName: "srv-2", ClientSecretName: "op-2"}
	c.Status.TLS = &v1alpha1.TLSStatus{InUse: &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "srv", ClientSecretName: "op", PeerSecretName: "peers"}}
	pod := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: vocab.ContainerEtcd,
		Command: []string{"etcd", "--listen-peer-urls=https://0.0.0.0:2380"}}}}}
	got := InUse(c, []corev1.Pod{pod})
	require.Equal(t, v1alpha1.TLSProvided, got.Spec.TLS.PeerMode())
	require.Equal(t, "peers", got.Spec.TLS.PeerSecretName)
	require.Equal(t, "srv-2", got.Spec.TLS.ServerSecretName, "the side kept is the spec's")
	require.Equal(t, v1alpha1.TLSDisabled, c.Spec.TLS.PeerMode(), "the cluster itself is left as it is")

	c.Spec.TLS = nil // TLS switched off altogether
	got = InUse(c, []corev1.Pod{pod})
	require.Equal(t, v1alpha1.TLSProvided, got.Spec.TLS.PeerMode())
	require.Equal(t, v1alpha1.TLSDisabled, got.Spec.TLS.Mode, "a mode status can record")

	pod.Spec.Containers[0].Command = []string{"etcd", "--listen-peer-urls=http://0.0.0.0:2380,http://0.0.0.0:2382"}
	require.Same(t, c, InUse(c, []corev1.Pod{pod}), "once no member serves TLS on the side, the spec alone")
}
