package node

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A cut breaks the requests in flight (a watch among them) and holds new ones until the
// link is healed; a request whose context ends while it waits fails, and so does every
// waiting one once the link is closed.
func TestAPILinkCutsAndHeals(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/watch" {
			_, _ = io.WriteString(w, "event\n")
			w.(http.Flusher).Flush()
			select { // a watch: more events may come until the client goes
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer close(release)
	link := NewAPILink()
	c := &http.Client{Transport: link.WrapTransport(http.DefaultTransport)}
	get := func(ctx context.Context, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Do(req)
	}

	watch, err := get(context.Background(), "/watch")
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Body.Close()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(watch.Body, buf); err != nil || string(buf) != "event\n" {
		t.Fatalf("watch: %q %v", buf, err)
	}
	if !link.Cut() || link.Cut() || !link.IsCut() {
		t.Fatal("Cut reports whether the link was connected")
	}
	read := make(chan error, 1)
	go func() { _, err := watch.Body.Read(buf); read <- err }()
	select {
	case err := <-read:
		if !errors.Is(err, errCut) {
			t.Fatalf("the watch in flight ended with %v, want %v", err, errCut)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch in flight goes on after the cut")
	}

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := get(short, "/"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request on a cut link whose context ends: %v", err)
	}
	waiting := make(chan string, 1)
	go func() {
		resp, err := get(context.Background(), "/")
		if err != nil {
			waiting <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		waiting <- string(b)
	}()
	select {
	case got := <-waiting:
		t.Fatalf("a request went through the cut link: %s", got)
	case <-time.After(500 * time.Millisecond):
	}
	if !link.Heal() || link.Heal() || link.IsCut() {
		t.Fatal("Heal reports whether the link was cut")
	}
	select {
	case got := <-waiting:
		if got != "ok" {
			t.Fatalf("the waiting request after the heal: %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request is still held after the heal")
	}

	// Closing (the node stops) fails the requests a cut holds.
	link.Cut()
	go func() {
		_, err := get(context.Background(), "/")
		waiting <- err.Error()
	}()
	time.Sleep(100 * time.Millisecond)
	link.close()
	select {
	case got := <-waiting:
		if !strings.Contains(got, errLinkClosed.Error()) {
			t.Fatalf("a held request when the link closes: %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a held request outlives the link")
	}
}
