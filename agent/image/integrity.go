package image

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// StreamError is a compressed image that does not end where its format says
// it ends: cut short, corrupt, or followed by bytes that belong to no stream.
// Decompressors report a truncated stream as io.ErrUnexpectedEOF, which a
// reader loop easily mistakes for the end of the image; every decompressor
// error is turned into a StreamError before it reaches the pipeline.
type StreamError struct {
	Format Format
	// Served is how many bytes of the compressed file had been read when the
	// decompressor failed (decompressors read ahead: the fault lies at or
	// before this offset).
	Served int64
	// Decoded is how many image bytes had been decompressed before it.
	Decoded int64
	Err     error // the decompressor's own words
}

func (e *StreamError) Error() string {
	what := "corrupt"
	switch {
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		what = "cut short"
	case errors.Is(e.Err, errTrailingData):
		what = "followed by trailing data"
	}
	return fmt.Sprintf("%s stream %s: at compressed offset %d (image offset %d): %v", e.Format, what, e.Served, e.Decoded, e.Err)
}

func (e *StreamError) Unwrap() error { return e.Err }

var errTrailingData = errors.New("bytes after the end of the last stream")

// countingReader counts the bytes read through it; the count is read from
// another goroutine when an error is built.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// checkedStream reads a decompressor and turns any error but io.EOF into a
// *StreamError. At the decompressor's io.EOF it requires the compressed
// source to be at its end too: the decompressors used here read
// concatenated streams (gzip members, zstd frames, xz streams and their
// padding) up to the source's EOF, so anything left is data the format
// does not allow there.
type checkedStream struct {
	format  Format
	dec     io.Reader
	src     *countingReader
	decoded int64
	err     error
}

func (s *checkedStream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.dec.Read(p)
	s.decoded += int64(n)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		served := s.src.n.Load()
		var one [1]byte
		if m, _ := io.ReadFull(s.src, one[:]); m > 0 {
			s.err = &StreamError{Format: s.format, Served: served, Decoded: s.decoded, Err: errTrailingData}
			return n, s.err
		}
		s.err = io.EOF
		return n, io.EOF
	default:
		s.err = s.fail(err)
		return n, s.err
	}
}

func (s *checkedStream) fail(err error) error {
	return &StreamError{Format: s.format, Served: s.src.n.Load(), Decoded: s.decoded, Err: err}
}
