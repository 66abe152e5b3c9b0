package boot

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"strings"
)

// NewFileServer serves the regular files in dir (deploy kernels, ramdisks,
// ISOs) by name, with Range and conditional requests (http.ServeContent):
// iPXE, firmware HTTP boot and BMC virtual media all fetch ranges or resume.
// It serves no listings, no dot files, and nothing outside dir: the lookup
// goes through os.Root, so neither ".." nor a symlink can escape. Mount it
// with http.StripPrefix so the request path is the file's path in dir.
func NewFileServer(dir string) (http.Handler, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &fileServer{root: root}, nil
}

type fileServer struct{ root *os.Root }

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := cleanName(r.URL.Path)
	if !ok {
		http.Error(w, "bad file name", http.StatusBadRequest)
		return
	}
	f, err := s.root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			http.NotFound(w, r)
			return
		}
		// Escapes through symlinks land here too.
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// cleanName turns a request path into a relative name inside the served
// directory, refusing empty names, "..", "." and dot files in any segment,
// and backslashes.
func cleanName(p string) (string, bool) {
	p = strings.TrimPrefix(p, "/")
	if p == "" || strings.ContainsAny(p, "\\\x00") {
		return "", false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || strings.HasPrefix(seg, ".") {
			return "", false
		}
	}
	return p, true
}
