package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run's output kept as CRI records and read back as kubectl logs asks.
func TestLogRecordsAndOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	long := strings.Repeat("x", maxLogLine+10)
	cmd := exec.Command("sh", "-c", `echo two >&2; sleep 0.2; echo one; printf '`+long+`\n'; printf 'no newline'`)
	sink, err := startOutput(cmd, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	closeWriters(cmd)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	sink.close(time.Second)

	raw, _ := os.ReadFile(path)
	if n := bytes.Count(raw, []byte(" stdout P ")); n != 1 {
		t.Fatalf("a line longer than %d bytes is cut once, %d pieces marked P:\n%s", maxLogLine, n, raw)
	}
	plain, err := plainLog(path)
	if err != nil || string(plain) != "two\none\n"+long+"\nno newline\n" {
		t.Fatalf("plain text %q: %v", plain, err)
	}
	read := func(o logOptions) string {
		var b bytes.Buffer
		if err := writeLog(context.Background(), &b, path, o, func() bool { return false }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := read(logOptions{tail: 0}); got != "" {
		t.Fatalf("tail 0: %q", got)
	}
	if got := read(logOptions{tail: 1}); got != "no newline\n" {
		t.Fatalf("tail 1: %q", got)
	}
	if got := read(logOptions{tail: 100}); got != string(plain) {
		t.Fatalf("tail beyond the start: %q", got)
	}
	if got := read(logOptions{tail: -1, limit: 2}); got != "tw" {
		t.Fatalf("limit 2: %q", got)
	}
	if _, err := parseLogOptions(map[string][]string{"tailLines": {"-1"}}, time.Now()); err == nil {
		t.Fatal("a negative tailLines is refused")
	}
}
