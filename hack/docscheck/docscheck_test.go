// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app"
	"github.com/kubestellar/kubestellar/hack/internal/scratch"
)

func cli() *cobra.Command {
	return app.NewCommand(app.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
}

func TestCheckCommand(t *testing.T) {
	root := cli()
	for _, tc := range []struct {
		line string
		want string // a substring of the one problem, or "" for none
	}{
		{line: "kubestellar server start --port 7443 --data-dir /tmp/ks"},
		{line: "$ sudo ./_output/kubestellar space create wds1 --kubeconfig x # and a comment --nope"},
		{line: "kubestellar syncer join --server https://center:6443 --token K10<ca-hash>::<id>.<secret> --sync-target edge1"},
		{line: "kubestellar -v=4 version"},
		{line: "kubectl get ns && kubestellar space list | head"},
		{line: "ExecStart=/usr/bin/kubestellar server start $KUBESTELLAR_ARGS"},
		{line: "kubestellar space create NAME"},
		{line: "sudo kubestellar server install --data-dir /srv/kubestellar --no-start"},
		{line: "kubestellar server backup - | ssh host /opt/kubestellar server start --prot 1", want: "kubestellar server start has no flag --prot"},
		{line: "# kubestellar does things --whatever"},
		{line: "kubestellar spaces list", want: `kubestellar has no subcommand "spaces"`},
		{line: "kubestellar server start --prot 7443", want: "kubestellar server start has no flag --prot"},
		{line: "kubestellar space create wds1 --no-such-flag", want: "kubestellar space create has no flag --no-such-flag"},
		{line: "make run && kubestellar syncer jion --token x", want: `kubestellar syncer has no subcommand "jion"`},
		{line: "kubestellar space create -Z", want: "has no flag -Z"},
	} {
		got := checkCommand(root, tc.line)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%q: got %v, want no problem", tc.line, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%q: got %v, want one problem with %q", tc.line, got, tc.want)
		}
	}
}

func TestSlugAndAnchors(t *testing.T) {
	a := anchors([]byte("# Title\n## The `kubestellar server start` flags\n```\n# not a heading\n```\n## Title\n### Users, RBAC & tokens!\n"))
	for _, want := range []string{"title", "the-kubestellar-server-start-flags", "title-1", "users-rbac--tokens"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a comment in a code block is no heading")
	}
}

// TestRunInARepository plants a broken link, a missing anchor and a wrong
// command in a git repository of its own and checks each is named.
func TestRunInARepository(t *testing.T) {
	repo := scratch.NewGit(t)
	dir, write := repo.Dir, repo.Write
	write("docs/guide.md", "# Guide\n\n## Start here\n")
	write("README.md", strings.Join([]string{
		"# Readme",
		"See [the guide](docs/guide.md#start-here), [the site](https://example.com/x.md) and [us](#readme).",
		"Run `kubestellar server start --port 1`, not `kubestellar server begin`.",
		"A [broken link](docs/gone.md) and [a missing anchor](docs/guide.md#nowhere).",
		"```sh",
		"kubestellar space create wds1 --colour red",
		"[not a link](nowhere.md)",
		"```",
	}, "\n"))
	got, err := run(dir, cli())
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range got {
		lines = append(lines, p.String())
	}
	want := []string{
		`README.md:3: kubestellar server has no subcommand "begin"`,
		"README.md:4: link docs/gone.md: no such file docs/gone.md",
		"README.md:4: link docs/guide.md#nowhere: docs/guide.md has no heading #nowhere",
		"README.md:6: kubestellar space create has no flag --colour",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d problems:\n%s\nwant:\n%s", len(lines), strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d: got %q, want it to start with %q", i, lines[i], want[i])
		}
	}
}
