package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"github.com/kilnhq/kiln/controller/client"
	"github.com/kilnhq/kiln/controller/secrets"
)

// DefaultEndpoint is where the CLI looks for a controller when nothing says otherwise.
const DefaultEndpoint = "http://127.0.0.1:6385"

// cliOptions are the connection and output settings every client command shares.
type cliOptions struct {
	url, authType, username, password, config, output string
	cacert                                            string
	insecure                                          bool
}

// fileConfig is ~/.config/kiln/config.yaml.
type fileConfig struct {
	URL      string `yaml:"url"`
	AuthType string `yaml:"auth_type"`
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	CACert   string `yaml:"cacert"`
	Insecure bool   `yaml:"insecure"`
}

// addClientFlags puts the shared flags on a top-level client command.
func addClientFlags(cmd *cobra.Command, o *cliOptions) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.url, "url", "", "controller URL (default: $KILN_URL, $OS_ENDPOINT, the config file, then "+DefaultEndpoint+")")
	f.StringVar(&o.authType, "auth-type", "", "none or http_basic (default: $OS_AUTH_TYPE, the config file, then none)")
	f.StringVar(&o.username, "username", "", "HTTP basic user (default: $OS_USERNAME)")
	f.StringVar(&o.password, "password", "", "HTTP basic password (default: $OS_PASSWORD)")
	f.StringVar(&o.config, "config", "", "config file (default: $KILN_CONFIG, else ~/.config/kiln/config.yaml)")
	f.StringVar(&o.cacert, "os-cacert", "", "PEM CA bundle that signed the controller's certificate (default: $OS_CACERT, the config file)")
	f.BoolVar(&o.insecure, "insecure", false, "do not verify the controller's TLS certificate")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
}

func configPath(o *cliOptions) string {
	if o.config != "" {
		return o.config
	}
	if p := os.Getenv("KILN_CONFIG"); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kiln", "config.yaml")
}

// resolve merges flags, environment and config file, in that order of precedence.
func (o *cliOptions) resolve() (endpoint string, opts client.Options, err error) {
	var fc fileConfig
	if p := configPath(o); p != "" {
		b, rerr := os.ReadFile(p)
		switch {
		case rerr == nil:
			if err := yaml.Unmarshal(b, &fc); err != nil {
				return "", opts, fmt.Errorf("read config file %s: %w", p, err)
			}
		case o.config != "" || !errors.Is(rerr, os.ErrNotExist):
			return "", opts, fmt.Errorf("read config file: %w", rerr)
		}
	}
	first := func(vs ...string) string {
		for _, v := range vs {
			if v != "" {
				return v
			}
		}
		return ""
	}
	endpoint = first(o.url, os.Getenv("KILN_URL"), os.Getenv("OS_ENDPOINT"), fc.URL, DefaultEndpoint)
	auth := first(o.authType, os.Getenv("OS_AUTH_TYPE"), fc.AuthType, "none")
	switch auth {
	case "none", "noauth":
	case "http_basic":
		opts.Username = first(o.username, os.Getenv("OS_USERNAME"), fc.Username)
		opts.Password = first(o.password, os.Getenv("OS_PASSWORD"), fc.Password)
		if opts.Username == "" {
			return "", opts, errors.New("auth type http_basic needs a user name (--username, OS_USERNAME or the config file)")
		}
	default:
		return "", opts, fmt.Errorf("unsupported auth type %q: use none or http_basic", auth)
	}
	opts.CACertFile = first(o.cacert, os.Getenv("OS_CACERT"), fc.CACert)
	opts.Insecure = o.insecure || fc.Insecure
	switch o.output {
	case "table", "json", "yaml":
	default:
		return "", opts, fmt.Errorf("invalid --output %q: use table, json or yaml", o.output)
	}
	return endpoint, opts, nil
}

func (o *cliOptions) client() (*client.Client, error) {
	endpoint, opts, err := o.resolve()
	if err != nil {
		return nil, err
	}
	return client.New(endpoint, opts)
}

// printer writes results in the chosen format.
type printer struct {
	w      io.Writer
	format string
}

func (o *cliOptions) printer(cmd *cobra.Command) printer {
	return printer{w: cmd.OutOrStdout(), format: o.output}
}

// toGeneric turns a value into plain maps and slices (JSON field names), so
// YAML output uses the same keys as JSON.
func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	return g, nil
}

// data prints v as JSON or YAML; it reports false for table output.
func (p printer) data(v any) (bool, error) {
	v = safeView(v)
	switch p.format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return true, err
	case "yaml":
		g, err := toGeneric(v)
		if err != nil {
			return true, err
		}
		enc := yaml.NewEncoder(p.w)
		enc.SetIndent(2)
		if err := enc.Encode(g); err != nil {
			return true, err
		}
		return true, enc.Close()
	}
	return false, nil
}

// row is one line of a list: column key → value.
type row = map[string]any

// list prints rows: a table with headers, or a list of objects keyed by column.
func (p printer) list(cols []column, rows []row) error {
	if p.format != "table" {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			m := map[string]any{}
			for _, c := range cols {
				m[c.key] = r[c.key]
			}
			out = append(out, m)
		}
		_, err := p.data(out)
		return err
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	var hdr []string
	for _, c := range cols {
		hdr = append(hdr, c.title)
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for _, r := range rows {
		var cells []string
		for _, c := range cols {
			cells = append(cells, cell(r[c.key]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// object prints one resource: a Field/Value table, or the whole document.
func (p printer) object(v any) error {
	if done, err := p.data(v); done {
		return err
	}
	g, err := toGeneric(safeView(v))
	if err != nil {
		return err
	}
	m, ok := g.(map[string]any)
	if !ok {
		_, err := fmt.Fprintln(p.w, cell(g))
		return err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k == "links" || k == "ports" || k == "states" || k == "portgroups" || k == "volume" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIELD\tVALUE")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", k, cell(m[k]))
	}
	return tw.Flush()
}

type column struct{ key, title string }

// cell renders a value for a table: strings as is, null as empty, the rest as JSON.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return secrets.Scrub(x)
	case *string:
		if x == nil {
			return ""
		}
		return secrets.Scrub(*x)
	}
	v = safeView(v)
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if s == "null" {
		return ""
	}
	return strings.Trim(s, `"`)
}

// isTerminal reports whether w is an interactive terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errFailed is returned when a command reported its failures itself; main
// exits non-zero without printing more.
type errFailed struct{ msg string }

func (e errFailed) Error() string { return e.msg }
