package store

import (
	"net"
	"net/http"
	"time"
)

// A store that does not answer is said unavailable within seconds, whatever the network
// does: a connection is given DialTimeout (an address that drops packets would otherwise hold
// a backup for the kernel's two minutes of SYN retries), a TLS handshake as long again, and a
// call is tried Attempts times in all. Slow transfers are not cut: nothing bounds a body.
var (
	DialTimeout = 5 * time.Second
	Attempts    = 3
)

// transport is the HTTP transport of every object store: the standard one, bounded.
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	bound(t)
	return t
}

// bound sets the bounds above on a transport. An upload asks first whether the store takes
// its body (Expect: 100-continue, which the S3 client sends for parts): a store that is full
// answers so at once, and a client that sent the body anyway would see the connection
// reset instead of that answer. A loaded store gets as long to say as to connect.
func bound(t *http.Transport) {
	t.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 2 * DialTimeout
	t.ExpectContinueTimeout = DialTimeout
}
