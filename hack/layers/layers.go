// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command layers checks that the module's packages import one another only
// down its layers, so that the tree shows them and stays that way:
//
//	cmd -> packaging -> syncer | server -> dashboard | controllers -> spaces -> apis, internal
//	                    syncer -> tunnel -> apis, internal
//
// Each top-level folder is a layer; a package may import its own layer and
// those the table below allows, never one above. Tests (_test.go files)
// may import anything. It also checks the edge's side as a whole: nothing
// the syncer links in, directly or not, is the API server, its storage or
// the server's controllers.
//
//	go run ./hack/layers [-C DIR]
//
// exits 1 and names each import that goes against the layers. DIR may be a
// module nested in the repository (test/bench): its packages are then in
// the layer of the folder it sits in, and its imports of the enclosing
// module's packages are checked as that module's own.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// allowed is, for each layer (top-level folder), the layers its packages
// may import besides their own.
var allowed = map[string][]string{
	"apis":        {},
	"internal":    {"apis"},
	"spaces":      {"apis", "internal"},
	"tunnel":      {"apis", "internal"},
	"controllers": {"apis", "internal", "spaces"},
	"dashboard":   {"apis", "internal", "spaces"},
	"syncer":      {"apis", "internal", "tunnel"},
	"server":      {"apis", "internal", "spaces", "tunnel", "controllers", "dashboard"},
	"packaging":   {"apis", "internal", "server", "syncer"},
	"cmd":         {"apis", "internal", "spaces", "tunnel", "controllers", "dashboard", "syncer", "server", "packaging"},
	// hack and test hold tools and tests: they may import any layer, and
	// no layer may import them.
	"hack": {"apis", "internal", "spaces", "tunnel", "controllers", "dashboard", "syncer", "server", "packaging", "cmd"},
	"test": {"apis", "internal", "spaces", "tunnel", "controllers", "dashboard", "syncer", "server", "packaging", "cmd"},
}

// narrower are packages held to less than their layer allows: no import
// of a package under any of the prefixes (relative to the module).
var narrower = map[string][]string{
	// Admission checks objects; what it shares with a controller (the
	// StatusCollectors' CEL) lives below both.
	"server/admission": {"controllers"},
}

// edgeRoots are the packages the syncer runs from; edgeForbidden are
// prefixes of packages none of them may link in: the API server's
// assembly, CRD serving, kine and etcd's server.
var (
	edgeRoots     = []string{"syncer"}
	edgeForbidden = []string{
		"k8s.io/apiserver/pkg/server",
		"k8s.io/apiserver/pkg/registry",
		"k8s.io/apiextensions-apiserver/pkg/apiserver",
		"k8s.io/apiextensions-apiserver/pkg/registry",
		"github.com/k3s-io/kine",
		"go.etcd.io/etcd/server",
	}
)

// pkg is one package of the module and what its non-test files import.
type pkg struct {
	path    string
	imports []string
}

// violation is one import against the layers.
type violation struct {
	from, to, why string
}

func (v violation) String() string { return v.from + " imports " + v.to + ": " + v.why }

// layerOf returns the layer of a package of module, and false for a
// package outside the module.
func layerOf(module, path string) (string, bool) {
	if path == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return "", false
	}
	layer, _, _ := strings.Cut(rest, "/")
	return layer, true
}

// checkImports returns the imports among pkgs that go against the layers.
func checkImports(module string, pkgs []pkg) []violation {
	var out []violation
	for _, p := range pkgs {
		from, _ := layerOf(module, p.path)
		may, known := allowed[from]
		if !known {
			out = append(out, violation{from: p.path, to: "-", why: fmt.Sprintf("its folder %q is in no layer: add it to hack/layers", from)})
			continue
		}
		for _, imp := range p.imports {
			to, inModule := layerOf(module, imp)
			if inModule && narrowed(module, p.path, imp) {
				out = append(out, violation{from: p.path, to: imp, why: "hack/layers holds " + strings.TrimPrefix(p.path, module+"/") + " to less than its layer"})
				continue
			}
			if !inModule || to == from || slices.Contains(may, to) {
				continue
			}
			why := fmt.Sprintf("%s may import only %s", from, strings.Join(append(slices.Clone(may), from), ", "))
			out = append(out, violation{from: p.path, to: imp, why: why})
		}
	}
	return out
}

// narrowed says whether narrower forbids from to import imp.
func narrowed(module, from, imp string) bool {
	for _, prefix := range narrower[strings.TrimPrefix(from, module+"/")] {
		rel := strings.TrimPrefix(imp, module+"/")
		if rel == prefix || strings.HasPrefix(rel, prefix+"/") {
			return true
		}
	}
	return false
}

// checkEdge returns the packages the edge's roots link in that they must
// not: deps maps each root to its transitive dependencies.
func checkEdge(deps map[string][]string) []violation {
	var out []violation
	for root, ds := range deps {
		for _, d := range ds {
			for _, f := range edgeForbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					out = append(out, violation{from: root, to: d, why: "the syncer must not link in the API server, its storage or the server's controllers"})
				}
			}
		}
	}
	return out
}

// goList runs go list in dir and returns its standard output.
func goList(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// enclosingModule returns the path of the module that a module nested in
// it (module, in dir) extends, as test/bench's github.com/kubestellar/
// kubestellar/test/bench extends github.com/kubestellar/kubestellar: the
// nearest go.mod above dir whose module path and folder make module's. It
// returns module itself when there is none.
func enclosingModule(dir, module string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			rel, err := filepath.Rel(d, abs)
			if err != nil {
				return "", err
			}
			if outer := modulePath(data); outer != "" && outer+"/"+filepath.ToSlash(rel) == module {
				return outer, nil
			}
		}
		if filepath.Dir(d) == d {
			return module, nil
		}
	}
}

// modulePath returns the path a go.mod's module line declares.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// run checks the module in dir and returns the violations.
func run(dir string) ([]violation, error) {
	module, err := goList(dir, "-m")
	if err != nil {
		return nil, err
	}
	module = strings.TrimSpace(module)
	// A nested module's packages are placed in the enclosing module's
	// layers; the edge's roots are the enclosing module's.
	base, err := enclosingModule(dir, module)
	if err != nil {
		return nil, err
	}
	listed, err := goList(dir, "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", "./...")
	if err != nil {
		return nil, err
	}
	var pkgs []pkg
	for _, line := range strings.Split(strings.TrimSpace(listed), "\n") {
		path, imports, _ := strings.Cut(line, "\t")
		pkgs = append(pkgs, pkg{path: path, imports: strings.Fields(imports)})
	}
	out := checkImports(base, pkgs)
	deps := map[string][]string{}
	for _, root := range edgeRoots {
		if base != module {
			break
		}
		listed, err := goList(dir, "-deps", "./"+root+"/...")
		if err != nil {
			return nil, err
		}
		deps[root] = strings.Fields(listed)
	}
	out = append(out, checkEdge(deps)...)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func main() {
	dir := flag.String("C", ".", "the module's root")
	flag.Parse()
	violations, err := run(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers:", err)
		os.Exit(2)
	}
	for _, v := range violations {
		fmt.Println(v)
	}
	if len(violations) > 0 {
		fmt.Fprintf(os.Stderr, "%d imports go against the layers (hack/layers/layers.go says which may import which): move the shared piece down a layer, or inject it\n", len(violations))
		os.Exit(1)
	}
}
