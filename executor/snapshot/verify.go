// Package snapshot reads etcd snapshots as they stream: it checks the integrity hash etcd
// appends and sums what passes, without holding the snapshot in memory.
package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// ErrCorrupt is a snapshot whose bytes do not match the hash etcd appended to them.
var ErrCorrupt = errors.New("snapshot does not match its integrity hash")

// Reader passes a snapshot stream through unchanged. etcd ends the stream with the SHA-256
// of the database before it; at the end Reader returns ErrCorrupt instead of io.EOF when
// they differ, so a store that uploads what it reads aborts instead of keeping a bad copy.
type Reader struct {
	r    io.Reader
	db   hash.Hash // the database part, to compare with etcd's hash
	all  hash.Hash // every byte, the stored object's checksum
	tail []byte    // the last sha256.Size bytes seen, not yet known to be database
	n    int64
	err  error
}

// NewReader checks the stream r as it is read.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, db: sha256.New(), all: sha256.New()}
}

func (s *Reader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	if n > 0 {
		s.n += int64(n)
		s.all.Write(p[:n])
		// Hold back the last 32 bytes: only the end says whether they are the hash.
		s.tail = append(s.tail, p[:n]...)
		if over := len(s.tail) - sha256.Size; over > 0 {
			s.db.Write(s.tail[:over])
			s.tail = append(s.tail[:0], s.tail[over:]...)
		}
	}
	if err == io.EOF {
		err = s.finish()
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *Reader) finish() error {
	if len(s.tail) < sha256.Size || !bytes.Equal(s.db.Sum(nil), s.tail) {
		return ErrCorrupt
	}
	return io.EOF
}

// Size is how many bytes were read.
func (s *Reader) Size() int64 { return s.n }

// SHA256 is the hex SHA-256 of every byte read, the trailing hash included.
func (s *Reader) SHA256() string { return hex.EncodeToString(s.all.Sum(nil)) }
