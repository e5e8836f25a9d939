// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubestellar/kubestellar/hack/internal/scratch"
)

const mod = "example.com/m"

func TestCheckImports(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want []string // "from imports to", in order
	}{
		{name: "down the layers", pkgs: []pkg{
			{path: mod + "/server/auth", imports: []string{mod + "/spaces", mod + "/internal/principal", mod + "/dashboard", "fmt"}},
			{path: mod + "/syncer", imports: []string{mod + "/tunnel", mod + "/apis/edge/v2alpha1", "k8s.io/client-go/rest"}},
			{path: mod + "/controllers/status", imports: []string{mod + "/controllers/internal/crossspace"}},
		}},
		{name: "the syncer imports the server", pkgs: []pkg{
			{path: mod + "/syncer", imports: []string{mod + "/server/auth"}},
		}, want: []string{mod + "/syncer imports " + mod + "/server/auth"}},
		{name: "a leaf imports up", pkgs: []pkg{
			{path: mod + "/internal/version", imports: []string{mod + "/cmd/kubestellar/app"}},
			{path: mod + "/apis/edge/v2alpha1", imports: []string{mod + "/spaces"}},
		}, want: []string{mod + "/internal/version imports " + mod + "/cmd/kubestellar/app", mod + "/apis/edge/v2alpha1 imports " + mod + "/spaces"}},
		{name: "the dashboard imports a controller", pkgs: []pkg{
			{path: mod + "/dashboard", imports: []string{mod + "/controllers/mailbox"}},
		}, want: []string{mod + "/dashboard imports " + mod + "/controllers/mailbox"}},
		{name: "the dashboard imports the server's authentication", pkgs: []pkg{
			{path: mod + "/dashboard", imports: []string{mod + "/server/auth"}},
		}, want: []string{mod + "/dashboard imports " + mod + "/server/auth"}},
		{name: "a product package imports a test", pkgs: []pkg{
			{path: mod + "/server", imports: []string{mod + "/test/harness"}},
		}, want: []string{mod + "/server imports " + mod + "/test/harness"}},
		{name: "admission imports a controller", pkgs: []pkg{
			{path: mod + "/server/admission", imports: []string{mod + "/controllers/status", mod + "/internal/statuscel"}},
			{path: mod + "/server", imports: []string{mod + "/controllers/status"}},
		}, want: []string{mod + "/server/admission imports " + mod + "/controllers/status"}},
		{name: "a folder in no layer", pkgs: []pkg{
			{path: mod + "/util", imports: nil},
		}, want: []string{mod + "/util imports -"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkImports(mod, tc.pkgs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations %v, want %d %v", len(got), got, len(tc.want), tc.want)
			}
			for i, v := range got {
				if !strings.HasPrefix(v.String(), tc.want[i]) {
					t.Errorf("violation %d: got %q, want it to start with %q", i, v, tc.want[i])
				}
			}
		})
	}
}

func TestCheckEdge(t *testing.T) {
	got := checkEdge(map[string][]string{"syncer": {
		"k8s.io/client-go/rest",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", // types: fine
		"k8s.io/apiserver/pkg/server",
		"github.com/k3s-io/kine/pkg/endpoint",
		"k8s.io/apiserver/pkg/serverless", // a prefix, not a package under it
	}})
	if len(got) != 2 || got[0].to != "k8s.io/apiserver/pkg/server" || got[1].to != "github.com/k3s-io/kine/pkg/endpoint" {
		t.Fatalf("got %v, want the API server and kine", got)
	}
}

// TestRunOnAModule plants a violation in a module of its own and runs the
// check as make verify does, through go list.
func TestRunOnAModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	tree := scratch.New(t)
	dir, write := tree.Dir, tree.Write
	write("go.mod", "module "+mod+"\n\ngo 1.22\n")
	write("server/server.go", "package server\n\nconst Name = \"server\"\n")
	write("syncer/syncer.go", "package syncer\n\nimport _ \"fmt\"\n")
	write("syncer/syncer_test.go", "package syncer\n\nimport _ \""+mod+"/server\"\n")

	got, err := run(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("a test may import anything; got %v", got)
	}

	write("syncer/syncer.go", "package syncer\n\nimport _ \""+mod+"/server\"\n")
	got, err = run(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].from != mod+"/syncer" || got[0].to != mod+"/server" {
		t.Fatalf("got %v, want the syncer's import of the server", got)
	}
}

// TestRunOnANestedModule plants a violation in a module nested in another
// (as test/bench is in the repository's): its packages are in the layer of
// the folder it sits in, and its imports of the enclosing module's packages
// are checked as that module's.
func TestRunOnANestedModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	tree := scratch.New(t)
	write := tree.Write
	write("go.mod", "module "+mod+"\n\ngo 1.22\n")
	write("server/server.go", "package server\n\nconst Name = \"server\"\n")
	write("cmd/cmd.go", "package cmd\n\nconst Name = \"cmd\"\n")
	nested := func(folder string) string {
		write(folder+"/go.mod", "module "+mod+"/"+folder+"\n\ngo 1.22\n\nrequire "+mod+" v0.0.0\n\nreplace "+mod+" => ../..\n")
		return filepath.Join(tree.Dir, folder)
	}

	bench := nested("test/bench")
	write("test/bench/main.go", "package main\n\nimport _ \""+mod+"/server\"\n\nfunc main() {}\n")
	got, err := run(bench)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("a module under test/ may import any layer; got %v", got)
	}

	extra := nested("server/extra")
	write("server/extra/extra.go", "package extra\n\nimport _ \""+mod+"/cmd\"\n")
	got, err = run(extra)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].from != mod+"/server/extra" || got[0].to != mod+"/cmd" {
		t.Fatalf("got %v, want the nested module's import of cmd, up from the server's layer", got)
	}
}
