package clusterdns

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/informers"
)

// NewHandler serves zone from the factory's Service and EndpointSlice informers; start the
// factory after this call.
func NewHandler(zone string, f informers.SharedInformerFactory) *Handler {
	return &Handler{
		Zone:     dns.Fqdn(zone),
		Services: f.Core().V1().Services().Lister(),
		Slices:   f.Discovery().V1().EndpointSlices().Lister(),
	}
}

// Serve answers on addr over UDP and TCP until ctx is done. It waits for the address to be
// bindable (the bridge may not be up yet) for up to a minute.
func Serve(ctx context.Context, addr string, h dns.Handler) error {
	var pc net.PacketConn
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		pc, err = net.ListenPacket("udp", addr)
		if err == nil {
			ln, err = net.Listen("tcp", addr)
			if err == nil {
				break
			}
			pc.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("dns on %s: %w", addr, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	errc := make(chan error, 2)
	go func() { errc <- udp.ActivateAndServe() }()
	go func() { errc <- tcp.ActivateAndServe() }()
	select {
	case <-ctx.Done():
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
		return nil
	case err := <-errc:
		_ = udp.Shutdown()
		_ = tcp.Shutdown()
		return err
	}
}
