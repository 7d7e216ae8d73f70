package node

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// setupNetwork gives the Pod its address and namespace (host-network Pods use the node's),
// with the resolv.conf and hosts files its containers see.
func (w *podWorker) setupNetwork() error {
	pod := w.podCopy()
	if pod.Spec.HostNetwork {
		w.mu.Lock()
		w.ip, w.netReady = w.k.cfg.NodeIP, true
		w.mu.Unlock()
		w.notify()
		return writeMeta(w.dir, podMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID})
	}
	addr, err := w.k.ipam.Allocate(string(w.uid))
	if err != nil {
		return err
	}
	netns, veth := netsetup.Names(w.k.cfg.NetnsPrefix, string(w.uid))
	p := &netsetup.Pod{Bridge: w.k.cfg.Bridge, Netns: netns, HostVeth: veth,
		Addr: netip.PrefixFrom(addr, w.k.cfg.Gateway.Bits()), Gateway: w.k.cfg.Gateway.Addr()}
	// The meta file comes first: a crash after this point leaves a namespace that the next
	// run knows to remove.
	if err := writeMeta(w.dir, podMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		Netns: netns, HostVeth: veth}); err != nil {
		return err
	}
	if err := netsetup.SetupPod(*p); err != nil {
		return err
	}
	files := map[string]string{"hosts": hostsFile(pod, addr.String(), w.k.cfg.ClusterDomain)}
	if rc, err := resolvConf(pod, w.k.cfg.DNSServer, w.k.cfg.ClusterDomain); err != nil {
		return err
	} else if rc != "" {
		files["resolv.conf"] = rc
	}
	if err := netsetup.WriteEtc(netns, files); err != nil {
		return err
	}
	w.mu.Lock()
	w.net, w.ip, w.netReady = p, addr.String(), true
	w.mu.Unlock()
	w.notify()
	return nil
}

// resolvConf renders the Pod's resolv.conf per its dnsPolicy and dnsConfig, as the kubelet
// does; "" keeps the host's.
func resolvConf(pod *v1.Pod, server, domain string) (string, error) {
	var servers, searches []string
	options := []string{}
	switch pod.Spec.DNSPolicy {
	case v1.DNSDefault:
		host, err := os.ReadFile("/etc/resolv.conf")
		if err != nil {
			return "", err
		}
		if pod.Spec.DNSConfig == nil {
			return "", nil
		}
		for _, line := range strings.Split(string(host), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "nameserver" {
				servers = append(servers, f[1])
			}
			if len(f) >= 2 && f[0] == "search" {
				searches = append(searches, f[1:]...)
			}
		}
	case v1.DNSNone:
	default: // ClusterFirst, ClusterFirstWithHostNet
		servers = []string{server}
		searches = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		options = []string{"ndots:5"}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = append(servers, c.Nameservers...)
		searches = append(searches, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			options = append(options, opt)
		}
	}
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(searches, " "))
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String(), nil
}

// hostsFile renders the Pod's /etc/hosts like the kubelet's: localhost, the Pod's own name
// (fully qualified when it has a subdomain) and its hostAliases.
func hostsFile(pod *v1.Pod, ip, domain string) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	host := podHostname(pod)
	if pod.Spec.Subdomain != "" {
		fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, host, pod.Spec.Subdomain, pod.Namespace, domain, host)
	} else {
		fmt.Fprintf(&b, "%s\t%s\n", ip, host)
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.String()
}
