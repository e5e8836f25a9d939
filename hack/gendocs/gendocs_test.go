// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// machineTree is a CLI whose defaults depend on the machine as the real
// one's do: the server's data dir, the core count, the home directory and
// the host name.
func machineTree(m machine) *cobra.Command {
	root := &cobra.Command{Use: "kubestellar"}
	root.PersistentFlags().Int("verbosity", 0, "log level")
	server := &cobra.Command{Use: "server", Short: "the server"}
	start := &cobra.Command{Use: "start", Short: "run it", Long: "Run the server.\n\n#### Heading-like\n\n\tsource <(kubestellar completion bash)\n\nNamed <NAME>.", RunE: func(*cobra.Command, []string) error { return nil }}
	start.Flags().String("data-dir", m.serverDataDir, "the data dir")
	start.Flags().String("kubeconfig", "", "default: the admin kubeconfig of "+m.serverDataDir+", not "+m.serverDataDir+"/db")
	start.Flags().Int("max-requests-inflight", 2*m.cpus, "reads")
	start.Flags().Int("max-mutating-requests-inflight", 7, "writes: a fixed default")
	start.Flags().String("cache", filepath.Join(m.home, ".cache"), "cache | of "+m.hostname)
	start.Flags().String("syncer-dir", "/var/lib/kubestellar-syncer/X", "not the server's data dir")
	start.Flags().StringP("output", "o", "", "one of `FORMAT`s")
	start.Flags().Bool("hidden", false, "hidden")
	_ = start.Flags().MarkHidden("hidden")
	server.AddCommand(start)
	root.AddCommand(server)
	return root
}

func TestCLIPagesDoNotDependOnTheMachine(t *testing.T) {
	asRoot := machine{home: "/root", hostname: "alpha", serverDataDir: "/var/lib/kubestellar", cpus: 2}
	asUser := machine{home: "/home/ann", hostname: "beta", serverDataDir: "/home/ann/.kubestellar", cpus: 64}
	a := cliPages(machineTree(asRoot), asRoot)
	b := cliPages(machineTree(asUser), asUser)
	require.Equal(t, a, b)

	page := string(a["docs/reference/commands/server.md"])
	for _, want := range []string{
		"| `--data-dir string` | /var/lib/kubestellar as root, else ~/.kubestellar | the data dir |",
		"default: the admin kubeconfig of /var/lib/kubestellar as root, else ~/.kubestellar, not DATA_DIR/db |",
		"| `--max-requests-inflight int` | 2 per core | reads |",
		"| `--max-mutating-requests-inflight int` | `7` | writes: a fixed default |",
		"| `--cache string` | ~/.cache | cache \\| of HOSTNAME |",
		"| `--syncer-dir string` | `/var/lib/kubestellar-syncer/X` |",
		"| `-o, --output FORMAT` |  | one of FORMATs |",
		"```\nkubestellar server start [flags]\n```",
		"\\#### Heading-like",
		"\tsource <(kubestellar completion bash)",
		"Named &lt;NAME&gt;.",
		"Global flags: `--verbosity` (see [kubestellar](README.md#global-flags)).",
	} {
		require.Contains(t, page, want)
	}
	require.NotContains(t, page, "--hidden")
	require.NotContains(t, page, "alpha")
	require.NotContains(t, page, "/home/ann")
	require.Contains(t, string(a["docs/reference/commands/README.md"]), "| [kubestellar server start](server.md#kubestellar-server-start) | run it |")
}

func TestReplacePath(t *testing.T) {
	for _, tc := range []struct{ in, path, want string }{
		{in: "/var/lib/kubestellar", path: "/var/lib/kubestellar", want: "W"},
		{in: "of /var/lib/kubestellar.", path: "/var/lib/kubestellar", want: "of W."},
		{in: "/var/lib/kubestellar-syncer/A", path: "/var/lib/kubestellar", want: "/var/lib/kubestellar-syncer/A"},
		{in: "/var/lib/kubestellar.d", path: "/var/lib/kubestellar", want: "/var/lib/kubestellar.d"},
		{in: "/var/lib/kubestellar/db", path: "/var/lib/kubestellar", want: "U/db"},
		{in: "/srv/var/lib/kubestellar", path: "/var/lib/kubestellar", want: "/srv/var/lib/kubestellar"},
		{in: "/root/.kube, /root", path: "/root", want: "U/.kube, W"},
		{in: "/rooted", path: "/root", want: "/rooted"},
		{in: "anything", path: "/", want: "anything"},
	} {
		require.Equal(t, tc.want, replacePath(tc.in, tc.path, "W", "U"), "%q in %q", tc.path, tc.in)
	}
}

// TestCLIPagesListEveryCommandAndFlag checks the pages of the real CLI:
// each command has its heading, and each of its flags a row.
func TestCLIPagesListEveryCommandAndFlag(t *testing.T) {
	root := cli()
	pages := cliPages(root, thisMachine())
	var walk func(c *cobra.Command, page string)
	count := 0
	walk = func(c *cobra.Command, page string) {
		for _, sub := range available(c) {
			p := page
			if p == "" {
				p = filepath.Join(commandsDir, sub.Name()+".md")
			}
			content := string(pages[p])
			require.NotEmpty(t, content, "no page %s for %s", p, sub.CommandPath())
			require.Regexp(t, "(?m)^#+ "+sub.CommandPath()+"$", content)
			sub.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && sub.Runnable() {
					require.Contains(t, content, "--"+f.Name+"", "%s --%s", sub.CommandPath(), f.Name)
				}
			})
			count++
			walk(sub, p)
		}
	}
	walk(root, "")
	require.Greater(t, count, 20, "the CLI has more commands than that")
	require.Contains(t, string(pages[filepath.Join(commandsDir, "server.md")]), "## kubestellar server start\n")
	require.Contains(t, string(pages[filepath.Join(commandsDir, "completion.md")]), "## kubestellar completion bash\n")
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func TestAPIPage(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"apis/widgets/v1/doc.go": `// Package v1 is the widgets API.
//
// +groupName=widgets.example.io
package v1
`,
		"apis/widgets/v1/zz_generated.deepcopy.go": "package v1\n\ntype Generated struct{}\n",
		"apis/widgets/v1/widget_types.go": `package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Widget is a thing with <parts>.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=wd
// +kubebuilder:subresource:status
type Widget struct {
	metav1.TypeMeta   ` + "`json:\",inline\"`" + `
	metav1.ObjectMeta ` + "`json:\"metadata,omitempty\"`" + `

	Spec WidgetSpec ` + "`json:\"spec\"`" + `
	// +optional
	Status *WidgetStatus ` + "`json:\"status,omitempty\"`" + `
}

// WidgetSpec is what the user asks.
type WidgetSpec struct {
	// Size is how big | how small.
	// +kubebuilder:validation:Minimum=1
	Size int32 ` + "`json:\"size\"`" + `
	// +optional
	Color Color ` + "`json:\"color,omitempty\"`" + `
	Labels map[string]string ` + "`json:\"labels,omitempty\"`" + `
	Parts []Part ` + "`json:\"parts,omitempty\"`" + `
	Secret string ` + "`json:\"-\"`" + `
	Common ` + "`json:\",inline\"`" + `
}

// Common fields.
type Common struct {
	// Note is inlined.
	Note string ` + "`json:\"note,omitempty\"`" + `
}

// Part is a part.
type Part struct {
	Since metav1.Time ` + "`json:\"since\"`" + `
}

// WidgetStatus is what the server says.
type WidgetStatus struct {
	Conditions []metav1.Condition ` + "`json:\"conditions,omitempty\"`" + `
}

// Color is a color.
// +kubebuilder:validation:Enum=red;blue
type Color string

const (
	// Red is red.
	Red Color = "red"
	Blue Color = "blue"
)

// Annotation is the JSON of an annotation.
type Annotation struct {
	Who string ` + "`json:\"who\"`" + `
}

// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta ` + "`json:\",inline\"`" + `
	metav1.ListMeta ` + "`json:\"metadata,omitempty\"`" + `
	Items []Widget ` + "`json:\"items\"`" + `
}
`,
		"apis/notapi/helper.go": "package notapi\n\ntype Ignored struct{}\n",
	})
	got, err := apiPage(filepath.Join(dir, "apis"))
	require.NoError(t, err)
	page := string(got)
	for _, want := range []string{
		"- [widgets.example.io/v1](#widgetsexampleiov1): [Widget](#widget)\n",
		"## widgets.example.io/v1\n\nPackage v1 is the widgets API.\n",
		"### Widget\n\nWidget is a thing with &lt;parts&gt;.\n\n- apiVersion: `widgets.example.io/v1`, kind: `Widget`\n- namespaced\n- short name: `wd`\n- has a `status` subresource\n",
		"| `spec` | [WidgetSpec](#widgetspec) | *Required.* |",
		"| `status` | [WidgetStatus](#widgetstatus) |  |",
		"#### WidgetSpec\n\nWidgetSpec is what the user asks.\n",
		"| `size` | `int32` | *Required.* Size is how big \\| how small. Minimum: `1`. |",
		"| `color` | [Color](#color) |  |",
		"| `labels` | map of `string` to `string` |  |",
		"| `parts` | list of [Part](#part) |  |",
		"| `note` | `string` | Note is inlined. |",
		"| `since` | [metav1.Time](https://pkg.go.dev/k8s.io/apimachinery/pkg/apis/meta/v1#Time) | *Required.* |",
		"#### Color\n\nColor is a color.\n\nType: `string`.\n\nOne of `red`, `blue`.\n",
		"| `red` | Red is red. |",
		"### Other types\n",
		"#### Annotation\n",
	} {
		require.Contains(t, page, want)
	}
	for _, notWant := range []string{"Secret", "WidgetList", "# Generated", "Ignored", "+kubebuilder", "apiVersion` |"} {
		require.NotContains(t, page, notWant)
	}
	// The kind's types follow it, in the order first used.
	require.Less(t, strings.Index(page, "#### WidgetSpec"), strings.Index(page, "#### Color"))
	require.Less(t, strings.Index(page, "#### Part"), strings.Index(page, "#### WidgetStatus"))
}

// TestAPIPageHasEveryType checks the page of the real API: every exported
// type of every group has its heading, and the page is the same twice.
func TestAPIPageHasEveryType(t *testing.T) {
	apis := filepath.Join("..", "..", "apis")
	page, err := apiPage(apis)
	require.NoError(t, err)
	again, err := apiPage(apis)
	require.NoError(t, err)
	require.Equal(t, page, again)
	pkgs, err := loadAPIPackages(apis)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pkgs), 2)
	for _, p := range pkgs {
		require.Contains(t, string(page), "## "+p.group+"/"+p.version+"\n")
		require.NotEmpty(t, p.kinds(), p.dir)
		for name := range p.types {
			if strings.HasSuffix(name, "List") && p.types[strings.TrimSuffix(name, "List")] != nil {
				continue
			}
			require.Regexp(t, "(?m)^###?# "+name+"$", string(page), "%s.%s", p.dir, name)
		}
	}
}

func TestDiffAndWrite(t *testing.T) {
	dir := t.TempDir()
	pages := map[string][]byte{
		filepath.ToSlash(filepath.Join(commandsDir, "README.md")): []byte("index\n"),
		filepath.ToSlash(filepath.Join(commandsDir, "server.md")): []byte("server\n"),
		apiFile: []byte("api\n"),
	}
	stale, extra, err := diff(dir, pages)
	require.NoError(t, err)
	require.Len(t, stale, 3, "every page is missing")
	require.Empty(t, extra)

	require.NoError(t, write(dir, pages))
	stale, extra, err = diff(dir, pages)
	require.NoError(t, err)
	require.Empty(t, stale)
	require.Empty(t, extra)

	writeFiles(t, dir, map[string]string{
		filepath.Join(commandsDir, "server.md"): "server, edited by hand\n",
		filepath.Join(commandsDir, "gone.md"):   "a command that is no more\n",
		"docs/reference/cli.md":                 "hand-written, not generated\n",
	})
	stale, extra, err = diff(dir, pages)
	require.NoError(t, err)
	require.Equal(t, []string{commandsDir + "/server.md"}, stale)
	require.Equal(t, []string{commandsDir + "/gone.md"}, extra)

	require.NoError(t, write(dir, pages))
	stale, extra, err = diff(dir, pages)
	require.NoError(t, err)
	require.Empty(t, stale)
	require.Empty(t, extra)
	_, err = os.Stat(filepath.Join(dir, "docs/reference/cli.md"))
	require.NoError(t, err, "a page outside the generated folders stays")
}
