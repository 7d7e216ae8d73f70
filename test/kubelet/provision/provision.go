// Package provision is the stack's dynamic volume provisioner: for every claim of a
// StorageClass whose provisioner is Name it creates a hostPath PersistentVolume on a directory
// of this machine, deletes released volumes with reclaim policy Delete, and grows volumes when
// their claim asks for more.
//
// All nodes of the stack share this machine, so volumes carry no node affinity: a Pod may be
// scheduled anywhere and still find its data.
package provision

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const (
	// Name is the provisioner of the stack's StorageClasses.
	Name = "etcdplan.io/local"
	// annProvisionedBy marks the volumes this provisioner owns (the name Kubernetes uses).
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// annSelectedNode is set by the scheduler on claims of WaitForFirstConsumer classes.
	annSelectedNode = "volume.kubernetes.io/selected-node"
)

// Provisioner provisions, deletes and resizes volumes.
type Provisioner struct {
	Client kubernetes.Interface
	// Dir holds one directory per volume; it must be absolute.
	Dir string

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	queue   workqueue.TypedRateLimitingInterface[string]
}

// New wires the provisioner to the factory's informers; start the factory afterwards.
func New(client kubernetes.Interface, dir string, f informers.SharedInformerFactory) (*Provisioner, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p := &Provisioner{
		Client:  client,
		Dir:     dir,
		claims:  f.Core().V1().PersistentVolumeClaims().Lister(),
		volumes: f.Core().V1().PersistentVolumes().Lister(),
		classes: f.Storage().V1().StorageClasses().Lister(),
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueue := func(prefix string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				p.queue.Add(prefix + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}
	}
	if _, err := f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(enqueue("claim/")); err != nil {
		return nil, err
	}
	if _, err := f.Core().V1().PersistentVolumes().Informer().AddEventHandler(enqueue("volume/")); err != nil {
		return nil, err
	}
	f.Storage().V1().StorageClasses().Informer()
	return p, nil
}

// Run processes claims and volumes until ctx is done. Call it after the factory has synced.
func (p *Provisioner) Run(ctx context.Context) {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		log.Printf("provisioner: %v", err)
	}
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for {
		key, quit := p.queue.Get()
		if quit {
			return
		}
		err := p.sync(ctx, key)
		if err != nil {
			log.Printf("provisioner: %s: %v", key, err)
			p.queue.AddRateLimited(key)
		} else {
			p.queue.Forget(key)
		}
		p.queue.Done(key)
	}
}

func (p *Provisioner) sync(ctx context.Context, key string) error {
	kind, rest, _ := cutPrefix(key)
	ns, name, err := cache.SplitMetaNamespaceKey(rest)
	if err != nil {
		return nil
	}
	if kind == "claim" {
		claim, err := p.claims.PersistentVolumeClaims(ns).Get(name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return p.SyncClaim(ctx, claim)
	}
	pv, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return p.SyncVolume(ctx, pv)
}

func cutPrefix(key string) (string, string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

// class returns the claim's StorageClass if this provisioner serves it.
func (p *Provisioner) class(claim *v1.PersistentVolumeClaim) *storagev1.StorageClass {
	if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName == "" {
		return nil
	}
	sc, err := p.classes.Get(*claim.Spec.StorageClassName)
	if err != nil || sc.Provisioner != Name {
		return nil
	}
	return sc
}

// SyncClaim provisions a volume for an unbound claim, or resizes the bound one.
func (p *Provisioner) SyncClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	sc := p.class(claim)
	if sc == nil || claim.DeletionTimestamp != nil {
		return nil
	}
	if claim.Spec.VolumeName != "" {
		return p.resize(ctx, claim)
	}
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer &&
		claim.Annotations[annSelectedNode] == "" {
		return nil // the scheduler has not picked a node for the first consumer yet
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return fmt.Errorf("block volumes are not supported")
	}
	name := "pvc-" + string(claim.UID)
	if _, err := p.volumes.Get(name); err == nil {
		return nil // created already; the PV controller binds it
	}
	dir := filepath.Join(p.Dir, name)
	if err := makeDir(dir); err != nil {
		return err
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Name}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes: claim.Spec.AccessModes,
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			MountOptions:                  sc.MountOptions,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{
				Path: dir, Type: ptrTo(v1.HostPathDirectoryOrCreate)}},
		},
	}
	_, err := p.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		log.Printf("provisioner: created %s for %s/%s", name, claim.Namespace, claim.Name)
	}
	return err
}

// makeDir creates a volume directory writable by any user, as Kubernetes' hostPath
// provisioner does: Pods run as arbitrary non-root users.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777)
}

// resize grows the volume to what the claim requests, then reports the new capacity in the
// claim's status. A directory has no size, so there is nothing to grow on disk.
func (p *Provisioner) resize(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	want, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok {
		return nil
	}
	pv, err := p.volumes.Get(claim.Spec.VolumeName)
	if err != nil || pv.Annotations[annProvisionedBy] != Name {
		return nil
	}
	if have := pv.Spec.Capacity[v1.ResourceStorage]; have.Cmp(want) < 0 {
		pv = pv.DeepCopy()
		pv.Spec.Capacity[v1.ResourceStorage] = want
		if _, err := p.Client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
		log.Printf("provisioner: resized %s to %s", pv.Name, want.String())
	}
	if have := claim.Status.Capacity[v1.ResourceStorage]; claim.Status.Phase != v1.ClaimBound || have.Cmp(want) >= 0 {
		return nil
	}
	claim = claim.DeepCopy()
	if claim.Status.Capacity == nil {
		claim.Status.Capacity = v1.ResourceList{}
	}
	claim.Status.Capacity[v1.ResourceStorage] = want
	claim.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: want}
	claim.Status.AllocatedResourceStatuses = nil
	var conds []v1.PersistentVolumeClaimCondition
	for _, c := range claim.Status.Conditions {
		if c.Type != v1.PersistentVolumeClaimResizing && c.Type != v1.PersistentVolumeClaimFileSystemResizePending {
			conds = append(conds, c)
		}
	}
	claim.Status.Conditions = conds
	_, err = p.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	return err
}

// SyncVolume deletes a released volume of ours whose reclaim policy is Delete, data first.
func (p *Provisioner) SyncVolume(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Annotations[annProvisionedBy] != Name || pv.DeletionTimestamp != nil ||
		pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		return nil
	}
	if pv.Status.Phase != v1.VolumeReleased && pv.Status.Phase != v1.VolumeFailed {
		return nil
	}
	if pv.Spec.HostPath != nil && filepath.Dir(pv.Spec.HostPath.Path) == p.Dir {
		if err := os.RemoveAll(pv.Spec.HostPath.Path); err != nil {
			return err
		}
	}
	err := p.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err == nil {
		log.Printf("provisioner: deleted released %s", pv.Name)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ptrTo[T any](v T) *T { return &v }

// resyncPeriod makes sure a claim missed by a failed attempt is looked at again.
const resyncPeriod = 30 * time.Second

// NewInformerFactory returns the informer factory the provisioner expects.
func NewInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactory(client, resyncPeriod)
}
