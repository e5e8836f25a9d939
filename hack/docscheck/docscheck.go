// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Command docscheck checks the repository's Markdown against the tree and
// the CLI, so that the docs cannot rot quietly:
//
//   - every relative link resolves to a file, and every #anchor to a
//     heading of the Markdown file it points into;
//
//   - every kubestellar command in a code block or an inline code span
//     names subcommands and flags that exist in the CLI's cobra tree.
//
//     go run ./hack/docscheck [-C DIR]
//
// names each problem as FILE:LINE and exits 1.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubestellar/kubestellar/cmd/kubestellar/app"
)

// problem is one thing wrong in a Markdown file.
type problem struct {
	file string
	line int
	what string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.what) }

var (
	// link matches a Markdown link or image and captures its target.
	link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan matches an inline code span and captures its text.
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// scheme starts an absolute URL (https:, mailto:).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped,
// spaces made hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownLines returns a file's lines, each with whether it is inside a
// fenced code block (the fences themselves count as inside).
func markdownLines(content []byte) (lines []string, inCode []bool) {
	fenced := false
	for _, l := range strings.Split(string(content), "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		lines = append(lines, l)
		inCode = append(inCode, fenced || fence)
		if fence {
			fenced = !fenced
		}
	}
	return lines, inCode
}

// anchors returns the anchors of a Markdown file's headings.
func anchors(content []byte) map[string]bool {
	out, seen := map[string]bool{}, map[string]int{}
	lines, inCode := markdownLines(content)
	for i, l := range lines {
		m := heading.FindStringSubmatch(l)
		if m == nil || inCode[i] {
			continue
		}
		s := slug(codeSpan.ReplaceAllString(m[1], "$1"))
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// checkLinks returns the relative links of file (a path relative to root)
// that do not resolve.
func checkLinks(root, file string, content []byte) []problem {
	var out []problem
	lines, inCode := markdownLines(content)
	for i, l := range lines {
		if inCode[i] {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
			target := m[1]
			if scheme.MatchString(target) {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			resolved := filepath.Join(root, file)
			if path != "" {
				resolved = filepath.Join(root, filepath.Dir(file), path)
			}
			info, err := os.Stat(resolved)
			if err != nil {
				out = append(out, problem{file, i + 1, fmt.Sprintf("link %s: no such file %s", target, rel(root, resolved))})
				continue
			}
			if frag == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(resolved, ".md") {
				out = append(out, problem{file, i + 1, fmt.Sprintf("link %s: an anchor into something not Markdown", target)})
				continue
			}
			targetContent, err := os.ReadFile(resolved)
			if err != nil {
				out = append(out, problem{file, i + 1, fmt.Sprintf("link %s: %v", target, err)})
				continue
			}
			if !anchors(targetContent)[frag] {
				out = append(out, problem{file, i + 1, fmt.Sprintf("link %s: %s has no heading #%s", target, rel(root, resolved), frag)})
			}
		}
	}
	return out
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

// commandEnds are the shell words after which a command's own words stop.
var commandEnds = map[string]bool{"|": true, "||": true, "&&": true, ";": true, ">": true, ">>": true, "2>&1": true, "&": true, "\\": true}

// checkCommand checks the kubestellar invocations in one line of shell
// against the CLI: it returns what is wrong with each, if anything.
func checkCommand(root *cobra.Command, line string) []string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "#") {
		return nil
	}
	words := strings.Fields(line)
	var out []string
	for i := 0; i < len(words); i++ {
		if filepath.Base(strings.TrimLeft(words[i], "=`$(")) != "kubestellar" {
			continue
		}
		if problem := checkInvocation(root, words[i+1:]); problem != "" {
			out = append(out, problem)
		}
		// The invocation's own words (--data-dir /srv/kubestellar) start
		// no other.
		for i+1 < len(words) && !commandEnds[words[i+1]] {
			i++
		}
	}
	return out
}

// placeholder says whether a word stands for something the reader fills in.
func placeholder(w string) bool {
	return strings.ContainsAny(w, "<>[]{}$|.") || w == "..." || strings.ToUpper(w) == w
}

// checkInvocation walks the words after "kubestellar" down the command
// tree, then checks each flag against the command it reached.
func checkInvocation(root *cobra.Command, words []string) string {
	cmd, path := root, "kubestellar"
	descending := true
	for _, w := range words {
		if commandEnds[w] || strings.HasPrefix(w, "`") {
			break
		}
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "-") && len(w) > 1 {
			descending = false
			name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if name == "" || strings.ContainsAny(name, "<>[]{}$") {
				continue
			}
			if !hasFlag(cmd, name, strings.HasPrefix(w, "--")) {
				return fmt.Sprintf("%s has no flag %s (see %s --help)", path, w, path)
			}
			continue
		}
		if !descending || placeholder(w) {
			descending = false
			continue
		}
		sub := findSub(cmd, w)
		if sub == nil {
			if cmd.HasSubCommands() && !cmd.Runnable() {
				return fmt.Sprintf("%s has no subcommand %q (see %s --help)", path, w, path)
			}
			descending = false // a positional argument
			continue
		}
		cmd, path = sub, path+" "+w
	}
	return ""
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

func hasFlag(cmd *cobra.Command, name string, long bool) bool {
	if name == "help" || (!long && name == "h") {
		return true
	}
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()} {
		if long && fs.Lookup(name) != nil {
			return true
		}
		// -v=4, or several shorthands in one word.
		if !long && fs.ShorthandLookup(name[:1]) != nil {
			return true
		}
	}
	return false
}

// checkCommands returns the kubestellar commands of a Markdown file that
// the CLI does not have: in code blocks, every line; elsewhere, code spans
// that start with "kubestellar ".
func checkCommands(root *cobra.Command, file string, content []byte) []problem {
	var out []problem
	lines, inCode := markdownLines(content)
	for i, l := range lines {
		var shell []string
		if inCode[i] {
			shell = []string{l}
		} else {
			for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
				if strings.HasPrefix(m[1], "kubestellar ") {
					shell = append(shell, m[1])
				}
			}
		}
		for _, sh := range shell {
			for _, what := range checkCommand(root, sh) {
				out = append(out, problem{file, i + 1, what})
			}
		}
	}
	return out
}

// markdownFiles lists the Markdown files git knows of in dir (tracked, or
// new and not ignored).
func markdownFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.md")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	listed, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w\n%s", err, stderr.String())
	}
	var out []string
	for _, f := range strings.Fields(string(listed)) {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			out = append(out, f)
		}
	}
	return out, nil
}

// run checks every Markdown file of dir against the tree and the CLI.
func run(dir string, cli *cobra.Command) ([]problem, error) {
	files, err := markdownFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []problem
	for _, f := range files {
		content, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		out = append(out, checkLinks(dir, f, content)...)
		out = append(out, checkCommands(cli, f, content)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out, nil
}

func main() {
	dir := flag.String("C", ".", "the repository's root")
	flag.Parse()
	cli := app.NewCommand(app.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	// cobra adds the completion command when the CLI runs, not when it is
	// built; the docs (the generated reference) may name it.
	cli.InitDefaultCompletionCmd()
	problems, err := run(*dir, cli)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "%d problems in the docs: fix the link or the command (kubestellar --help lists the commands)\n", len(problems))
		os.Exit(1)
	}
}
