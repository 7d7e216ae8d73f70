package node

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/etcdplan/etcdplan/test/kubelet/imagemap"
	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// Kubelet runs one node.
type Kubelet struct {
	cfg      Config
	client   kubernetes.Interface
	images   *imagemap.Map
	ipam     *netsetup.IPAM
	recorder record.EventRecorder
	pods     corelisters.PodLister
	nodeUID  types.UID
	link     *APILink
	beat     chan struct{} // asks for a heartbeat now

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	halted  bool // stop-node: no more status updates, no new Pods
}

// Run runs the node until ctx is done, then kills its containers (they would die with the
// process anyway) and returns. The Pods' state stays, so a new run picks them up again.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	k, err := newKubelet(cfg, client)
	if err != nil {
		return err
	}
	if err := netsetup.EnsureBridge(cfg.Bridge, cfg.Gateway); err != nil {
		log.Printf("bridge: %v (Pods wait for it)", err)
	}
	k.stopLeftovers()

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	defer k.link.close() // before the broadcaster's shutdown, which waits for its requests
	k.recorder = broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.NodeName})

	for {
		err := k.registerNode(ctx)
		if err == nil {
			break
		}
		log.Printf("register node: %v", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	go k.heartbeat(ctx)

	factory := informers.NewSharedInformerFactoryWithOptions(client, 5*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	podInformer := factory.Core().V1().Pods()
	k.pods = podInformer.Lister()
	reg, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podChanged(obj) },
		UpdateFunc: func(_, obj any) { k.podChanged(obj) },
		DeleteFunc: func(obj any) { k.podDeleted(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	// Wait until the handler has seen every existing Pod, not just until the cache is full:
	// only then is a Pod directory without a worker really an orphan.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return ctx.Err()
	}
	k.removeOrphans()

	if cfg.AdminAddr != "" {
		if err := k.serveAdmin(ctx, cfg.AdminAddr); err != nil {
			return err
		}
	}
	if cfg.APIAddr != "" {
		if err := k.serveAPI(ctx); err != nil {
			return err
		}
	}
	log.Printf("node %s running, state in %s", cfg.NodeName, cfg.StateDir)
	<-ctx.Done()
	k.link.close()
	k.halt()
	factory.Shutdown()
	return nil
}

func newKubelet(cfg Config, client kubernetes.Interface) (*Kubelet, error) {
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "pods"), 0o755); err != nil {
		return nil, err
	}
	images, err := imagemap.Load(cfg.ImagesPath)
	if err != nil {
		return nil, fmt.Errorf("images file: %w", err)
	}
	ipam, err := netsetup.OpenIPAM(filepath.Join(cfg.StateDir, "ipam.json"), cfg.PodCIDR)
	if err != nil {
		return nil, err
	}
	return &Kubelet{cfg: cfg, client: client, images: images, ipam: ipam, link: cfg.APILink,
		beat: make(chan struct{}, 1), workers: map[types.UID]*podWorker{}}, nil
}

func (k *Kubelet) podDir(uid types.UID) string {
	return filepath.Join(k.cfg.StateDir, "pods", string(uid))
}

// stopLeftovers kills what a previous run of this node left: processes, namespaces, mounts.
// Pod directories stay until the API says whether their Pods still exist.
func (k *Kubelet) stopLeftovers() {
	dirs, _ := filepath.Glob(filepath.Join(k.cfg.StateDir, "pods", "*"))
	for _, d := range dirs {
		stopLeftovers(d)
	}
}

// removeOrphans deletes the directories and addresses of Pods that are no longer ours.
func (k *Kubelet) removeOrphans() {
	k.mu.Lock()
	defer k.mu.Unlock()
	known := map[types.UID]bool{}
	for uid := range k.workers {
		known[uid] = true
	}
	if pods, err := k.pods.List(labels.Everything()); err == nil {
		for _, p := range pods {
			known[p.UID] = true
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(k.cfg.StateDir, "pods", "*"))
	for _, d := range dirs {
		uid := types.UID(filepath.Base(d))
		if !known[uid] {
			stopLeftovers(d)
			_ = os.RemoveAll(d)
		}
	}
	for _, key := range k.ipam.Keys() {
		if !known[types.UID(key)] {
			_ = k.ipam.Release(key)
		}
	}
}

func (k *Kubelet) podChanged(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != k.cfg.NodeName || k.link.IsCut() {
		return
	}
	k.mu.Lock()
	if k.halted {
		k.mu.Unlock()
		return
	}
	w := k.workers[pod.UID]
	if w == nil {
		w = newPodWorker(k, pod)
		k.workers[pod.UID] = w
		go w.run()
	}
	k.mu.Unlock()
	w.update(pod)
}

func (k *Kubelet) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok || k.link.IsCut() {
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w == nil {
		return
	}
	w.gone()
	go func() {
		<-w.done
		k.mu.Lock()
		delete(k.workers, pod.UID)
		k.mu.Unlock()
	}()
}

// cutFromAPI cuts the node off the API server while its containers run on, as a network
// partition between node and control plane does: the Pod watch breaks and API requests
// wait. Meanwhile the kubelet sees no change of its Pods (a deletion does not stop them,
// a new Pod does not start), writes no status and renews no Lease, so the Node turns
// NotReady; containers that crash restart under their Pods' restart policy as before. It
// reports whether the node was connected.
func (k *Kubelet) cutFromAPI() bool {
	return k.link.Cut()
}

// reconnectAPI undoes cutFromAPI: the kubelet renews its Lease and status at once and acts
// on its Pods as the API has them now (the informer's cache, which catches up as its watch
// resumes). It reports whether the node was cut off.
func (k *Kubelet) reconnectAPI() bool {
	if !k.link.Heal() {
		return false
	}
	select {
	case k.beat <- struct{}{}:
	default:
	}
	k.resync()
	return true
}

// resync hands every Pod of the informer's cache to its worker, and tells the workers
// whose Pods are no longer there that they are gone: the events dropped while the node was
// cut off.
func (k *Kubelet) resync() {
	if k.pods == nil {
		return
	}
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		log.Printf("resync: %v", err)
		return
	}
	listed := map[types.UID]bool{}
	for _, p := range pods {
		listed[p.UID] = true
		k.podChanged(p)
	}
	for _, w := range k.allWorkers() {
		if !listed[w.uid] {
			k.podDeleted(w.podCopy())
		}
	}
}

// worker finds a local Pod by namespace and name.
func (k *Kubelet) worker(namespace, name string) *podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workers {
		if m := w.meta(); m.Namespace == namespace && m.Name == name {
			return w
		}
	}
	return nil
}

func (k *Kubelet) allWorkers() []*podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	ws := make([]*podWorker, 0, len(k.workers))
	for _, w := range k.workers {
		ws = append(ws, w)
	}
	return ws
}

// halt SIGKILLs every container and stops all API writes: what a crashing node does.
func (k *Kubelet) halt() {
	k.mu.Lock()
	k.halted = true
	k.mu.Unlock()
	for _, w := range k.allWorkers() {
		w.killAll()
	}
}

func (k *Kubelet) isHalted() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.halted
}

func (k *Kubelet) event(pod *v1.Pod, warning bool, reason, format string, args ...any) {
	if k.recorder == nil || pod == nil || k.link.IsCut() {
		return // cut off from the API server, the event is lost (a kubelet gives up on it too)
	}
	typ := v1.EventTypeNormal
	if warning {
		typ = v1.EventTypeWarning
	}
	k.recorder.Eventf(pod, typ, reason, format, args...)
}
