package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// TestAdmission checks, against a real kube-apiserver with the generated CRDs, that every
// invalid spec is refused with a message a user understands, and that defaults apply.
func TestAdmission(t *testing.T) {
	srv := startAPIServer(t)
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	c, err := client.New(srv.config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ctx := context.Background()
	installCRDs(t, c, srv.config)

	valid := func(name string) *v1alpha1.EtcdCluster {
		e := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		e.Spec.Version = "3.6.16"
		e.Spec.Storage.Size = resource.MustParse("1Gi")
		return e
	}

	t.Run("defaults", func(t *testing.T) {
		// As from a manifest in Git: fields left out get the CRD's defaults.
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "etcdplan.io/v1alpha1", "kind": "EtcdCluster",
			"metadata": map[string]any{"name": "defaults", "namespace": "default"}, "spec": map[string]any{"version": "3.6.16"}}}
		require.NoError(t, c.Create(ctx, u))
		e := &v1alpha1.EtcdCluster{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(u), e))
		require.EqualValues(t, 3, e.Spec.Replicas)
		require.Equal(t, "1Gi", e.Spec.Storage.Size.String())
		require.Equal(t, v1alpha1.RetainPolicyRetain, e.Spec.Storage.RetainPolicy)
		require.Equal(t, v1alpha1.ApprovalAutomatic, e.Spec.UpdateStrategy.Approval)
		require.EqualValues(t, 600, e.Spec.UpdateStrategy.ProgressDeadlineSeconds)
		u.SetName("recovers")
		u.SetResourceVersion("")
		u.Object["spec"].(map[string]any)["recovery"] = map[string]any{}
		require.NoError(t, c.Create(ctx, u), "an empty recovery takes its defaults")
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(u), e))
		require.Equal(t, v1alpha1.QuorumLossManual, e.Spec.Recovery.QuorumLoss)
		e.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
		require.NoError(t, c.Update(ctx, e))
	})

	refusedOnCreate := []struct {
		name, says string
		mutate     func(e *v1alpha1.EtcdCluster)
	}{
		{"version with a v", "version must be an etcd 3.x.y release", func(e *v1alpha1.EtcdCluster) { e.Spec.Version = "v3.6.16" }},
		{"version 2.x", "version must be an etcd 3.x.y release", func(e *v1alpha1.EtcdCluster) { e.Spec.Version = "2.3.8" }},
		{"replicas 0 in memory", "storage.medium Memory cannot keep", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Replicas, e.Spec.Storage.Medium = 0, v1alpha1.StorageMediumMemory
		}},
		{"zero storage", "storage.size must be larger than zero", func(e *v1alpha1.EtcdCluster) { e.Spec.Storage.Size = resource.Quantity{} }},
		{"negative replicas", "spec.replicas", func(e *v1alpha1.EtcdCluster) { e.Spec.Replicas = -1 }},
		{"managed flag", "options.extraArgs cannot set flags the operator manages", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Options.ExtraArgs = map[string]string{"initial-cluster-state": "new"}
		}},
		{"election timeout too short", "electionTimeout must be at least 5 times", func(e *v1alpha1.EtcdCluster) {
			hb, el := int32(100), int32(200)
			e.Spec.Options.HeartbeatInterval, e.Spec.Options.ElectionTimeout = &hb, &el
		}},
		{"auth without client TLS", "auth.enabled needs client TLS", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto}}
		}},
		{"auth with a root password Secret that is no Secret name", "auth.rootPasswordSecret must be a Secret name", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootPasswordSecret: "Not_A_Name"}
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		}},
		{"users without the cluster's own CA", "auth.users needs client TLS from the cluster's own CA", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, Users: []v1alpha1.AuthUser{{Name: "app"}}}
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "s", ClientSecretName: "c", PeerSecretName: "p"}
		}},
		{"a user named root", "auth.users cannot name root", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, Users: []v1alpha1.AuthUser{{Name: "root"}}}
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		}},
		{"provided TLS without secrets", "tls.mode Provided for clients needs serverSecretName and clientSecretName", func(e *v1alpha1.EtcdCluster) {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided}
		}},
		{"provided peer TLS without its secret", "tls.mode Provided for peers needs peerSecretName", func(e *v1alpha1.EtcdCluster) {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSProvided},
				ServerSecretName: "s", ClientSecretName: "c"}
		}},
		{"cert-manager TLS without an issuer", "tls.mode CertManager needs issuerRef", func(e *v1alpha1.EtcdCluster) {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Client: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSCertManager}}
		}},
		{"two own CAs", "tls: client and peer cannot mix Auto and CertManager", func(e *v1alpha1.EtcdCluster) {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSCertManager},
				IssuerRef: &v1alpha1.IssuerReference{Name: "ca"}}
		}},
		{"certificates valid for a minute", "tls.certificateValidity must be at least 3m", func(e *v1alpha1.EtcdCluster) {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, CertificateValidity: &metav1.Duration{Duration: time.Minute}}
		}},
		{"an issuer of another kind", "spec.tls.issuerRef.kind", func(e *v1alpha1.EtcdCluster) {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "ca", Kind: "Vault"}}
		}},
		{"version older than 3.5", "version must be 3.5.0 or newer", func(e *v1alpha1.EtcdCluster) { e.Spec.Version = "3.4.30" }},
		{"defrag without schedule or threshold", "maintenance.defrag needs a schedule, a thresholdPercent or both", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{}}
		}},
		{"defrag schedule of three fields", "schedule must be a cron expression", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{Schedule: "0 3 *"}}
		}},
		{"name too long", "metadata.name must be a DNS label of at most 50", func(e *v1alpha1.EtcdCluster) {
			e.Name = "a" + strings.Repeat("b", 50)
		}},
		{"name starts with a digit", "metadata.name must be a DNS label", func(e *v1alpha1.EtcdCluster) { e.Name = "1demo" }},
		{"name of another cluster's client Service", "cannot end in -client", func(e *v1alpha1.EtcdCluster) { e.Name = "demo-client" }},
		{"force-new-cluster", "cannot set force-new-cluster, unsafe-no-fsync or discovery", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Options.ExtraArgs = map[string]string{"force-new-cluster": "true"}
		}},
		{"unsafe-no-fsync", "cannot set force-new-cluster, unsafe-no-fsync or discovery", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Options.ExtraArgs = map[string]string{"unsafe-no-fsync": "true"}
		}},
		{"corruption check off", "cannot turn off etcd's initial corruption check", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Options.ExtraArgs = map[string]string{"experimental-initial-corrupt-check": "false"}
		}},
		{"heartbeat alone too long for the default election timeout", "electionTimeout must be at least 5 times", func(e *v1alpha1.EtcdCluster) {
			hb := int32(300)
			e.Spec.Options.HeartbeatInterval = &hb
		}},
		{"election timeout alone too short for the default heartbeat", "electionTimeout must be at least 5 times", func(e *v1alpha1.EtcdCluster) {
			el := int32(400)
			e.Spec.Options.ElectionTimeout = &el
		}},
		{"automatic recovery without accepting data loss", "set autoApproveDataLoss: true to accept that", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic}
		}},
		{"a restore and an adoption", "bootstrap takes one of restore and join", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "b"}, Join: &v1alpha1.JoinSpec{Endpoints: []string{"http://10.88.0.5:2379"}}}
		}},
		{"an adoption with no endpoint", "spec.bootstrap.join.endpoints", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{}}
		}},
		{"an adoption of an endpoint that is no URL", "spec.bootstrap.join.endpoints[0]", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{"10.88.0.5:2379"}}}
		}},
		{"restore from two sources", "exactly one of backupName or source", func(e *v1alpha1.EtcdCluster) {
			e.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "b",
				Source: &v1alpha1.SnapshotSource{Key: "k", BackupDestination: v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: "p"}}}}}
		}},
	}
	t.Run("heartbeat alone within the default election timeout", func(t *testing.T) {
		e := valid("heartbeat-alone")
		hb := int32(150)
		e.Spec.Options.HeartbeatInterval = &hb
		require.NoError(t, c.Create(ctx, e))
	})
	for i, tt := range refusedOnCreate {
		t.Run(tt.name, func(t *testing.T) {
			e := valid("refused-" + string(rune('a'+i)))
			tt.mutate(e)
			err := c.Create(ctx, e)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.says)
		})
	}

	refusedOnUpdate := []struct {
		name, says string
		mutate     func(e *v1alpha1.EtcdCluster)
	}{
		{"storage shrinks", "storage.size cannot shrink", func(e *v1alpha1.EtcdCluster) { e.Spec.Storage.Size = resource.MustParse("512Mi") }},
		{"medium changes", "storage.medium is immutable", func(e *v1alpha1.EtcdCluster) { e.Spec.Storage.Medium = v1alpha1.StorageMediumMemory }},
	}
	for i, tt := range refusedOnUpdate {
		t.Run(tt.name, func(t *testing.T) {
			e := valid("update-" + string(rune('a'+i)))
			require.NoError(t, c.Create(ctx, e))
			tt.mutate(e)
			err := c.Update(ctx, e)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.says)
		})
	}

	t.Run("the client source stays while auth is on", func(t *testing.T) {
		e := valid("auth-source")
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		e.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
		require.NoError(t, c.Create(ctx, e))
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "s", PeerSecretName: "p", ClientSecretName: "c"}
		err := c.Update(ctx, e)
		require.Error(t, err)
		require.Contains(t, err.Error(), "cannot change to or from Provided while auth.enabled")
		e.Spec.Auth.Enabled = false
		require.NoError(t, c.Update(ctx, e), "with auth switched off in the same change: it goes off first")
	})

	t.Run("an adoption is asked at creation only, and may be taken back", func(t *testing.T) {
		e := valid("adopts")
		require.NoError(t, c.Create(ctx, e))
		e.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{"http://10.88.0.5:2379"}}}
		err := c.Update(ctx, e)
		require.Error(t, err)
		require.Contains(t, err.Error(), "bootstrap.join is set only when the cluster is created")
		e = valid("adopts-at-creation")
		e.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{"https://10.88.0.5:2379"}, TLSSecretName: "src"}}
		require.NoError(t, c.Create(ctx, e))
		e.Spec.Bootstrap.Join.Endpoints = append(e.Spec.Bootstrap.Join.Endpoints, "https://10.88.0.6:2379")
		require.NoError(t, c.Update(ctx, e), "its endpoints may change")
		e.Spec.Bootstrap = nil
		require.NoError(t, c.Update(ctx, e), "taken back: a rollback")
	})

	t.Run("storage grows and moves", func(t *testing.T) {
		e := valid("grows")
		require.NoError(t, c.Create(ctx, e))
		e.Spec.Storage.Size = resource.MustParse("2Gi")
		require.NoError(t, c.Update(ctx, e))
		e.Spec.Storage.StorageClassName = "fast"
		require.NoError(t, c.Update(ctx, e))
	})

	t.Run("tls takes its defaults and may be spelt per side", func(t *testing.T) {
		e := valid("tls-sides")
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		require.NoError(t, c.Create(ctx, e))
		require.Equal(t, 2160*time.Hour, e.Spec.TLS.CertificateValidity.Duration)
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Client: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto},
			Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto}}
		require.NoError(t, c.Update(ctx, e), "the same modes per side")
		for _, side := range []string{"client", "peer"} {
			e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, ServerSecretName: "s", PeerSecretName: "p", ClientSecretName: "c"}
			other := &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSCertManager}
			e.Spec.TLS.Client, e.Spec.TLS.Peer = map[string]*v1alpha1.TLSSideSpec{"client": other}[side], map[string]*v1alpha1.TLSSideSpec{"peer": other}[side]
			err := c.Update(ctx, e)
			require.Error(t, err, "%s TLS from another source", side)
			require.Contains(t, err.Error(), "tls."+side+".mode (or tls.mode) may go from Disabled to TLS, from TLS to Disabled, from Auto or CertManager to Provided, or from Provided to Auto")
		}
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "s", PeerSecretName: "p", ClientSecretName: "c"}
		require.NoError(t, c.Update(ctx, e), "Auto to Provided is a plan")
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "ca"}}
		err := c.Update(ctx, e)
		require.Error(t, err, "Provided to CertManager is not planned yet")
		require.Contains(t, err.Error(), "no other change of source is planned yet")
		e.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "s", PeerSecretName: "p", ClientSecretName: "c",
			Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSDisabled}}
		require.NoError(t, c.Update(ctx, e), "peer TLS switched off")
		e.Spec.TLS = nil
		require.NoError(t, c.Update(ctx, e), "TLS switched off")

		plain := valid("tls-switched-on")
		require.NoError(t, c.Create(ctx, plain))
		plain.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto}}
		require.NoError(t, c.Update(ctx, plain), "peer TLS switched on")
		plain.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		require.NoError(t, c.Update(ctx, plain), "client TLS switched on")

		m := valid("tls-cert-manager")
		m.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: "ca"}}
		require.NoError(t, c.Create(ctx, m))
		require.Equal(t, "Issuer", m.Spec.TLS.IssuerRef.Kind)
	})

	t.Run("backup needs exactly one destination", func(t *testing.T) {
		b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
			Spec: v1alpha1.EtcdBackupSpec{ClusterRef: v1alpha1.ClusterReference{Name: "demo"}}}
		err := c.Create(ctx, b)
		require.Error(t, err)
		require.Contains(t, err.Error(), "set exactly one backup destination")
		b.Spec.Destination = v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: "bkt"}, PVC: &v1alpha1.PVCDestination{ClaimName: "p"}}
		require.ErrorContains(t, c.Create(ctx, b), "set exactly one backup destination")
		b.Spec.Destination = v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: "bkt"}}
		require.NoError(t, c.Create(ctx, b))
	})

	t.Run("backup schedule needs a cron expression", func(t *testing.T) {
		s := &v1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
			Spec: v1alpha1.EtcdBackupScheduleSpec{ClusterRef: v1alpha1.ClusterReference{Name: "demo"}, Schedule: "0 3 * *",
				Destination: v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: "bkt"}}}}
		require.ErrorContains(t, c.Create(ctx, s), "schedule must be a cron expression")
		s.Spec.Schedule = "@daily"
		require.NoError(t, c.Create(ctx, s))
	})
}

// installCRDs creates the CRDs and waits until they are served: Established first, then
// listed by discovery, which lags behind it. A client that maps kinds before discovery lists
// them would find no EtcdCluster kind.
func installCRDs(t *testing.T, c client.Client, cfg *rest.Config) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "kustomize", "crd", "bases", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 3)
	var plurals []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.UnmarshalStrict(b, crd))
		require.NoError(t, c.Create(context.Background(), crd))
		plurals = append(plurals, crd.Spec.Names.Plural)
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
			func(ctx context.Context) (bool, error) {
				got := &apiextensionsv1.CustomResourceDefinition{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
					return false, nil
				}
				for _, cond := range got.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						return true, nil
					}
				}
				return false, nil
			}))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			list, err := dc.ServerResourcesForGroupVersion(v1alpha1.GroupVersion.String())
			if err != nil {
				return false, nil
			}
			served := map[string]bool{}
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
			for _, p := range plurals {
				if !served[p] {
					return false, nil
				}
			}
			return true, nil
		}))
}
