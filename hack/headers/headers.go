// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command headers checks that every Go file of the repository starts with
// its license header: the short form,
//
//	// Copyright The KubeStellar Authors.
//	// SPDX-License-Identifier: Apache-2.0
//
// or, in generated code, hack/boilerplate.go.txt's block comment.
//
//	go run ./hack/headers [-C DIR] [-fix]
//
// names each file without one and exits 1; -fix adds the short form to them.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Header is the short form, the first lines of a hand-written Go file.
const Header = "// Copyright The KubeStellar Authors.\n// SPDX-License-Identifier: Apache-2.0\n"

// generatedHeader starts hack/boilerplate.go.txt, which the code
// generators put at the top of what they write.
const generatedHeader = "/*\nCopyright The KubeStellar Authors.\n\nLicensed under the Apache License, Version 2.0"

// hasHeader says whether a Go file's content starts with a license header.
// Generated code may put its build constraints above it.
func hasHeader(content []byte) bool {
	if bytes.HasPrefix(content, []byte(Header)) {
		return true
	}
	for {
		line, rest, _ := bytes.Cut(content, []byte("\n"))
		if !bytes.HasPrefix(line, []byte("//go:build ")) && !bytes.HasPrefix(line, []byte("// +build ")) && len(line) != 0 {
			break
		}
		if len(rest) == len(content) {
			break
		}
		content = rest
	}
	return bytes.HasPrefix(content, []byte(generatedHeader))
}

// withHeader returns content with the short form put at its top, a blank
// line between it and what was there.
func withHeader(content []byte) []byte {
	return append([]byte(Header+"\n"), content...)
}

// goFiles lists the Go files git knows of in dir (tracked, or new and not
// ignored), relative to dir.
func goFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w\n%s", err, stderr.String())
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "" {
			continue
		}
		// A file deleted but not yet staged is listed and gone.
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			files = append(files, f)
		}
	}
	return files, nil
}

// run returns the Go files of dir without a header, after adding one to
// each when fix is set.
func run(dir string, fix bool) ([]string, error) {
	files, err := goFiles(dir)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, f := range files {
		path := filepath.Join(dir, f)
		content, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if hasHeader(content) {
			continue
		}
		missing = append(missing, f)
		if fix {
			if err := os.WriteFile(path, withHeader(content), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return missing, nil
}

func main() {
	dir := flag.String("C", ".", "the repository's root")
	fix := flag.Bool("fix", false, "add the header to the files without one")
	flag.Parse()
	missing, err := run(*dir, *fix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "headers:", err)
		os.Exit(2)
	}
	for _, f := range missing {
		fmt.Println(f)
	}
	switch {
	case len(missing) > 0 && *fix:
		fmt.Fprintf(os.Stderr, "added the license header to %d Go files\n", len(missing))
	case len(missing) > 0:
		fmt.Fprintf(os.Stderr, "%d Go files lack the license header: run 'go run ./hack/headers -fix'\n", len(missing))
		os.Exit(1)
	}
}
