package modload

import (
	"context"
	"errors"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadOrder(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		wantErr  bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "comments and blanks", in: "# deps first\n\nvirtio_ring.ko\n  virtio.ko  \n", want: []string{"virtio_ring.ko", "virtio.ko"}},
		{name: "path", in: "../etc/passwd\n", wantErr: true},
		{name: "dir", in: "kernel/virtio.ko\n", wantErr: true},
		{name: "dotdot", in: "..\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadOrder(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadOrderAndFailures(t *testing.T) {
	dir := t.TempDir()
	order := "a.ko\nbad.ko\nmissing.ko\nnodev.ko\nb.ko\n"
	if err := os.WriteFile(filepath.Join(dir, "order"), []byte(order), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.ko", "bad.ko", "b.ko", "nodev.ko"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	errBad := errors.New("exec format error")
	insert := func(f *os.File) error {
		seen = append(seen, filepath.Base(f.Name()))
		switch filepath.Base(f.Name()) {
		case "bad.ko":
			return errBad
		case "nodev.ko":
			return unix.ENODEV // nothing here for it to drive: absent, not failed
		}
		return nil
	}
	loaded, err := Load(context.Background(), nil, dir, insert)
	if !reflect.DeepEqual(seen, []string{"a.ko", "bad.ko", "nodev.ko", "b.ko"}) {
		t.Errorf("insert called for %q", seen)
	}
	if !reflect.DeepEqual(loaded, []string{"a.ko", "b.ko"}) {
		t.Errorf("loaded = %q", loaded)
	}
	if !errors.Is(err, errBad) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want both the insert failure and the missing file", err)
	}
	if errors.Is(err, unix.ENODEV) {
		t.Errorf("err = %v: a module with nothing to drive (ENODEV) is absent, not a failure", err)
	}
}

func TestLoadNoOrderFile(t *testing.T) {
	if _, err := Load(context.Background(), nil, t.TempDir(), func(*os.File) error { return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist", err)
	}
}

func TestLoadCanceled(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "order"), []byte("a.ko\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, nil, dir, func(*os.File) error { t.Error("insert after cancel"); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
