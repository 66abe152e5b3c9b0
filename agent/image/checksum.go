package image

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Checksum is what an operator says the image's bytes (as served, before any
// decompression or conversion) hash to. Either Value is set, or URL names a
// checksum file that still has to be resolved with ResolveChecksumFile.
type Checksum struct {
	Algo  string // "sha256", "sha512" or "md5"
	Value string // lower-case hex
	URL   string // checksum file to fetch instead of Value
}

func (c Checksum) String() string {
	if c.URL != "" {
		return "checksum file " + c.URL
	}
	return c.Algo + ":" + c.Value
}

var hexLenAlgo = map[int]string{32: "md5", 64: "sha256", 128: "sha512"}

// ParseChecksum reads Ironic's two ways of giving a checksum: image_os_hash_algo
// plus image_os_hash_value, or image_checksum alone (a hex value whose length
// names the algorithm, or the http(s) URL of a checksum file). md5 is refused
// unless allowMD5, as IPA does.
func ParseChecksum(algo, value string, allowMD5 bool) (Checksum, error) {
	value = strings.TrimSpace(value)
	algo = strings.ToLower(strings.TrimSpace(algo))
	if value == "" {
		return Checksum{}, errors.New("parse checksum: no checksum given")
	}
	if strings.HasPrefix(value, "http://") || strings.HasPrefix(value, "https://") {
		if _, err := url.Parse(value); err != nil {
			return Checksum{}, fmt.Errorf("parse checksum file URL: %w", err)
		}
		return Checksum{Algo: algo, URL: value}, checkAlgo(algo, allowMD5, true)
	}
	value = strings.ToLower(value)
	if _, err := hex.DecodeString(value); err != nil {
		return Checksum{}, fmt.Errorf("parse checksum %q: not hex", value)
	}
	byLen, ok := hexLenAlgo[len(value)]
	if algo == "" {
		if !ok {
			return Checksum{}, fmt.Errorf("parse checksum %q: %d hex digits match no algorithm", value, len(value))
		}
		algo = byLen
	} else if algo != byLen {
		return Checksum{}, fmt.Errorf("parse checksum: a %s value has %d hex digits, got %d", algo, 2*newHashLen(algo), len(value))
	}
	return Checksum{Algo: algo, Value: value}, checkAlgo(algo, allowMD5, false)
}

func checkAlgo(algo string, allowMD5, emptyOK bool) error {
	switch algo {
	case "sha256", "sha512":
		return nil
	case "md5":
		if allowMD5 {
			return nil
		}
		return errors.New("parse checksum: md5 is not allowed")
	case "":
		if emptyOK {
			return nil
		}
	}
	return fmt.Errorf("parse checksum: unsupported algorithm %q", algo)
}

func newHashLen(algo string) int {
	if h := newHash(algo); h != nil {
		return h.Size()
	}
	return 0
}

func newHash(algo string) hash.Hash {
	switch algo {
	case "md5":
		return md5.New()
	case "sha256":
		return sha256.New()
	case "sha512":
		return sha512.New()
	}
	return nil
}

// maxChecksumFile bounds what is read of a checksum file: they list a few
// hundred images at most.
const maxChecksumFile = 4 << 20

// ResolveChecksumFile fetches the checksum file c.URL and returns the checksum
// it gives for imageURL: the line naming the image's file name (sha256sum,
// "HASH *name" and BSD "SHA256 (name) = HASH" styles), or the only checksum
// of a file that holds just one.
func ResolveChecksumFile(ctx context.Context, client *http.Client, c Checksum, imageURL string, allowMD5 bool) (Checksum, error) {
	if c.URL == "" {
		return c, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return Checksum{}, fmt.Errorf("fetch checksum file %s: %w", c.URL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Checksum{}, fmt.Errorf("fetch checksum file %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Checksum{}, fmt.Errorf("fetch checksum file %s: HTTP %s", c.URL, resp.Status)
	}
	value, err := pickChecksum(io.LimitReader(resp.Body, maxChecksumFile), imageName(imageURL))
	if err != nil {
		return Checksum{}, fmt.Errorf("checksum file %s: %w", c.URL, err)
	}
	return ParseChecksum(c.Algo, value, allowMD5)
}

func imageName(imageURL string) string {
	if u, err := url.Parse(imageURL); err == nil {
		return path.Base(u.Path)
	}
	return path.Base(imageURL)
}

// pickChecksum returns the hex value for name from a checksum file.
func pickChecksum(r io.Reader, name string) (string, error) {
	var only []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		value, file := splitChecksumLine(line)
		if value == "" {
			continue
		}
		if file != "" && path.Base(file) == name {
			return value, nil
		}
		only = append(only, value)
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	if len(only) == 1 {
		return only[0], nil
	}
	return "", fmt.Errorf("no line names %q", name)
}

// splitChecksumLine parses "HEX  name", "HEX *name", "HEX" and
// "ALGO (name) = HEX"; value is "" if the line is none of these.
func splitChecksumLine(line string) (value, file string) {
	if i := strings.Index(line, ") = "); i > 0 {
		if j := strings.Index(line, " ("); j > 0 && j < i {
			return hexOrEmpty(strings.TrimSpace(line[i+4:])), line[j+2 : i]
		}
	}
	fields := strings.Fields(line)
	switch len(fields) {
	case 1:
		return hexOrEmpty(fields[0]), ""
	case 0:
		return "", ""
	}
	return hexOrEmpty(fields[0]), strings.TrimPrefix(strings.TrimSpace(line[len(fields[0]):]), "*")
}

func hexOrEmpty(s string) string {
	if _, ok := hexLenAlgo[len(s)]; !ok {
		return ""
	}
	if _, err := hex.DecodeString(s); err != nil {
		return ""
	}
	return strings.ToLower(s)
}

// ChecksumMismatchError is returned when the image's bytes do not hash to
// what the operator gave.
type ChecksumMismatchError struct {
	Algo, Expected, Actual string
}

func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("image checksum mismatch: %s expected %s, got %s", e.Algo, e.Expected, e.Actual)
}
