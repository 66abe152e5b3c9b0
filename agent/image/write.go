// Package image writes an operating-system image from a URL onto a disk as a
// stream: source → format → checksum → sink, with memory use bounded by a
// fixed number of buffers whatever the image's size (IPA instead stages
// non-raw images in the ramdisk, which caps image size by RAM).
//
// Formats are found from content: raw, qcow2 (read by HTTP ranges through a
// block cache, converted by github.com/lima-vm/go-qcow2reader after our own
// validation), and raw images compressed with gzip, zstd or xz. The checksum
// is taken over the bytes as served, inline for sequential formats and by a
// concurrent sequential read for qcow2. On any failure after the disk was
// touched, its first and last MiB are zeroed so the node cannot boot a
// half-written image.
//
// The package is a plain library with no dependency on the agent's runtime.
package image

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"time"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	qimage "github.com/lima-vm/go-qcow2reader/image"
	"github.com/lima-vm/go-qcow2reader/image/qcow2"
	"github.com/ulikunitz/xz"
)

// Request is one image to write.
type Request struct {
	URL      string   // http, https, or file (under AllowedFileDir)
	Checksum Checksum // from ParseChecksum; a checksum-file URL is resolved here
	AllowMD5 bool     // md5 is refused unless set (also for checksum files)
	Target   string   // block device or existing regular file
	// AllowedFileDir is the only directory file:// URLs may point into.
	AllowedFileDir string
	// Progress, if set, is called after each chunk with the image bytes done
	// and the image's size (-1 while unknown, for compressed streams), from
	// the pipeline's goroutines but one call at a time; it must not block.
	Progress func(done, total int64)

	// HTTPClient overrides the client built from CACert and Proxy.
	HTTPClient *http.Client
	CACert     []byte // extra trusted CA certificates, PEM
	Proxy      string // proxy URL; empty uses the environment
	// Retries and RetryDelay as in SourceOptions.
	Retries    int
	RetryDelay time.Duration
}

// Result describes a written image.
type Result struct {
	Format   Format // as served (gzip for a raw.gz)
	Size     int64  // the image's virtual size: bytes of the disk it defines
	Written  int64  // bytes written with data
	Zeroed   int64  // bytes zeroed without writing (zero runs)
	Checksum Checksum
	Duration time.Duration
}

// tooSmallError refuses an image larger than the target.
type tooSmallError struct {
	target     string
	size, need int64
}

func (e *tooSmallError) Error() string {
	return fmt.Sprintf("image needs %d bytes but target %s holds %d", e.need, e.target, e.size)
}

// Write streams the image at req.URL onto req.Target and verifies its
// checksum. Images that cannot be written (unsupported or unsafe formats,
// too large for the target, unreachable) are refused before a byte is
// written; failures after that leave the target's first and last MiB zeroed.
func Write(ctx context.Context, req Request) (res Result, err error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	client := req.HTTPClient
	if client == nil {
		if client, err = NewHTTPClient(req.Proxy, req.CACert); err != nil {
			return res, err
		}
	}
	cs, err := ResolveChecksumFile(ctx, client, req.Checksum, req.URL, req.AllowMD5)
	if err != nil {
		return res, err
	}
	if cs.Algo == "md5" && !req.AllowMD5 {
		return res, fmt.Errorf("write image %s: md5 checksums are not allowed", req.URL)
	}
	h := newHash(cs.Algo)
	if h == nil || cs.Value == "" {
		return res, fmt.Errorf("write image %s: no usable checksum (%s)", req.URL, cs)
	}
	src, err := OpenSource(ctx, req.URL, SourceOptions{Client: client, AllowedFileDir: req.AllowedFileDir, Retries: req.Retries, RetryDelay: req.RetryDelay})
	if err != nil {
		return res, err
	}
	defer src.Close()
	sink, err := OpenSink(req.Target)
	if err != nil {
		return res, err
	}
	defer sink.Close()

	stream := src.Stream(ctx)
	defer stream.Close()
	br := bufio.NewReaderSize(stream, 64<<10)
	head, err := br.Peek(DetectLen)
	if err != nil && err != io.EOF {
		return res, fmt.Errorf("read image %s: %w", req.URL, err)
	}
	if len(head) == 0 {
		return res, fmt.Errorf("write image %s: the image is empty", req.URL)
	}
	res.Format = Detect(head)

	var p *pipeline
	switch {
	case res.Format == FormatQCOW2:
		p, res.Size, err = writeQCOW2(ctx, src, br, h, sink, req.Progress)
	case res.Format == FormatRaw:
		if size := src.Size(); size > sink.Size() {
			return res, fmt.Errorf("write image %s: %w", req.URL, &tooSmallError{target: sink.path, size: sink.Size(), need: size})
		}
		p, res.Size, err = writeStream(ctx, br, h, nil, sink, src.Size(), req.Progress)
	case res.Format.compressed():
		p, res.Size, err = writeStream(ctx, br, h, res.Format, sink, -1, req.Progress)
	default:
		return res, fmt.Errorf("write image %s: %s images are not supported (raw, qcow2, or raw compressed with gzip, zstd or xz)", req.URL, res.Format)
	}
	if p != nil {
		res.Written, res.Zeroed = p.written.Load(), p.zeroed.Load()
	}
	if err == nil {
		res.Checksum = Checksum{Algo: cs.Algo, Value: hex.EncodeToString(h.Sum(nil))}
		if res.Checksum.Value != cs.Value {
			err = &ChecksumMismatchError{Algo: cs.Algo, Expected: cs.Value, Actual: res.Checksum.Value}
		}
	}
	if err == nil {
		err = sink.Sync() // everything but the first MiB is on disk
	}
	if err == nil {
		err = p.writeHead()
		if err == nil {
			res.Written, res.Zeroed = p.written.Load(), p.zeroed.Load()
			err = sink.Sync()
		}
	}
	res.Duration = time.Since(start)
	if err != nil {
		err = fmt.Errorf("write image %s to %s: %w", req.URL, req.Target, err)
		if p != nil && p.touched.Load() {
			if serr := sink.Scrub(); serr != nil {
				err = errors.Join(err, serr)
			} else {
				err = fmt.Errorf("%w; the first and last MiB of %s were zeroed", err, req.Target)
			}
		}
		return res, err
	}
	return res, nil
}

// writeStream writes a raw image, compressed with format if not nil,
// hashing the served bytes as they arrive.
func writeStream(ctx context.Context, r io.Reader, h hash.Hash, format any, sink *Sink, total int64, progress func(int64, int64)) (*pipeline, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pf := newPrefetch(ctx, r, h)
	var img io.Reader = pf
	if f, ok := format.(Format); ok {
		served := &countingReader{r: img}
		dec, err := decompressor(f, served)
		if err != nil {
			return nil, 0, err
		}
		defer dec.Close()
		bd := bufio.NewReaderSize(&checkedStream{format: f, dec: dec, src: served}, 64<<10)
		inner, err := bd.Peek(DetectLen)
		if err != nil && err != io.EOF {
			return nil, 0, err
		}
		if in := Detect(inner); in != FormatRaw {
			return nil, 0, fmt.Errorf("%s inside %s is not supported: only raw images may be compressed", in, f)
		}
		img = bd
	}
	p := newPipeline(ctx, sink, total, progress)
	n, err := p.produceStream(img)
	if err == nil && total >= 0 && n != total {
		err = fmt.Errorf("image ended after %d of %d bytes", n, total)
	}
	if err == nil {
		// The decoder may stop at the end of its data before the source's
		// end; the hash must still cover every served byte.
		if _, cerr := io.Copy(io.Discard, pf); cerr != nil {
			err = cerr
		}
	}
	return p, n, p.finish(err)
}

func decompressor(f Format, r io.Reader) (io.ReadCloser, error) {
	switch f {
	case FormatGzip:
		zr, err := kgzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("open gzip stream: %w", err)
		}
		return zr, nil
	case FormatZstd:
		// A 16 MiB window covers zstd levels up to 19; larger windows (--ultra,
		// --long) would break the memory bound and are refused by the decoder.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(16<<20))
		if err != nil {
			return nil, fmt.Errorf("open zstd stream: %w", err)
		}
		return zr.IOReadCloser(), nil
	case FormatXZ:
		zr, err := xz.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("open xz stream: %w", err)
		}
		return io.NopCloser(zr), nil
	}
	return nil, fmt.Errorf("no decompressor for %s", f)
}

// writeQCOW2 converts a qcow2 image read by ranges, while stream (the same
// file read sequentially) is hashed alongside.
func writeQCOW2(ctx context.Context, src *Source, stream io.Reader, h hash.Hash, sink *Sink, progress func(int64, int64)) (*pipeline, int64, error) {
	if src.Size() < 0 {
		return nil, 0, errors.New("qcow2 image served without a size: cannot read it by ranges")
	}
	ra, err := src.ReaderAt(ctx)
	if err != nil {
		return nil, 0, err
	}
	info, err := validateQCOW2(src.metadataReaderAt(ctx), src.Size())
	if err != nil {
		return nil, 0, fmt.Errorf("refuse qcow2 image: %w", err)
	}
	if info.Size > sink.Size() {
		return nil, info.Size, &tooSmallError{target: sink.path, size: sink.Size(), need: info.Size}
	}
	img, err := qcow2.Open(ra, nil)
	if err != nil {
		return nil, info.Size, fmt.Errorf("open qcow2 image: %w", err)
	}
	if err := img.Readable(); err != nil {
		return nil, info.Size, fmt.Errorf("open qcow2 image: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hashDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		_, err := io.CopyBuffer(h, readerOnly{stream}, buf)
		if err != nil {
			err = fmt.Errorf("hash qcow2 image: %w", err)
		}
		hashDone <- err
	}()

	p := newPipeline(ctx, sink, info.Size, progress)
	jobs := make(chan int64)
	errs := make(chan error, writers)
	for range writers {
		go func() {
			var err error
			for off := range jobs {
				if err == nil {
					err = p.produceQCOW2(img, off, info.Size, info.ClusterBits)
					if err != nil {
						// Fail the pipeline with the cause itself: the
						// feed and the other producers stop, and
						// context.Cause reports this error rather
						// than "context canceled".
						p.fail(err)
					}
				}
			}
			errs <- err
		}()
	}
feed:
	for off := int64(0); off < info.Size; off += chunkSize {
		select {
		case jobs <- off:
		case <-p.ctx.Done():
			break feed
		}
	}
	close(jobs)
	var perr error
	for range writers {
		if e := <-errs; e != nil && perr == nil {
			perr = e
		}
	}
	err = p.finish(perr) // before cancel: the pipeline keeps the first cause
	if err != nil {
		cancel() // stop the hash read too
	}
	if herr := <-hashDone; err == nil {
		err = herr
	}
	return p, info.Size, err
}

// readerOnly hides WriterTo so io.CopyBuffer uses the given buffer.
type readerOnly struct{ io.Reader }

// produceQCOW2 converts the chunk at off: all-zero chunks (unallocated or
// zero clusters) become zero pieces without reading anything.
func (p *pipeline) produceQCOW2(img qimage.Image, off, size int64, clusterBits uint32) error {
	n := min(int64(chunkSize), size-off)
	zero := true
	for pos := off; pos < off+n && zero; {
		ext, err := img.Extent(pos, off+n-pos)
		if err != nil {
			return fmt.Errorf("map qcow2 image at %d: %w", pos, err)
		}
		if ext.Length <= 0 || ext.Start+ext.Length <= pos {
			zero = false // no progress: let ReadAt decide
			break
		}
		zero = ext.Zero
		pos = ext.Start + ext.Length
	}
	if zero {
		return p.put(piece{off: off, n: int(n), zero: true})
	}
	buf, err := p.get()
	if err != nil {
		return err
	}
	if read, err := readFullAt(img, buf[:n], off); err != nil {
		p.free <- buf
		return &ClusterError{Index: (off + read) >> clusterBits, Offset: off + read, Err: err}
	}
	return p.put(piece{off: off, buf: buf, n: int(n)})
}

// readFullAt fills b from ra at off, accepting short reads that end in io.EOF
// before the end as the qcow2 reader returns at some cluster boundaries.
// It returns how many bytes were read before an error.
func readFullAt(ra io.ReaderAt, b []byte, off int64) (int64, error) {
	var read int64
	for len(b) > 0 {
		n, err := ra.ReadAt(b, off)
		b, off, read = b[n:], off+int64(n), read+int64(n)
		if len(b) == 0 {
			return read, nil
		}
		if err != nil && (err != io.EOF || n == 0) {
			return read, err
		}
		if n == 0 {
			return read, io.ErrNoProgress
		}
	}
	return read, nil
}

// ClusterError is a qcow2 cluster that could not be read or decompressed.
type ClusterError struct {
	Index  int64 // the cluster's number in the guest (virtual) disk
	Offset int64 // the guest offset the read failed at
	Err    error // the qcow2 reader's error, with the decompressor's
}

func (e *ClusterError) Error() string {
	return fmt.Sprintf("qcow2 cluster %d (guest offset %d) unreadable: %v", e.Index, e.Offset, e.Err)
}

func (e *ClusterError) Unwrap() error { return e.Err }
