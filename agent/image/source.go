package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SourceOptions says how to reach an image.
type SourceOptions struct {
	// Client does the HTTP requests; nil means NewHTTPClient("", nil).
	Client *http.Client
	// AllowedFileDir is the only directory file:// URLs may point into;
	// empty refuses file:// altogether.
	AllowedFileDir string
	// Retries is how many times in a row a failed request is retried before
	// giving up (IPA: 9); 0 means 9, negative means none.
	Retries int
	// RetryDelay is the wait between retries; 0 means 2 s.
	RetryDelay time.Duration
}

// NewHTTPClient returns a client for image downloads that trusts the PEM
// certificates in caPEM on top of the system pool, and goes through proxy
// (an http(s) URL) if set, else through the environment's proxy settings.
func NewHTTPClient(proxy string, caPEM []byte) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 8
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil {
			return nil, fmt.Errorf("parse proxy URL: %w", err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	if len(caPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("load CA certificates: no PEM certificate found")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	// No overall timeout: an image download takes as long as it takes; a
	// stalled connection is caught by the response-header timeout and by the
	// caller's context.
	tr.ResponseHeaderTimeout = 60 * time.Second
	return &http.Client{Transport: tr}, nil
}

// Source is an image at a URL: a sequential stream that survives dropped
// connections (it resumes with Range requests where IPA restarts the whole
// download), and, for formats that need it, an io.ReaderAt.
type Source struct {
	url     string
	opts    SourceOptions
	size    int64 // -1 if unknown
	file    *os.File
	ranges  bool   // server honours Range
	etag    string // validator for resumed and ranged requests
	lastMod string

	mu    sync.Mutex
	first io.ReadCloser // body of the initial GET, handed to the first Stream
}

// OpenSource starts fetching rawURL (http, https, or file under
// opts.AllowedFileDir).
func OpenSource(ctx context.Context, rawURL string, opts SourceOptions) (*Source, error) {
	if opts.Retries == 0 {
		opts.Retries = 9
	}
	if opts.RetryDelay == 0 {
		opts.RetryDelay = 2 * time.Second
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse image URL: %w", err)
	}
	s := &Source{url: rawURL, opts: opts, size: -1}
	switch u.Scheme {
	case "file":
		if err := s.openFile(u); err != nil {
			return nil, err
		}
		return s, nil
	case "http", "https":
	default:
		return nil, fmt.Errorf("open image %s: unsupported URL scheme %q", rawURL, u.Scheme)
	}
	if s.opts.Client == nil {
		if s.opts.Client, err = NewHTTPClient("", nil); err != nil {
			return nil, err
		}
	}
	resp, err := s.get(ctx, 0, -1, true)
	if err != nil {
		return nil, fmt.Errorf("fetch image %s: %w", rawURL, err)
	}
	s.first = resp.Body
	s.size = resp.ContentLength
	s.ranges = resp.Header.Get("Accept-Ranges") == "bytes"
	s.etag = resp.Header.Get("ETag")
	if strings.HasPrefix(s.etag, "W/") {
		s.etag = "" // weak validators are not allowed in If-Range
	}
	s.lastMod = resp.Header.Get("Last-Modified")
	return s, nil
}

func (s *Source) openFile(u *url.URL) error {
	if s.opts.AllowedFileDir == "" {
		return fmt.Errorf("open image %s: file:// URLs are not allowed", s.url)
	}
	dir, err := filepath.EvalSymlinks(s.opts.AllowedFileDir)
	if err != nil {
		return fmt.Errorf("open image %s: allowed directory: %w", s.url, err)
	}
	p, err := filepath.EvalSymlinks(filepath.Clean(u.Path))
	if err != nil {
		return fmt.Errorf("open image %s: %w", s.url, err)
	}
	if rel, err := filepath.Rel(dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return fmt.Errorf("open image %s: %s is outside the allowed directory %s", s.url, p, dir)
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open image %s: %w", s.url, err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("open image %s: not a regular file", s.url)
	}
	s.file, s.size, s.ranges = f, st.Size(), true
	return nil
}

// Size is the image's size as served, or -1 if the server did not say.
func (s *Source) Size() int64 { return s.size }

// Close releases the source's connection or file.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first != nil {
		s.first.Close()
		s.first = nil
	}
	if s.file != nil {
		return s.file.Close()
	}
	return nil
}

// httpStatusError is a non-retryable HTTP failure.
type httpStatusError struct{ status string }

func (e *httpStatusError) Error() string { return "HTTP " + e.status }

// get does one GET of [off, end] (end -1: to the end), retrying transient
// failures. whole is true for the initial request, which takes a 200.
func (s *Source) get(ctx context.Context, off, end int64, whole bool) (*http.Response, error) {
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt > s.opts.Retries {
				return nil, fmt.Errorf("after %d attempts: %w", attempt, lastErr)
			}
			if err := sleep(ctx, s.opts.RetryDelay); err != nil {
				return nil, err
			}
		}
		resp, err := s.getOnce(ctx, off, end, whole)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if permanent(err) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// permanent reports errors that retrying cannot fix: HTTP statuses other
// than 5xx/408/429 and TLS certificate failures.
func permanent(err error) bool {
	var se *httpStatusError
	var ce *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	return errors.As(err, &se) || errors.As(err, &ce) || errors.As(err, &ua) || errors.As(err, &hn)
}

func (s *Source) getOnce(ctx context.Context, off, end int64, whole bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	if !whole {
		r := "bytes=" + strconv.FormatInt(off, 10) + "-"
		if end >= 0 {
			r += strconv.FormatInt(end, 10)
		}
		req.Header.Set("Range", r)
		if s.etag != "" {
			req.Header.Set("If-Range", s.etag)
		} else if s.lastMod != "" {
			req.Header.Set("If-Range", s.lastMod)
		}
	}
	// Compressed transfer would make the hashed bytes differ from the served file.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	switch {
	case whole && resp.StatusCode == http.StatusOK:
		return resp, nil
	case !whole && resp.StatusCode == http.StatusPartialContent:
		if start, ok := contentRangeStart(resp.Header.Get("Content-Range")); !ok || start != off {
			resp.Body.Close()
			return nil, fmt.Errorf("bad Content-Range %q for a request from %d", resp.Header.Get("Content-Range"), off)
		}
		return resp, nil
	case !whole && resp.StatusCode == http.StatusOK:
		resp.Body.Close()
		return nil, &httpStatusError{"200 to a Range request: the server does not support ranges or the image changed"}
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return nil, &httpStatusError{resp.Status}
}

func contentRangeStart(h string) (int64, bool) {
	h, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(h, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stream returns the image's bytes from the start. Over HTTP a dropped
// connection is resumed where it stopped with a Range request, so each byte
// is delivered exactly once.
func (s *Source) Stream(ctx context.Context) io.ReadCloser {
	if s.file != nil {
		return io.NopCloser(io.NewSectionReader(s.file, 0, s.size))
	}
	s.mu.Lock()
	body := s.first
	s.first = nil
	s.mu.Unlock()
	return &stream{ctx: ctx, s: s, body: body}
}

type stream struct {
	ctx      context.Context
	s        *Source
	body     io.ReadCloser
	off      int64
	failures int
	done     bool
}

func (r *stream) Read(p []byte) (int, error) {
	for {
		if r.done {
			return 0, io.EOF
		}
		if r.body == nil {
			if err := r.reopen(); err != nil {
				return 0, err
			}
		}
		n, err := r.body.Read(p)
		r.off += int64(n)
		if n > 0 {
			r.failures = 0
		}
		if err == nil {
			return n, nil
		}
		if err == io.EOF && (r.s.size < 0 || r.off == r.s.size) {
			r.done = true
			return n, io.EOF
		}
		if err == io.EOF || r.s.size >= 0 && r.off > r.s.size {
			err = fmt.Errorf("connection ended at byte %d of %d", r.off, r.s.size)
		}
		r.body.Close()
		r.body = nil
		if r.ctx.Err() != nil {
			return n, r.ctx.Err()
		}
		r.failures++
		if r.failures > r.s.opts.Retries {
			return n, fmt.Errorf("read image %s at byte %d: %w", r.s.url, r.off, err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (r *stream) reopen() error {
	if r.failures > 0 {
		if err := sleep(r.ctx, r.s.opts.RetryDelay); err != nil {
			return err
		}
	}
	// Resuming is tried even without Accept-Ranges: servers that do not
	// advertise ranges often honour them, and a 200 is refused anyway.
	resp, err := r.s.get(r.ctx, r.off, -1, r.off == 0)
	if err != nil {
		return fmt.Errorf("resume image %s at byte %d: %w", r.s.url, r.off, err)
	}
	r.body = resp.Body
	return nil
}

func (r *stream) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	return nil
}
