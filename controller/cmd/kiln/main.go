// Command kiln is Kiln's controller (`kiln serve`) and its operator CLI
// (`kiln node …`, `kiln port …`, `kiln driver list`), a client of the
// controller's /v1 API. The main only parses flags and wires packages together.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status: 0 on success,
// 1 when the command (or a node it waited for) failed.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		var ef errFailed
		if !errors.As(err, &ef) || ef.msg != "" {
			fmt.Fprintln(stderr, "kiln:", err)
		}
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kiln",
		Short:         "Kiln provisions bare-metal servers through an Ironic-compatible API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newNodeCmd(), newPortCmd(), newDriverCmd(), newVersionCmd())
	// --version prints what `kiln version` does.
	v := readVersion()
	root.Version = v.Module
	root.SetVersionTemplate(v.String())
	return root
}
