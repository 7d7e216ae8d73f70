package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// A container's output is kept in the CRI logging format kubelets read: one record per line,
// "<RFC3339Nano time> <stdout|stderr> <F|P> <text>", P marking a piece of a line longer
// than maxLogLine. The time is what `kubectl logs --timestamps` and `--since` use.
const maxLogLine = 16 << 10

// logSink writes the records of one run's log file; stdout and stderr share it.
type logSink struct {
	mu   sync.Mutex
	f    *os.File
	done sync.WaitGroup
}

func openLog(path string) (*logSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &logSink{f: f}, nil
}

// pipe returns the write end of a pipe the container writes stream to; its records go to
// the file until every writer closed it.
func (s *logSink) pipe(stream string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		defer r.Close()
		br := bufio.NewReaderSize(r, maxLogLine)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				full := line[len(line)-1] == '\n'
				s.record(stream, bytes.TrimSuffix(line, []byte{'\n'}), full || err == io.EOF)
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	}()
	return w, nil
}

func (s *logSink) record(stream string, text []byte, full bool) {
	tag := "F"
	if !full {
		tag = "P"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.f, "%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, text)
}

// close waits until the container's output is all written (at most wait: a process it
// left behind may hold the pipes open) and closes the file.
func (s *logSink) close(wait time.Duration) {
	ch := make(chan struct{})
	go func() { s.done.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(wait):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.f.Close()
}

// logRecord is one record of a log file.
type logRecord struct {
	at     time.Time
	stream string
	full   bool
	text   []byte
}

func parseRecord(line []byte) (logRecord, bool) {
	ts, rest, ok1 := bytes.Cut(line, []byte{' '})
	stream, rest, ok2 := bytes.Cut(rest, []byte{' '})
	tag, text, ok3 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || !ok3 {
		return logRecord{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return logRecord{}, false
	}
	return logRecord{at: at, stream: string(stream), full: string(tag) == "F", text: text}, true
}

// logOptions are the parts of `kubectl logs` a kubelet serves.
type logOptions struct {
	follow     bool
	timestamps bool
	since      time.Time // records before it are left out
	tail       int       // the last tail lines only; < 0: all
	limit      int64     // at most limit bytes; <= 0: no limit
}

// parseLogOptions reads the containerLogs query: follow, timestamps, sinceSeconds or
// sinceTime, tailLines, limitBytes.
func parseLogOptions(q map[string][]string, now time.Time) (logOptions, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	o := logOptions{follow: get("follow") == "true", timestamps: get("timestamps") == "true", tail: -1}
	num := func(k string) (int64, error) {
		n, err := strconv.ParseInt(get(k), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: %q is not a number >= 0", k, get(k))
		}
		return n, nil
	}
	if get("sinceSeconds") != "" {
		n, err := num("sinceSeconds")
		if err != nil {
			return o, err
		}
		o.since = now.Add(-time.Duration(n) * time.Second)
	}
	if s := get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return o, fmt.Errorf("sinceTime: %w", err)
		}
		o.since = t
	}
	if get("tailLines") != "" {
		n, err := num("tailLines")
		if err != nil {
			return o, err
		}
		o.tail = int(n)
	}
	if get("limitBytes") != "" {
		n, err := num("limitBytes")
		if err != nil {
			return o, err
		}
		o.limit = n
	}
	return o, nil
}

// writeLog writes the log at path to w as o asks. With follow it keeps writing what is
// appended until running says the run ended and the file is read to its end, or ctx ends.
func writeLog(ctx context.Context, w io.Writer, path string, o logOptions, running func() bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	out := &limitedWriter{w: w, left: o.limit}
	if o.tail >= 0 {
		if err := seekTail(f, o.tail); err != nil {
			return err
		}
	}
	br := bufio.NewReader(f)
	var pending []byte // a record not yet ended by its newline
	for {
		chunk, err := br.ReadSlice('\n')
		pending = append(pending, chunk...)
		if err == nil {
			if r, ok := parseRecord(bytes.TrimSuffix(pending, []byte{'\n'})); ok && !r.at.Before(o.since) {
				if err := out.record(r, o.timestamps); err != nil {
					if errors.Is(err, errLimit) {
						return nil
					}
					return err
				}
			}
			pending = pending[:0]
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if !o.follow {
			return nil
		}
		ended := !running() // read before the last look at the file, so nothing is missed
		if f, ok := w.(interface{ Flush() }); ok {
			f.Flush()
		}
		if ended && len(pending) == 0 {
			if more, _ := br.Peek(1); len(more) == 0 {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// seekTail moves f to the start of its last n records.
func seekTail(f *os.File, n int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	const block = 32 << 10
	end, seen := st.Size(), 0
	buf := make([]byte, block)
	for pos := end; pos > 0; {
		size := int64(block)
		if pos < size {
			size = pos
		}
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == end-1 {
				continue
			}
			if seen++; seen == n {
				_, err := f.Seek(pos+i+1, io.SeekStart)
				return err
			}
		}
	}
	if n == 0 {
		_, err = f.Seek(0, io.SeekEnd)
		return err
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// limitedWriter writes records' text, each full line ended by a newline, up to left bytes.
type limitedWriter struct {
	w    io.Writer
	left int64 // <= 0: no limit
	cut  bool
}

var errLimit = errors.New("limit reached")

func (l *limitedWriter) record(r logRecord, timestamps bool) error {
	var b []byte
	if timestamps {
		b = append(b, r.at.Format(time.RFC3339Nano)+" "...)
	}
	b = append(b, r.text...)
	if r.full {
		b = append(b, '\n')
	}
	if l.left > 0 {
		if int64(len(b)) >= l.left {
			b, l.cut = b[:l.left], true
		}
		l.left -= int64(len(b))
	}
	if _, err := l.w.Write(b); err != nil {
		return err
	}
	if l.cut {
		return errLimit
	}
	return nil
}

// plainLog is a log file's text without its records' framing: what the container wrote.
func plainLog(path string) ([]byte, error) {
	var out bytes.Buffer
	err := writeLog(context.Background(), &out, path, logOptions{tail: -1}, nil)
	return out.Bytes(), err
}

// startOutput points cmd's stdout and stderr at pipes whose records go to the log at path.
func startOutput(cmd *exec.Cmd, path string) (*logSink, error) {
	sink, err := openLog(path)
	if err != nil {
		return nil, err
	}
	for _, s := range []struct {
		name string
		to   *io.Writer
	}{{"stdout", &cmd.Stdout}, {"stderr", &cmd.Stderr}} {
		w, err := sink.pipe(s.name)
		if err != nil {
			closeWriters(cmd)
			sink.close(0)
			return nil, err
		}
		*s.to = w
	}
	return sink, nil
}

// closeWriters closes the parent's copies of the pipes' write ends once the child has its
// own, so the readers see the end of the output when the container's processes end.
func closeWriters(cmd *exec.Cmd) {
	for _, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok {
			_ = f.Close()
		}
	}
}
