package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Block cache geometry for reading an image by ranges. qcow2 metadata and
// data are read in small pieces (one cluster, often 64 KiB); fetching 4 MiB
// blocks and the next ones ahead turns ~16k requests per GiB into ~256, and
// keeps the network busy while clusters are decoded.
const (
	cacheBlock     = 4 << 20
	cacheBlocks    = 6
	cacheReadAhead = 2
)

// ReaderAt returns an io.ReaderAt over the image: the file itself, or over
// HTTP one Range request per 4 MiB block with a small LRU cache and
// read-ahead. It fails if the server does not support ranges or did not say
// the image's size.
func (s *Source) ReaderAt(ctx context.Context) (io.ReaderAt, error) {
	if s.file != nil {
		return s.file, nil
	}
	if s.size < 0 {
		return nil, fmt.Errorf("read image %s by ranges: the server did not say the image's size", s.url)
	}
	if !s.ranges { // not advertised: ask for one byte to find out
		resp, err := s.getOnce(ctx, 0, 0, false)
		if err != nil {
			return nil, fmt.Errorf("read image %s by ranges: %w", s.url, err)
		}
		resp.Body.Close()
		s.ranges = true
	}
	return &rangeReader{ctx: ctx, s: s, blocks: map[int64]*cacheEntry{}}, nil
}

type cacheEntry struct {
	done chan struct{}
	data []byte
	err  error
	refs int
	used uint64
}

type rangeReader struct {
	ctx    context.Context
	s      *Source
	mu     sync.Mutex
	blocks map[int64]*cacheEntry
	free   [][]byte
	tick   uint64
}

// ReadAt may be called concurrently, as io.ReaderAt allows.
func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(p) && off+int64(n) < r.s.size {
		pos := off + int64(n)
		idx := pos / cacheBlock
		e := r.acquire(idx)
		<-e.done
		if e.err != nil {
			r.release(idx, e, true)
			return n, e.err
		}
		n += copy(p[n:], e.data[pos-idx*cacheBlock:])
		r.release(idx, e, false)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *rangeReader) acquire(idx int64) *cacheEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.startLocked(idx)
	e.refs++
	r.tick++
	e.used = r.tick
	for i := int64(1); i <= cacheReadAhead; i++ {
		if (idx+i)*cacheBlock < r.s.size {
			r.startLocked(idx + i)
		}
	}
	return e
}

func (r *rangeReader) release(idx int64, e *cacheEntry, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.refs--
	if failed && r.blocks[idx] == e {
		delete(r.blocks, idx) // let a later read try again
	}
}

// startLocked returns the entry for block idx, starting its fetch if needed.
func (r *rangeReader) startLocked(idx int64) *cacheEntry {
	if e, ok := r.blocks[idx]; ok {
		return e
	}
	for len(r.blocks) >= cacheBlocks && r.evictLocked() {
	}
	var buf []byte
	if n := len(r.free); n > 0 {
		buf, r.free = r.free[n-1], r.free[:n-1]
	} else {
		buf = make([]byte, cacheBlock)
	}
	e := &cacheEntry{done: make(chan struct{})}
	r.blocks[idx] = e
	go func() {
		start := idx * cacheBlock
		end := min(start+cacheBlock, r.s.size)
		data, err := r.s.fetchRange(r.ctx, buf[:end-start], start)
		r.mu.Lock()
		e.data, e.err = data, err
		r.mu.Unlock()
		close(e.done)
	}()
	return e
}

// evictLocked drops the least recently used block nobody is reading.
func (r *rangeReader) evictLocked() bool {
	var victim int64 = -1
	var oldest uint64
	for idx, e := range r.blocks {
		select {
		case <-e.done:
		default:
			continue
		}
		if e.refs == 0 && (victim < 0 || e.used < oldest) {
			victim, oldest = idx, e.used
		}
	}
	if victim < 0 {
		return false
	}
	if e := r.blocks[victim]; e.data != nil {
		r.free = append(r.free, e.data[:cap(e.data)])
	}
	delete(r.blocks, victim)
	return true
}

// fetchRange reads [off, off+len(buf)) with a Range request, retrying
// failed requests and cut bodies alike up to Retries times.
func (s *Source) fetchRange(ctx context.Context, buf []byte, off int64) ([]byte, error) {
	var lastErr error
	for attempt := 0; attempt <= max(s.opts.Retries, 0); attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, s.opts.RetryDelay); err != nil {
				return nil, err
			}
		}
		resp, err := s.getOnce(ctx, off, off+int64(len(buf))-1, false)
		if err == nil {
			_, err = io.ReadFull(resp.Body, buf)
			resp.Body.Close()
			if err == nil {
				return buf, nil
			}
		}
		lastErr = err
		if permanent(err) || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("read image %s bytes %d-%d: %w", s.url, off, off+int64(len(buf))-1, lastErr)
}

// exactReader reads by ranges without cache or read-ahead: one request per
// ReadAt for exactly the bytes asked. qcow2 validation uses it for the
// scattered metadata clusters, where 4 MiB blocks and read-ahead would
// download megabytes per L2 table.
type exactReader struct {
	ctx context.Context
	s   *Source
}

func (r exactReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.s.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.s.size-off)
	if n > 0 {
		if _, err := r.s.fetchRange(r.ctx, p[:n], off); err != nil {
			return 0, err
		}
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// metadataReaderAt is the reader for qcow2 validation: the file itself, or
// exact ranges over HTTP. Call it after ReaderAt, which checks for ranges.
func (s *Source) metadataReaderAt(ctx context.Context) io.ReaderAt {
	if s.file != nil {
		return s.file
	}
	return exactReader{ctx: ctx, s: s}
}
