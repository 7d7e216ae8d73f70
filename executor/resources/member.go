package resources

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
)

// Images are the container images member Pods run.
type Images struct {
	// EtcdRepository is the default etcd image repository; tags are v<version>.
	EtcdRepository string
	// Operator is the operator's own image, whose binary runs the preflight check.
	Operator string
}

// MemberSpec is what a member Pod is rendered from.
type MemberSpec struct {
	Name    string
	Version string
	// InitialCluster lists name=peerURL of the members the new member joins (or itself, for a seed).
	InitialCluster []string
	// Seed: the member bootstraps a new cluster.
	Seed bool
	// ExpectData: the member joined before, so an empty data directory means data loss.
	ExpectData bool
	// Voter: etcd lists the member as a voter, so its Pod carries the voter role from the
	// start (the client Service and the PodDisruptionBudget select on it) and needs no
	// patch once it runs.
	Voter bool
	// Restore, for a seed, is the snapshot its data is restored from.
	Restore *Restore
	// ForceNewCluster, when set, is the member's ID: it starts alone on its data with
	// --force-new-cluster, which drops every other member from the membership. Its Pod
	// runs etcd once, as every member Pod, so the flag never acts again on a membership
	// that grew since.
	ForceNewCluster string
	// RestoreSeed, when set, is the EtcdBackup a recovery starts the cluster anew from on
	// this seed: its Pod carries it (the mark of a member in memory, which has no claim).
	RestoreSeed string
	// Listen is how the member serves clients and peers when not as the spec says (the
	// step's).
	Listen plan.Listen
	// TLS, when set, is the TLS whose Secrets the member serves by, when not the spec's:
	// while a side is switched off (InUse).
	TLS *v1alpha1.TLSSpec
	// Trust identifies the trust bundles the Pod mounts, as they are when it is made
	// (certs.Keeper.Trust): its etcd reads them once, at start.
	Trust string
}

// Restore is a snapshot a seed member's data is restored from.
type Restore struct {
	// From is what spec.bootstrap.restore names, as the plan says it ("EtcdBackup nightly",
	// or the source's URI): the seed Pod carries it, to tell whether it restored from what
	// the spec names now.
	From string
	// Source is the snapshot's store and key.
	Source v1alpha1.SnapshotSource
	// SHA256 is the checksum the stored object must have; "" checks etcd's own hash only.
	SHA256 string
}

const nonRootUID = 65532

// MemberPod renders a member's Pod. Members have no liveness probe: a probe that kills a
// member during an election would make the election longer. A member Pod never restarts in
// place (restartPolicy Never): when etcd ends, the Pod ends, and the operator starts a new
// one rendered from the member's history as it is then, through the preflight check. A
// container restarted in place would run with the flags its Pod was created with, such as a
// seed's initial-cluster-state=new, on whatever its volume holds by then.
func MemberPod(c *v1alpha1.EtcdCluster, img Images, m MemberSpec) *corev1.Pod {
	labels, annotations := memberMeta(c, m)
	secure := secureContainer()
	tlsVols, tlsMounts := tlsVolumes(m.SecretsOf(c), m.Name, Serving(c, m.Listen))
	inits := []corev1.Container{{
		Name:            vocab.ContainerPreflight,
		Image:           img.Operator,
		Command:         preflight(c, m).Argv(),
		SecurityContext: secure,
		VolumeMounts:    append([]corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount}}, tlsMounts...),
		// What the check printed is the Pod's record of why it failed, for the operator to show.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}}
	volumes := append([]corev1.Volume{dataVolume(c, m.Name)}, tlsVols...)
	if m.Seed && m.Restore != nil {
		inits = append(inits, restoreContainers(c, img, m, secure)...)
		volumes = append(volumes, restoreVolumes(*m.Restore)...)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: c.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Hostname:                      m.Name,
			Subdomain:                     vocab.HeadlessService(c.Name),
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			EnableServiceLinks:            ptr.To(false),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext:               securePod(),
			InitContainers:                inits,
			Containers: []corev1.Container{{
				Name:            vocab.ContainerEtcd,
				Image:           Image(c, img.EtcdRepository, m.Version),
				Command:         append([]string{"etcd"}, etcdArgs(c, m)...),
				Env:             gomaxprocs(c),
				Resources:       c.Spec.Resources,
				SecurityContext: secure,
				Ports:           ports(),
				// Ready means the member can serve: it has a leader and answers a read through
				// it. A NOSPACE alarm still lets clients read and delete (which is how they
				// recover from it), so it does not empty the client Service. Probed every
				// second, the shortest period: etcd starts in a few hundred milliseconds.
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health?exclude=NOSPACE", Port: intstrPort(vocab.MetricsPort)}},
					PeriodSeconds:    1,
					TimeoutSeconds:   2,
					FailureThreshold: 3,
				},
				VolumeMounts: append([]corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount}}, tlsMounts...),
			}},
			Volumes:                   volumes,
			Affinity:                  c.Spec.Affinity,
			TopologySpreadConstraints: c.Spec.TopologySpreadConstraints,
			NodeSelector:              c.Spec.NodeSelector,
			Tolerations:               c.Spec.Tolerations,
			PriorityClassName:         c.Spec.PriorityClassName,
			ImagePullSecrets:          c.Spec.ImagePullSecrets,
		},
	}
}

// preflight is the member's preflight check: its data, the trust bundles the Pod was made
// for (m.Trust), which it waits for, and then its own name in the cluster's DNS.
func preflight(c *v1alpha1.EtcdCluster, m MemberSpec) agent.Preflight {
	// A change of TLS source's pass 2 adds the certificates' source to what the Pod records
	// ("<hashes>@Provided/Provided"); the files hash to the part before it.
	bundles, _, _ := strings.Cut(m.Trust, "@")
	p := agent.Preflight{DataDir: vocab.DataDir, ExpectData: m.ExpectData, Trust: bundles,
		Resolve: vocab.MemberHost(c.Name, c.Namespace, m.Name)}
	if m.Trust != "" {
		for _, t := range TrustedBy(m.SecretsOf(c), Serving(c, m.Listen)) {
			p.TrustFiles = append(p.TrustFiles, t.File)
		}
	}
	return p
}

// memberMeta is a member Pod's labels and annotations: the cluster's, the spec's
// podMetadata under them, and what the member's history says about it.
func memberMeta(c *v1alpha1.EtcdCluster, m MemberSpec) (labels, annotations map[string]string) {
	labels = ClusterLabels(c)
	annotations = map[string]string{
		vocab.AnnotationConfigHash:   c.Spec.ConfigHash(),
		vocab.AnnotationConfigFields: c.Spec.ConfigFields(),
		vocab.AnnotationVersion:      m.Version,
	}
	if pm := c.Spec.PodMetadata; pm != nil {
		labels = merge(pm.Labels, labels)
		annotations = merge(pm.Annotations, annotations)
	}
	labels[v1alpha1.LabelMember] = m.Name
	labels[v1alpha1.LabelRole] = string(v1alpha1.RoleLearner)
	if m.Seed || m.Voter {
		labels[v1alpha1.LabelRole] = string(v1alpha1.RoleVoter)
	}
	if m.Seed {
		annotations[vocab.AnnotationSeed] = "true"
	}
	if l := Serving(c, m.Listen); l.Client != plan.ListenPlain {
		annotations[vocab.AnnotationClientScheme] = l.Client
	}
	if m.Seed && m.Restore != nil {
		annotations[vocab.AnnotationRestore] = m.Restore.From
	}
	if m.Trust != "" {
		annotations[vocab.AnnotationTrust] = m.Trust
	}
	if m.ForceNewCluster != "" {
		annotations[vocab.AnnotationForceNewCluster] = m.ForceNewCluster
	}
	if m.RestoreSeed != "" {
		annotations[vocab.AnnotationRestoreSeed] = m.RestoreSeed
	}
	return labels, annotations
}

// SecretsOf is the cluster whose TLS Secrets the member serves by: c, with the member's
// TLS when it has its own.
func (m MemberSpec) SecretsOf(c *v1alpha1.EtcdCluster) *v1alpha1.EtcdCluster {
	if m.TLS == nil {
		return c
	}
	out := *c
	out.Spec.TLS = m.TLS
	return &out
}

// ports are the etcd container's ports.
func ports() []corev1.ContainerPort {
	out := []corev1.ContainerPort{
		{Name: "client", ContainerPort: vocab.ClientPort},
		{Name: "peer", ContainerPort: vocab.PeerPort},
		{Name: "metrics", ContainerPort: vocab.MetricsPort},
	}
	return append(out, corev1.ContainerPort{Name: "peer-second", ContainerPort: vocab.PeerTLSPort})
}

// ownPeerURL is the peer URL the member has in the initial cluster it joins (etcd's
// member list), else the one it registers as it serves.
func ownPeerURL(c *v1alpha1.EtcdCluster, m MemberSpec) string {
	for _, e := range m.InitialCluster {
		if u, ok := strings.CutPrefix(e, m.Name+"="); ok {
			return u
		}
	}
	return NewPeerURL(c, m.Name, m.Listen)
}

// secureContainer: non-root, read-only root filesystem, no capabilities.
func secureContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// securePod runs as a fixed non-root user under the runtime's default seccomp profile.
func securePod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](nonRootUID), RunAsGroup: ptr.To[int64](nonRootUID), FSGroup: ptr.To[int64](nonRootUID),
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func dataVolume(c *v1alpha1.EtcdCluster, member string) corev1.Volume {
	if c.Spec.Storage.Medium == v1alpha1.StorageMediumMemory {
		size := c.Spec.Storage.Size
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	}
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: member}}}
}

// etcdArgs are the member's flags. The initial-cluster flags only matter on the first
// start: etcd ignores them once its data directory holds a member.
func etcdArgs(c *v1alpha1.EtcdCluster, m MemberSpec) []string {
	state := "existing"
	if m.Seed {
		state = "new"
	}
	l := Serving(c, m.Listen)
	clientURLs, peerURLs := listenURLs(l)
	flags := map[string]string{
		"name":                        m.Name,
		"data-dir":                    vocab.DataDir,
		"listen-peer-urls":            peerURLs,
		"listen-client-urls":          clientURLs,
		"listen-metrics-urls":         listenURL(false, vocab.MetricsPort),
		"advertise-client-urls":       vocab.ClientURL(c.Name, c.Namespace, m.Name, l.Client == plan.ListenTLS),
		"initial-advertise-peer-urls": ownPeerURL(c, m),
		"initial-cluster":             strings.Join(m.InitialCluster, ","),
		"initial-cluster-state":       state,
		"initial-cluster-token":       clusterToken(c),
	}
	if m.ForceNewCluster != "" {
		flags["force-new-cluster"] = "true"
	}
	tlsFlags(m.SecretsOf(c), l, flags)
	o := c.Spec.Options
	setInt := func(k string, v *int64) {
		if v != nil {
			flags[k] = fmt.Sprint(*v)
		}
	}
	setInt("quota-backend-bytes", o.QuotaBackendBytes)
	setInt("snapshot-count", o.SnapshotCount)
	if o.HeartbeatInterval != nil {
		flags["heartbeat-interval"] = fmt.Sprint(*o.HeartbeatInterval)
	}
	if o.ElectionTimeout != nil {
		flags["election-timeout"] = fmt.Sprint(*o.ElectionTimeout)
	}
	if o.AutoCompactionMode != "" {
		flags["auto-compaction-mode"] = string(o.AutoCompactionMode)
	}
	if o.AutoCompactionRetention != "" {
		flags["auto-compaction-retention"] = o.AutoCompactionRetention
	}
	for k, v := range o.ExtraArgs {
		if _, managed := flags[k]; !managed {
			flags[k] = v
		}
	}
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]string, 0, len(keys))
	for _, k := range keys {
		args = append(args, "--"+k+"="+flags[k])
	}
	return args
}

func clusterToken(c *v1alpha1.EtcdCluster) string {
	return c.Namespace + "-" + c.Name + "-" + string(c.UID)
}

// restoreContainers restore a seed's data from a snapshot, in three steps, each of which
// may run again: the operator's binary fetches the snapshot (checking its checksum and
// etcd's hash) into a staging directory on the data volume; etcdutl of the cluster's own
// version restores it there as this member alone; the operator's binary moves the result
// into the data directory, unless a data directory is already there (a seed Pod that
// ended after its restore starts on what it has).
func restoreContainers(c *v1alpha1.EtcdCluster, img Images, m MemberSpec, secure *corev1.SecurityContext) []corev1.Container {
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount}}
	return []corev1.Container{
		fetchContainer(img, *m.Restore, secure),
		etcdutlRestore(Image(c, img.EtcdRepository, m.Version), vocab.RestoreDir+"/data", m.Name, m.InitialCluster, clusterToken(c), secure), {
			Name:                     "restore-place",
			Image:                    img.Operator,
			Command:                  agent.RestorePlace{From: vocab.RestoreDir + "/data", DataDir: vocab.DataDir}.Argv(),
			SecurityContext:          secure,
			VolumeMounts:             mounts,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}}
}

// fetchContainer fetches a snapshot into RestoreDir, checking it on the way.
func fetchContainer(img Images, rs Restore, secure *corev1.SecurityContext) corev1.Container {
	var env []corev1.EnvVar
	if secret := rs.Source.CredentialsSecret(); secret != "" {
		for _, k := range rs.Source.CredentialKeys() {
			env = append(env, corev1.EnvVar{Name: agent.CredentialEnv(k), ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: k}}})
		}
	}
	_, mounts := backupVolume(rs.Source.BackupDestination, true)
	return corev1.Container{
		Name:                     vocab.ContainerRestoreFetch,
		Image:                    img.Operator,
		Command:                  agent.RestoreFetch{Source: rs.Source, SHA256: rs.SHA256, Out: vocab.RestoreDir + "/snapshot.db"}.Argv(),
		Env:                      env,
		SecurityContext:          secure,
		VolumeMounts:             append([]corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount}}, mounts...),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// restoreVolumes are the volumes fetching a snapshot needs beside the data volume: the
// claim of a pvc source, read-only.
func restoreVolumes(rs Restore) []corev1.Volume {
	vols, _ := backupVolume(rs.Source.BackupDestination, true)
	return vols
}

// etcdutlRestore restores the fetched snapshot into dataDir as member name of a new
// cluster of the members initial names (name=peerURL each): every member restored from the
// same snapshot with the same list and token starts as one cluster.
func etcdutlRestore(image, dataDir, name string, initial []string, token string, secure *corev1.SecurityContext) corev1.Container {
	var peerURL string
	for _, m := range initial {
		if n, u, _ := strings.Cut(m, "="); n == name {
			peerURL = u
		}
	}
	return corev1.Container{
		Name:  vocab.ContainerRestore,
		Image: image,
		Command: []string{"etcdutl", "snapshot", "restore", vocab.RestoreDir + "/snapshot.db", "--data-dir=" + dataDir,
			"--name=" + name, "--initial-cluster=" + strings.Join(initial, ","),
			"--initial-advertise-peer-urls=" + peerURL, "--initial-cluster-token=" + token},
		SecurityContext:          secure,
		VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// gomaxprocs makes the Go runtime follow the CPU limit, when one is set.
func gomaxprocs(c *v1alpha1.EtcdCluster) []corev1.EnvVar {
	if _, ok := c.Spec.Resources.Limits[corev1.ResourceCPU]; !ok {
		return nil
	}
	return []corev1.EnvVar{{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
		ContainerName: vocab.ContainerEtcd, Resource: "limits.cpu", Divisor: resource.MustParse("1")}}}}
}

// MemberPVC renders a member's volume claim.
func MemberPVC(c *v1alpha1.EtcdCluster, member string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: member, Namespace: c.Namespace, Labels: merge(ClusterLabels(c), map[string]string{v1alpha1.LabelMember: member})},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: c.Spec.Storage.Size}},
		},
	}
	if sc := c.Spec.Storage.StorageClassName; sc != "" {
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}

func merge(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
