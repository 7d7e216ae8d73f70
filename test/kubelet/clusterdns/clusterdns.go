// Package clusterdns answers cluster DNS queries (zone cluster.local) from Services and
// EndpointSlices, the way CoreDNS's kubernetes plugin does:
//
//	<svc>.<ns>.svc.<zone>            A: ready endpoints (ClusterIP Services too: there is no
//	                                    kube-proxy, so the virtual IP would lead nowhere)
//	<host>.<svc>.<ns>.svc.<zone>     A: the endpoint with that hostname (Pods with hostname and
//	                                    subdomain) or with that dashed IP
//	_<port>._<proto>.<svc>.<ns>.svc.<zone>  SRV: one record per ready endpoint
//	<a-b-c-d>.<ns>.pod.<zone>        A: a.b.c.d
//
// EndpointSlices already carry readiness (ready is true for not-ready Pods when the Service
// publishes not-ready addresses) and the Pod hostnames. Other names in the zone get NXDOMAIN;
// names outside it get REFUSED, as there is nothing to forward to.
package clusterdns

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// TTL of every answer: short, so Pods see membership changes quickly (CoreDNS uses 5 s too).
const TTL = 5

// Handler serves the zone from listers.
type Handler struct {
	Zone     string // "cluster.local."
	Services corelisters.ServiceLister
	Slices   discoverylisters.EndpointSliceLister
}

// ServeDNS implements dns.Handler.
func (h *Handler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	m.Rcode, m.Answer = h.Answer(q)
	if m.Rcode == dns.RcodeRefused {
		m.Authoritative = false
	} else if len(m.Answer) == 0 {
		m.Ns = []dns.RR{h.soa()}
	}
	_ = w.WriteMsg(m)
}

func (h *Handler) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: h.Zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns:      "ns.dns." + h.Zone,
		Mbox:    "hostmaster." + h.Zone,
		Serial:  1,
		Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL,
	}
}

// Answer resolves one question: the response code and the answer records.
func (h *Handler) Answer(q dns.Question) (int, []dns.RR) {
	name := strings.ToLower(dns.Fqdn(q.Name))
	if !dns.IsSubDomain(h.Zone, name) {
		return dns.RcodeRefused, nil
	}
	if name == h.Zone {
		if q.Qtype == dns.TypeSOA {
			return dns.RcodeSuccess, []dns.RR{h.soa()}
		}
		return dns.RcodeSuccess, nil
	}
	labels := dns.SplitDomainName(strings.TrimSuffix(name, "."+h.Zone))
	n := len(labels)
	var found bool
	var ips []netip.Addr
	var rrs []dns.RR
	switch {
	case n == 3 && labels[2] == "pod":
		ip, err := netip.ParseAddr(strings.ReplaceAll(labels[0], "-", "."))
		found = err == nil && ip.Is4()
		ips = []netip.Addr{ip}
	case n >= 3 && labels[n-1] == "svc":
		found, ips, rrs = h.service(name, labels[:n-2], labels[n-2], q.Qtype)
	}
	if !found {
		return dns.RcodeNameError, nil
	}
	if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
		for _, ip := range ips {
			rrs = append(rrs, &dns.A{
				Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL},
				A:   ip.AsSlice(),
			})
		}
	}
	return dns.RcodeSuccess, rrs
}

// service answers names under <svc>.<ns>.svc: prefix holds the labels before the namespace.
func (h *Handler) service(name string, prefix []string, ns string, qtype uint16) (bool, []netip.Addr, []dns.RR) {
	svcName := prefix[len(prefix)-1]
	svc, err := h.Services.Services(ns).Get(svcName)
	if err != nil {
		return false, nil, nil
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		if len(prefix) != 1 {
			return false, nil, nil
		}
		return true, nil, []dns.RR{&dns.CNAME{
			Hdr:    dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: TTL},
			Target: dns.Fqdn(svc.Spec.ExternalName),
		}}
	}
	eps := h.readyEndpoints(ns, svcName)
	svcDomain := svcName + "." + ns + ".svc." + h.Zone
	switch len(prefix) {
	case 1:
		return true, addrsOf(eps), nil
	case 2:
		// <hostname or dashed IP>.<svc>.<ns>.svc
		var ips []netip.Addr
		for _, e := range eps {
			if e.host == prefix[0] {
				ips = append(ips, e.ip)
			}
		}
		return len(ips) > 0, ips, nil
	case 3:
		if qtype != dns.TypeSRV && qtype != dns.TypeANY {
			return h.hasPort(ns, svcName, prefix[0], prefix[1]), nil, nil
		}
		var rrs []dns.RR
		for _, e := range eps {
			port, ok := e.ports[portKey(prefix[0], prefix[1])]
			if !ok {
				continue
			}
			rrs = append(rrs, &dns.SRV{
				Hdr:      dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: TTL},
				Priority: 0, Weight: 100, Port: uint16(port),
				Target: e.host + "." + svcDomain,
			})
		}
		return len(rrs) > 0 || h.hasPort(ns, svcName, prefix[0], prefix[1]), nil, rrs
	}
	return false, nil, nil
}

type endpoint struct {
	ip    netip.Addr
	host  string           // hostname, or the IP with dashes
	ports map[string]int32 // "_name._proto" -> port
}

func portKey(name, proto string) string { return name + "." + proto }

// readyEndpoints lists the ready IPv4 endpoints of a Service, sorted by IP, deduplicated.
func (h *Handler) readyEndpoints(ns, svc string) []endpoint {
	slices, _ := h.Slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: svc,
	}))
	seen := map[netip.Addr]bool{}
	var eps []endpoint
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		ports := map[string]int32{}
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name != "" && p.Port != nil {
				proto := "tcp"
				if p.Protocol != nil {
					proto = strings.ToLower(string(*p.Protocol))
				}
				ports[portKey("_"+*p.Name, "_"+proto)] = *p.Port
			}
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || seen[ip] {
					continue
				}
				seen[ip] = true
				host := strings.ReplaceAll(ip.String(), ".", "-")
				if e.Hostname != nil && *e.Hostname != "" {
					host = *e.Hostname
				}
				eps = append(eps, endpoint{ip: ip, host: host, ports: ports})
			}
		}
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].ip.Less(eps[j].ip) })
	return eps
}

func (h *Handler) hasPort(ns, svcName, name, proto string) bool {
	svc, err := h.Services.Services(ns).Get(svcName)
	if err != nil {
		return false
	}
	for _, p := range svc.Spec.Ports {
		if "_"+p.Name == name && "_"+strings.ToLower(string(p.Protocol)) == proto {
			return true
		}
	}
	return false
}

func addrsOf(eps []endpoint) []netip.Addr {
	ips := make([]netip.Addr, len(eps))
	for i, e := range eps {
		ips[i] = e.ip
	}
	return ips
}
