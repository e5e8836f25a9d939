// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gendocs writes the generated reference docs, so that they say
// what the code does:
//
//   - docs/reference/commands/: the CLI, from its cobra tree
//     (app.NewCommand): every command, its usage, description and flags
//     with their defaults; an index (README.md) and one page per
//     top-level command;
//
//   - docs/reference/api.md: the API, from the Go types under apis/:
//     every kind of every group and version, its fields, their types and
//     doc comments.
//
//     go run ./hack/gendocs [-C DIR] [-check]
//
// writes them (make docs); -check writes nothing, names each page that is
// stale, missing or left over, and exits 1 (make verify).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app"
	"github.com/kubestellar/kubestellar/server"
)

// cli returns the CLI's command tree as the binary runs it.
func cli() *cobra.Command {
	root := app.NewCommand(app.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	// cobra adds the completion command when the CLI runs (ExecuteC), not
	// when it is built: add it, as the binary has it.
	root.InitDefaultCompletionCmd()
	return root
}

// thisMachine is what the flags' defaults depend on here.
func thisMachine() machine {
	home, _ := os.UserHomeDir()
	hostname, _ := os.Hostname()
	return machine{home: home, hostname: hostname, serverDataDir: server.DefaultDataDir(), cpus: runtime.NumCPU()}
}

// generate returns every generated page of the repository at dir, by its
// path relative to dir.
func generate(dir string, root *cobra.Command, m machine) (map[string][]byte, error) {
	pages := cliPages(root, m)
	api, err := apiPage(filepath.Join(dir, "apis"))
	if err != nil {
		return nil, err
	}
	pages[apiFile] = api
	return pages, nil
}

// generatedDirs are the folders that hold nothing but generated pages:
// a Markdown file there that is not generated is left over.
var generatedDirs = []string{commandsDir}

// diff compares the pages with the tree at dir: it returns the pages that
// differ or are missing, and the left-over files of the generated folders.
func diff(dir string, pages map[string][]byte) (stale, extra []string, err error) {
	for p, content := range pages {
		have, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		if !bytes.Equal(have, content) {
			stale = append(stale, p)
		}
	}
	for _, d := range generatedDirs {
		files, err := filepath.Glob(filepath.Join(dir, d, "*.md"))
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			p := filepath.ToSlash(filepath.Join(d, filepath.Base(f)))
			if _, ok := pages[p]; !ok {
				extra = append(extra, p)
			}
		}
	}
	sort.Strings(stale)
	sort.Strings(extra)
	return stale, extra, nil
}

// write brings the tree at dir in step with the pages.
func write(dir string, pages map[string][]byte) error {
	stale, extra, err := diff(dir, pages)
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, p), pages[p], 0o644); err != nil {
			return err
		}
	}
	for _, p := range extra {
		if err := os.Remove(filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	dir := flag.String("C", ".", "the repository's root")
	check := flag.Bool("check", false, "write nothing: exit 1 if a generated page is stale, missing or left over")
	flag.Parse()
	pages, err := generate(*dir, cli(), thisMachine())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(2)
	}
	if !*check {
		if err := write(*dir, pages); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(2)
		}
		return
	}
	stale, extra, err := diff(*dir, pages)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(2)
	}
	for _, p := range stale {
		fmt.Printf("%s: stale or missing\n", p)
	}
	for _, p := range extra {
		fmt.Printf("%s: not generated any more\n", p)
	}
	if len(stale)+len(extra) > 0 {
		fmt.Fprintln(os.Stderr, "the generated reference docs are out of date: run 'make docs'")
		os.Exit(1)
	}
}
