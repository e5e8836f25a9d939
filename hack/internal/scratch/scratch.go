// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scratch makes throwaway trees for the tests of the checks that
// make verify runs, so that each can plant what it must find.
package scratch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Tree is a temporary directory of files.
type Tree struct {
	Dir string
	t   testing.TB
}

// New returns an empty tree.
func New(t testing.TB) *Tree {
	return &Tree{Dir: t.TempDir(), t: t}
}

// NewGit returns an empty git repository, for checks that list files as
// git does; it skips the test where git is missing.
func NewGit(t testing.TB) *Tree {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	tree := New(t)
	if out, err := exec.Command("git", "-C", tree.Dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return tree
}

// Write writes a file of the tree, with the directories above it.
func (tr *Tree) Write(name, content string) {
	tr.t.Helper()
	p := filepath.Join(tr.Dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}
