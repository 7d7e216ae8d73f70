package node

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// APILink is a node's connection to the API server, which the cut-api fault breaks as a
// network partition between the node and the control plane would, while the node's
// containers run on: requests in flight (the Pod watch among them) fail at once, new ones
// wait until the link is healed (or their context ends), and the kubelet acts on nothing it
// could not have seen (see Kubelet.cutFromAPI).
//
// WrapTransport goes into the client's rest.Config (rest.Config.Wrap); a node whose client
// does not go through it (a fake client) is cut off by the kubelet's own checks only.
type APILink struct {
	mu     sync.Mutex
	cut    bool
	closed bool
	// conn ends when the link is cut: the requests in flight are made under it.
	conn context.Context
	drop context.CancelCauseFunc
	// healed is closed when the cut ends (or the link is closed): waiting requests go on.
	healed chan struct{}
}

// errCut is why requests in flight failed; errLinkClosed why waiting ones did at shutdown.
var (
	errCut        = errors.New("cut off from the API server (fault injection)")
	errLinkClosed = errors.New("node stopping: its link to the API server is closed")
)

// NewAPILink returns a connected link.
func NewAPILink() *APILink {
	l := &APILink{}
	l.conn, l.drop = context.WithCancelCause(context.Background())
	return l
}

// WrapTransport returns rt with requests going through the link.
func (l *APILink) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &linkTransport{link: l, next: rt}
}

// Cut breaks the link; it reports whether it was connected.
func (l *APILink) Cut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut || l.closed {
		return false
	}
	l.cut = true
	l.healed = make(chan struct{})
	l.drop(errCut)
	return true
}

// Heal connects the link again; it reports whether it was cut.
func (l *APILink) Heal() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.cut || l.closed {
		return false
	}
	l.cut = false
	l.conn, l.drop = context.WithCancelCause(context.Background())
	close(l.healed)
	return true
}

// IsCut reports whether the link is cut.
func (l *APILink) IsCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

// close fails the requests waiting on a cut link, and every later one: the node stops.
func (l *APILink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.cut {
		close(l.healed)
	}
}

// current waits while the link is cut and returns the context of the connection a request
// goes out on.
func (l *APILink) current(ctx context.Context) (context.Context, error) {
	for {
		l.mu.Lock()
		closed, cut, conn, healed := l.closed, l.cut, l.conn, l.healed
		l.mu.Unlock()
		switch {
		case closed && cut:
			return nil, errLinkClosed
		case !cut:
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-healed:
		}
	}
}

type linkTransport struct {
	link *APILink
	next http.RoundTripper
}

func (t *linkTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	conn, err := t.link.current(req.Context())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(conn, cancel)
	end := func() {
		stop()
		cancel()
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		end()
		if conn.Err() != nil {
			return nil, context.Cause(conn)
		}
		return nil, err
	}
	resp.Body = &linkBody{ReadCloser: resp.Body, conn: conn, end: end}
	return resp, nil
}

// linkBody ends its request when closed; a read cut short by the link says so.
type linkBody struct {
	io.ReadCloser
	conn context.Context
	end  func()
	once sync.Once
}

func (b *linkBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.conn.Err() != nil {
		err = context.Cause(b.conn)
	}
	return n, err
}

func (b *linkBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}
