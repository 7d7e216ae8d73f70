package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// serveAdmin serves health, Pod listing, logs and fault injection:
//
//	GET  /healthz
//	GET  /pods
//	GET  /logs?namespace=&pod=&container=[&previous=1]
//	POST /faults/kill?namespace=&pod=&container=   SIGKILL the container; its restart policy applies
//	POST /faults/pause?namespace=&pod=&container=  SIGSTOP the container: it hangs, its sockets stay open
//	POST /faults/resume?namespace=&pod=&container= SIGCONT it
//	POST /faults/cut?namespace=&pod=               take the Pod's link down
//	POST /faults/heal?namespace=&pod=              bring it back
//	POST /faults/stop-node                          SIGKILL all containers and exit
//	POST /faults/cut-api                            cut the node off the API server, its containers run on
//	POST /faults/heal-api                           connect it again
func (k *Kubelet) serveAdmin(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /pods", k.handlePods)
	mux.HandleFunc("GET /logs", k.handleLogs)
	mux.HandleFunc("POST /faults/kill", func(w http.ResponseWriter, r *http.Request) { k.handleSignal(w, r, syscall.SIGKILL) })
	mux.HandleFunc("POST /faults/pause", func(w http.ResponseWriter, r *http.Request) { k.handleSignal(w, r, syscall.SIGSTOP) })
	mux.HandleFunc("POST /faults/resume", func(w http.ResponseWriter, r *http.Request) { k.handleSignal(w, r, syscall.SIGCONT) })
	mux.HandleFunc("POST /faults/cut", func(w http.ResponseWriter, r *http.Request) { k.handleLink(w, r, false) })
	mux.HandleFunc("POST /faults/heal", func(w http.ResponseWriter, r *http.Request) { k.handleLink(w, r, true) })
	mux.HandleFunc("POST /faults/stop-node", k.handleStopNode)
	mux.HandleFunc("POST /faults/cut-api", func(w http.ResponseWriter, _ *http.Request) {
		k.handleAPILink(w, "cut off from the API server", k.cutFromAPI)
	})
	mux.HandleFunc("POST /faults/heal-api", func(w http.ResponseWriter, _ *http.Request) {
		k.handleAPILink(w, "connected to the API server again", k.reconnectAPI)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Printf("admin: %v", err)
		}
	}()
	return nil
}

type podInfo struct {
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	UID        string         `json:"uid"`
	Netns      string         `json:"netns,omitempty"`
	IP         string         `json:"ip,omitempty"`
	Phase      string         `json:"phase"`
	Cut        bool           `json:"cut,omitempty"`
	Containers map[string]int `json:"containers"` // name -> pid (0: not running)
}

func (k *Kubelet) handlePods(w http.ResponseWriter, _ *http.Request) {
	var out []podInfo
	for _, pw := range k.allWorkers() {
		m := pw.meta()
		pw.mu.Lock()
		info := podInfo{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID), Netns: m.Netns,
			IP: pw.ip, Phase: string(pw.phaseLocked()), Containers: map[string]int{}}
		for _, c := range append(append([]*container{}, pw.inits...), pw.ctrs...) {
			info.Containers[c.spec().Name] = 0
			if c.proc != nil {
				info.Containers[c.spec().Name] = c.proc.pid
			}
		}
		pw.mu.Unlock()
		info.Cut = pw.isCut()
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (k *Kubelet) podFromQuery(w http.ResponseWriter, r *http.Request) *podWorker {
	ns, name := r.URL.Query().Get("namespace"), r.URL.Query().Get("pod")
	if ns == "" {
		ns = "default"
	}
	pw := k.worker(ns, name)
	if pw == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on this node", ns, name), http.StatusNotFound)
	}
	return pw
}

func (pw *podWorker) container(name string) *container {
	for _, c := range append(append([]*container{}, pw.inits...), pw.ctrs...) {
		if c.spec().Name == name || (name == "" && !c.init) {
			return c
		}
	}
	return nil
}

func (k *Kubelet) handleSignal(w http.ResponseWriter, r *http.Request, sig syscall.Signal) {
	pw := k.podFromQuery(w, r)
	if pw == nil {
		return
	}
	c := pw.container(r.URL.Query().Get("container"))
	if c == nil {
		http.Error(w, "no such container", http.StatusNotFound)
		return
	}
	if !c.signal(sig) {
		http.Error(w, "container is not running", http.StatusConflict)
		return
	}
	fmt.Fprintln(w, sig)
}

func (k *Kubelet) handleLink(w http.ResponseWriter, r *http.Request, up bool) {
	pw := k.podFromQuery(w, r)
	if pw == nil {
		return
	}
	if err := pw.setCut(!up); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (k *Kubelet) handleStopNode(w http.ResponseWriter, _ *http.Request) {
	for _, pw := range k.allWorkers() {
		_ = pw.setCut(true) // the Pods' addresses stop answering, as on a dead machine
	}
	k.halt()
	fmt.Fprintln(w, "stopping")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		log.Printf("node %s stopped by fault injection", k.cfg.NodeName)
		os.Exit(0)
	}()
}

// handleAPILink cuts or heals the node's link to the API server; doing it twice is no error.
func (k *Kubelet) handleAPILink(w http.ResponseWriter, what string, change func() bool) {
	if change() {
		log.Printf("node %s %s by fault injection", k.cfg.NodeName, what)
		fmt.Fprintln(w, what)
		return
	}
	fmt.Fprintln(w, "already", what)
}

func (k *Kubelet) handleLogs(w http.ResponseWriter, r *http.Request) {
	pw := k.podFromQuery(w, r)
	if pw == nil {
		return
	}
	c := pw.container(r.URL.Query().Get("container"))
	if c == nil {
		http.Error(w, "no such container", http.StatusNotFound)
		return
	}
	pw.mu.Lock()
	n := int(c.status.RestartCount)
	pw.mu.Unlock()
	if r.URL.Query().Get("previous") != "" {
		n--
	}
	text, err := plainLog(filepath.Join(pw.dir, "logs", c.spec().Name, strconv.Itoa(n)+".log"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	_, _ = w.Write(text)
}

// setCut takes the Pod's link down (cut) or up (heal).
func (pw *podWorker) setCut(cut bool) error {
	pw.mu.Lock()
	net := pw.net
	pw.mu.Unlock()
	if net == nil {
		return fmt.Errorf("pod has no network namespace")
	}
	return netsetup.SetLinkUp(net.HostVeth, !cut)
}

func (pw *podWorker) isCut() bool {
	pw.mu.Lock()
	net := pw.net
	pw.mu.Unlock()
	if net == nil {
		return false
	}
	return !netsetup.LinkUp(net.HostVeth)
}
