// Command kiln-imgwrite drives agent/image outside the agent, for benchmarks
// and lab use:
//
//	kiln-imgwrite write -url URL -target DEV [-checksum HEX|URL] [-algo sha256] [-allow-dir DIR]
//	kiln-imgwrite serve -dir DIR -addr :8090
//
// serve is a plain static file server with Range support (http.FileServer),
// standing in for the controller's image server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/kilnhq/kiln/agent/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-imgwrite:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: kiln-imgwrite write|serve [flags]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch args[0] {
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		dir := fs.String("dir", ".", "directory to serve")
		addr := fs.String("addr", "127.0.0.1:8090", "listen address")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		srv := &http.Server{Addr: *addr, Handler: http.FileServer(http.Dir(*dir))}
		go func() { <-ctx.Done(); srv.Close() }()
		slog.Info("serving", "dir", *dir, "addr", *addr)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case "write":
		fs := flag.NewFlagSet("write", flag.ContinueOnError)
		url := fs.String("url", "", "image URL (http, https, file)")
		target := fs.String("target", "", "block device or file")
		sum := fs.String("checksum", "", "hex checksum or checksum-file URL")
		algo := fs.String("algo", "", "checksum algorithm (default: by length)")
		allowDir := fs.String("allow-dir", "", "directory file:// URLs may read")
		quiet := fs.Bool("q", false, "no progress output")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		cs, err := image.ParseChecksum(*algo, *sum, false)
		if err != nil {
			return err
		}
		var last time.Time
		req := image.Request{URL: *url, Checksum: cs, Target: *target, AllowedFileDir: *allowDir}
		if !*quiet {
			req.Progress = func(done, total int64) {
				if time.Since(last) > time.Second {
					last = time.Now()
					fmt.Fprintf(os.Stderr, "%d / %d MiB\n", done>>20, total>>20)
				}
			}
		}
		res, err := image.Write(ctx, req)
		if err != nil {
			return err
		}
		fmt.Printf("format=%s size=%d written=%d zeroed=%d %s=%s duration=%s MiB/s=%.0f\n",
			res.Format, res.Size, res.Written, res.Zeroed, res.Checksum.Algo, res.Checksum.Value,
			res.Duration.Round(time.Millisecond), float64(res.Size)/(1<<20)/res.Duration.Seconds())
		return nil
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}
