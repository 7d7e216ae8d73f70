package clusterdns

import (
	"context"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func service(ns, name string, headless bool, ports ...v1.ServicePort) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: ports}}
	if headless {
		s.Spec.ClusterIP = v1.ClusterIPNone
	}
	return s
}

type ep struct {
	ip, host string
	ready    bool
}

func slice(ns, svc, name string, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("client"), Port: ptr.To[int32](2379),
			Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready)}}
		if e.host != "" {
			x.Hostname = ptr.To(e.host)
		}
		s.Endpoints = append(s.Endpoints, x)
	}
	return s
}

func newHandler(t *testing.T) *Handler {
	t.Helper()
	client := fake.NewClientset(
		service("default", "etcd", true, v1.ServicePort{Name: "client", Port: 2379, Protocol: v1.ProtocolTCP}),
		service("default", "etcd-client", false),
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.org"}},
		service("default", "empty", true),
		// Two slices for one Service; one endpoint is not ready.
		slice("default", "etcd", "etcd-a", ep{"10.88.1.2", "etcd-0", true}, ep{"10.88.2.2", "etcd-1", false}),
		slice("default", "etcd", "etcd-b", ep{"10.88.3.2", "etcd-2", true}),
		slice("default", "etcd-client", "etcd-client-a", ep{"10.88.1.2", "", true}, ep{"10.88.3.2", "", true}),
	)
	f := informers.NewSharedInformerFactory(client, 0)
	h := NewHandler("cluster.local", f)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return h
}

func answerStrings(rrs []dns.RR) []string {
	var s []string
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.A:
			s = append(s, rr.A.String())
		case *dns.SRV:
			s = append(s, rr.Target)
		case *dns.CNAME:
			s = append(s, rr.Target)
		}
	}
	sort.Strings(s)
	return s
}

func TestAnswer(t *testing.T) {
	h := newHandler(t)
	tests := []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"etcd.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.88.1.2", "10.88.3.2"}},
		{"ETCD.Default.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.88.1.2", "10.88.3.2"}},
		{"etcd.default.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"etcd-0.etcd.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.88.1.2"}},
		{"etcd-1.etcd.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"etcd-2.etcd.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.88.3.2"}},
		{"etcd-client.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.88.1.2", "10.88.3.2"}},
		{"10-88-1-2.etcd-client.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.88.1.2"}},
		{"empty.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"_client._tcp.etcd.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"etcd-0.etcd.default.svc.cluster.local.", "etcd-2.etcd.default.svc.cluster.local."}},
		{"_peer._tcp.etcd.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, nil},
		{"ext.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"example.org."}},
		{"10-88-7-3.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.88.7.3"}},
		{"nothing.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"etcd.other.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"etcd-0.etcd.default.svc.cluster.local.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"cluster.local.", dns.TypeSOA, dns.RcodeSuccess, nil},
		{"example.com.", dns.TypeA, dns.RcodeRefused, nil},
	}
	for _, tt := range tests {
		rcode, rrs := h.Answer(dns.Question{Name: tt.name, Qtype: tt.qtype, Qclass: dns.ClassINET})
		got := answerStrings(rrs)
		if rcode != tt.rcode || len(got) != len(tt.want) {
			t.Errorf("%s %s: got %s %v, want %s %v", tt.name, dns.TypeToString[tt.qtype],
				dns.RcodeToString[rcode], got, dns.RcodeToString[tt.rcode], tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
	}
}

// TestServe queries the server over UDP and TCP, and through Go's resolver.
func TestServe(t *testing.T) {
	h := newHandler(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, h) }()

	for _, proto := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: proto, Timeout: time.Second}
		m := new(dns.Msg)
		m.SetQuestion("etcd-0.etcd.default.svc.cluster.local.", dns.TypeA)
		var r *dns.Msg
		for i := 0; i < 50; i++ {
			if r, _, err = c.Exchange(m, addr); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.88.1.2" {
			t.Fatalf("%s: %v", proto, r)
		}
		m.SetQuestion("missing.default.svc.cluster.local.", dns.TypeA)
		r, _, err = c.Exchange(m, addr)
		if err != nil || r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
			t.Fatalf("%s: NXDOMAIN with SOA expected: %v %v", proto, r, err)
		}
	}
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return net.Dial(network, addr)
	}}
	ips, err := res.LookupHost(ctx, "etcd.default.svc.cluster.local")
	if err != nil || len(ips) != 2 {
		t.Fatalf("Go resolver: %v %v", ips, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
