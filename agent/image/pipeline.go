package image

import (
	"context"
	"hash"
	"io"
	"sync"
	"sync/atomic"
)

// Pipeline geometry. Every stage works on its own goroutine so that
// download+hash, decode and write overlap; the number of buffers in flight
// is fixed, which is what keeps memory independent of the image's size.
const (
	chunkSize  = 4 << 20  // one disk write (O_DIRECT, aligned)
	chunkBufs  = 4        // chunk buffers in the pipeline
	zeroGrain  = 64 << 10 // granularity of zero-run detection
	writers    = 2        // concurrent WriteAt calls on disjoint ranges
	fetchChunk = 1 << 20  // download buffer
	fetchBufs  = 4
)

// piece is a run of the image at off: n bytes in buf, or n zero bytes.
type piece struct {
	off  int64
	buf  []byte
	n    int
	zero bool
}

// pipeline writes pieces to the sink with a few writer goroutines. The
// disk's first MiB is held back and written only once everything else is
// written and verified, so an interrupted write never leaves a bootable
// start of disk behind.
type pipeline struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sink   *Sink
	free   chan []byte
	made   atomic.Int32
	out    chan piece
	wg     sync.WaitGroup

	head    []byte // first scrubLen bytes of the image, written last
	headLen int

	total    int64
	progress func(done, total int64)
	pmu      sync.Mutex
	done     int64
	written  atomic.Int64
	zeroed   atomic.Int64
	touched  atomic.Bool // something may have reached the disk
}

func newPipeline(ctx context.Context, sink *Sink, total int64, progress func(done, total int64)) *pipeline {
	ctx, cancel := context.WithCancelCause(ctx)
	p := &pipeline{
		ctx: ctx, cancel: cancel, sink: sink, total: total, progress: progress,
		free: make(chan []byte, chunkBufs), out: make(chan piece, chunkBufs),
	}
	for range writers {
		p.wg.Add(1)
		go p.writer()
	}
	return p
}

// get returns a free chunk buffer, allocating up to chunkBufs of them.
func (p *pipeline) get() ([]byte, error) {
	select {
	case b := <-p.free:
		return b, nil
	default:
	}
	if p.made.Add(1) <= chunkBufs {
		return alignedBuf(chunkSize), nil
	}
	select {
	case b := <-p.free:
		return b, nil
	case <-p.ctx.Done():
		return nil, context.Cause(p.ctx)
	}
}

func (p *pipeline) put(pc piece) error {
	if end := pc.off + int64(pc.n); end > p.sink.Size() {
		err := &tooSmallError{target: p.sink.path, size: p.sink.Size(), need: end}
		p.cancel(err)
		return err
	}
	// Once a piece is queued a writer may put it on the disk: from here on
	// a failure must scrub, whichever stage fails first.
	p.touched.Store(true)
	select {
	case p.out <- pc:
		return nil
	case <-p.ctx.Done():
		return context.Cause(p.ctx)
	}
}

// finish waits for the writers and returns the first error of any stage.
func (p *pipeline) finish(produceErr error) error {
	if produceErr != nil {
		p.cancel(produceErr)
	}
	close(p.out)
	p.wg.Wait()
	if err := context.Cause(p.ctx); err != nil {
		return err
	}
	return nil
}

func (p *pipeline) fail(err error) {
	p.cancel(err)
}

func (p *pipeline) writer() {
	defer p.wg.Done()
	for pc := range p.out {
		if p.ctx.Err() == nil {
			if err := p.write(pc); err != nil {
				p.fail(err)
			}
		}
		if pc.buf != nil {
			p.free <- pc.buf
		}
	}
}

func (p *pipeline) write(pc piece) error {
	off, n := pc.off, int64(pc.n)
	if off < scrubLen && n > 0 { // hold back the start of the disk
		h := min(scrubLen-off, n)
		if p.head == nil {
			p.head = alignedBuf(scrubLen)
		}
		if pc.zero {
			clear(p.head[off : off+h])
		} else {
			copy(p.head[off:], pc.buf[:h])
			pc.buf = pc.buf[h:]
		}
		p.headLen = max(p.headLen, int(off+h))
		off, n = off+h, n-h
	}
	if n > 0 {
		p.touched.Store(true)
		if pc.zero {
			if err := p.sink.Zero(off, n); err != nil {
				return err
			}
			p.zeroed.Add(n)
		} else if err := p.writeRuns(pc.buf[:n], off); err != nil {
			return err
		}
	}
	p.report(int64(pc.n))
	return nil
}

// writeRuns writes b at off, zeroing rather than writing its zero runs.
func (p *pipeline) writeRuns(b []byte, off int64) error {
	for len(b) > 0 {
		// The first grain may be short so that later ones stay aligned.
		g := min(int64(len(b)), zeroGrain-off%zeroGrain)
		zero := isZero(b[:g])
		end := g
		for end < int64(len(b)) {
			c := min(int64(len(b))-end, zeroGrain)
			if isZero(b[end:end+c]) != zero {
				break
			}
			end += c
		}
		if zero {
			if err := p.sink.Zero(off, end); err != nil {
				return err
			}
			p.zeroed.Add(end)
		} else {
			if _, err := p.sink.WriteAt(b[:end], off); err != nil {
				return err
			}
			p.written.Add(end)
		}
		b, off = b[end:], off+end
	}
	return nil
}

func (p *pipeline) report(n int64) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	p.done += n
	if p.progress != nil {
		p.progress(p.done, p.total)
	}
}

// writeHead writes the held-back start of the disk.
func (p *pipeline) writeHead() error {
	if p.headLen == 0 {
		return nil
	}
	p.touched.Store(true)
	b := p.head[:p.headLen]
	if err := p.writeRuns(b, 0); err != nil {
		return err
	}
	p.head = nil
	return nil
}

// produceStream cuts r into chunks and hands them to the writers; it returns
// the stream's length.
func (p *pipeline) produceStream(r io.Reader) (int64, error) {
	var off int64
	for {
		buf, err := p.get()
		if err != nil {
			return off, err
		}
		n, err := fill(r, buf)
		if n > 0 {
			if perr := p.put(piece{off: off, buf: buf, n: n}); perr != nil {
				return off, perr
			}
			off += int64(n)
		} else {
			p.free <- buf
		}
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// fill reads into b until it is full or r fails, returning r's own error:
// unlike io.ReadFull it never reports a reader's io.ErrUnexpectedEOF (a
// decompressor's word for a truncated stream) as a short final chunk, and
// it returns io.EOF only when r said so.
func fill(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// prefetch reads src on its own goroutine, hashing what it reads, so the
// download and the hash run alongside decoding and writing.
type prefetch struct {
	ctx   context.Context
	ch    chan []byte
	free  chan []byte
	err   error // set before ch is closed
	cur   []byte
	spare []byte
}

func newPrefetch(ctx context.Context, src io.Reader, h hash.Hash) *prefetch {
	f := &prefetch{ctx: ctx, ch: make(chan []byte, fetchBufs-2), free: make(chan []byte, fetchBufs)}
	for range fetchBufs {
		f.free <- make([]byte, fetchChunk)
	}
	go func() {
		defer close(f.ch)
		for {
			var b []byte
			select {
			case b = <-f.free:
			case <-ctx.Done():
				f.err = ctx.Err()
				return
			}
			n, err := io.ReadFull(src, b)
			if n > 0 {
				h.Write(b[:n])
				select {
				case f.ch <- b[:n]:
				case <-ctx.Done():
					f.err = ctx.Err()
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return
			}
			if err != nil {
				f.err = err
				return
			}
		}
	}()
	return f
}

func (f *prefetch) Read(p []byte) (int, error) {
	if len(f.cur) == 0 {
		if f.spare != nil {
			f.free <- f.spare[:cap(f.spare)]
			f.spare = nil
		}
		b, ok := <-f.ch
		if !ok {
			if f.err != nil {
				return 0, f.err
			}
			return 0, io.EOF
		}
		f.cur, f.spare = b, b
	}
	n := copy(p, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}
