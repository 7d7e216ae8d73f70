package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// stream is a database of n bytes followed by its SHA-256, as etcd sends a snapshot.
func stream(n int) []byte {
	db := make([]byte, n)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range db {
		db[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

func TestReaderPassesAGoodSnapshot(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 4096, 1 << 20} {
		s := stream(n)
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(s), "byte by byte": iotest.OneByteReader(bytes.NewReader(s)),
			"halves": iotest.HalfReader(bytes.NewReader(s))} {
			sr := NewReader(r)
			got, err := io.ReadAll(sr)
			require.NoError(t, err, "%d bytes, %s", n, name)
			require.Equal(t, s, got, "passed through unchanged")
			require.Equal(t, int64(len(s)), sr.Size())
			sum := sha256.Sum256(s)
			require.Equal(t, hex.EncodeToString(sum[:]), sr.SHA256())
		}
	}
}

func TestReaderRefusesABadSnapshot(t *testing.T) {
	good := stream(100000)
	flipped := bytes.Clone(good)
	flipped[5000] ^= 1
	for name, s := range map[string][]byte{
		"a byte changed":      flipped,
		"truncated":           good[:len(good)-1000],
		"the hash cut off":    good[:len(good)-10],
		"shorter than a hash": good[:20],
		"empty":               nil,
	} {
		_, err := io.ReadAll(NewReader(bytes.NewReader(s)))
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// A read error of the stream itself is passed on, not taken for corruption.
func TestReaderPassesReadErrors(t *testing.T) {
	_, err := io.ReadAll(NewReader(iotest.TimeoutReader(bytes.NewReader(stream(1000)))))
	require.ErrorIs(t, err, iotest.ErrTimeout)
}
