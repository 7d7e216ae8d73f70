package provision

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func claim(name, class, size string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func setup(t *testing.T, objs ...any) (*Provisioner, *fake.Clientset, context.Context) {
	t.Helper()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	retain := v1.PersistentVolumeReclaimRetain
	client := fake.NewClientset(
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: Name},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "wffc"}, Provisioner: Name,
			VolumeBindingMode: &wffc, ReclaimPolicy: &retain},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Provisioner: "example.com/x"},
	)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.PersistentVolumeClaim:
			_, err = client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *v1.PersistentVolume:
			_, err = client.CoreV1().PersistentVolumes().Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f := NewInformerFactory(client)
	p, err := New(client, t.TempDir(), f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return p, client, ctx
}

func TestProvision(t *testing.T) {
	wffcClaim := claim("b", "wffc", "2Gi")
	p, client, ctx := setup(t, claim("a", "local", "1Gi"), wffcClaim, claim("c", "other", "1Gi"))
	for _, name := range []string{"a", "b", "c"} {
		c, _ := p.claims.PersistentVolumeClaims("default").Get(name)
		if err := p.SyncClaim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	pvs, _ := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if len(pvs.Items) != 1 {
		t.Fatalf("want only the Immediate claim provisioned, got %d volumes", len(pvs.Items))
	}
	pv := pvs.Items[0]
	if pv.Name != "pvc-uid-a" || pv.Spec.ClaimRef.Name != "a" || pv.Spec.ClaimRef.UID != "uid-a" ||
		pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete ||
		pv.Spec.NodeAffinity != nil || pv.Spec.StorageClassName != "local" {
		t.Fatalf("unexpected volume %+v", pv.Spec)
	}
	if q := pv.Spec.Capacity[v1.ResourceStorage]; q.String() != "1Gi" {
		t.Fatalf("capacity %s", q.String())
	}
	st, err := os.Stat(pv.Spec.HostPath.Path)
	if err != nil || st.Mode().Perm() != 0o777 || filepath.Dir(pv.Spec.HostPath.Path) != p.Dir {
		t.Fatalf("volume dir: %v %v", st, err)
	}

	// The scheduler selects a node: the WaitForFirstConsumer claim is provisioned, Retain.
	wffcClaim.Annotations = map[string]string{annSelectedNode: "node-1"}
	if err := p.SyncClaim(ctx, wffcClaim); err != nil {
		t.Fatal(err)
	}
	pvb, err := client.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-b", metav1.GetOptions{})
	if err != nil || pvb.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimRetain {
		t.Fatalf("wffc volume: %v %v", pvb, err)
	}

	// Released volumes: Delete removes data and object, Retain keeps both.
	for _, v := range []*v1.PersistentVolume{&pv, pvb} {
		v.Status.Phase = v1.VolumeReleased
		if err := p.SyncVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(pv.Spec.HostPath.Path); !os.IsNotExist(err) {
		t.Fatalf("released Delete volume still has its dir: %v", err)
	}
	if _, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("released Delete volume not deleted")
	}
	if _, err := os.Stat(pvb.Spec.HostPath.Path); err != nil {
		t.Fatalf("Retain volume lost its data: %v", err)
	}
}

func TestResize(t *testing.T) {
	c := claim("a", "local", "2Gi")
	c.Spec.VolumeName = "pvc-uid-a"
	c.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound,
		Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-a", Annotations: map[string]string{annProvisionedBy: Name}},
		Spec:       v1.PersistentVolumeSpec{Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
	}
	p, client, ctx := setup(t, c, pv)
	if err := p.SyncClaim(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if q := got.Spec.Capacity[v1.ResourceStorage]; q.String() != "2Gi" {
		t.Fatalf("volume capacity %s", q.String())
	}
	gotc, _ := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "a", metav1.GetOptions{})
	if q := gotc.Status.Capacity[v1.ResourceStorage]; q.String() != "2Gi" {
		t.Fatalf("claim capacity %s", q.String())
	}
}

// TestRun drives the provisioner through its queue.
func TestRun(t *testing.T) {
	p, client, ctx := setup(t)
	go p.Run(ctx)
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim("q", "local", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := client.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-q", metav1.GetOptions{}); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no volume provisioned")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
