// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvFileRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// line is the assignment written, when it matters to a reader.
		line string
		err  string
	}{
		{name: "none", args: nil, line: `V=""`},
		{name: "plain", args: []string{"--data-dir=/var/lib/kubestellar", "--port=6443"},
			line: `V="--data-dir=/var/lib/kubestellar --port=6443"`},
		{name: "space", args: []string{"--tls-san=b c"}, line: `V="'--tls-san=b c'"`},
		{name: "empty value", args: []string{"--advertise-address=", ""}, line: `V="--advertise-address= ''"`},
		{name: "password with shell characters", args: []string{`--datastore-endpoint=postgres://u:p$w"d;&|<>*?@h/db`},
			line: `V="'--datastore-endpoint=postgres://u:p\$w\"d;&|<>*?@h/db'"`},
		{name: "single quote and backslash", args: []string{`--x=it's`, `--y=a\b`, "--z=`cmd` $(cmd) ${HOME}"}},
		{name: "unicode", args: []string{"--x=héllo wörld", "--y=日本"}},
		{name: "control character", args: []string{"--y=a\nb"}, err: "control character"},
		{name: "comment and glob characters", args: []string{"#not-a-comment", "*", "~", "!x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := FormatEnvFile("a header\nof two lines", "V", tc.args)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			require.Equal(t, []string{"# a header", "# of two lines"}, lines[:2])
			require.Len(t, lines, 3)
			if tc.line != "" {
				require.Equal(t, tc.line, lines[2])
			}

			// As systemd reads it: EnvironmentFile=, then $V split in ExecStart=.
			vars, err := ParseEnvFile(data)
			require.NoError(t, err)
			got, err := SplitArgs(vars["V"])
			require.NoError(t, err)
			require.Equal(t, tc.args, nilIfEmpty(got))

			// As a shell reads it: the file sourced, then the value split.
			file := filepath.Join(t.TempDir(), "env")
			require.NoError(t, os.WriteFile(file, data, 0o600))
			out, err := exec.Command("sh", "-c", `. "$1" && eval "set -- $V" && for a; do printf '%s\0' "$a"; done`, "sh", file).Output()
			require.NoError(t, err)
			var shell []string
			if len(out) > 0 {
				shell = strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			}
			require.Equal(t, tc.args, shell)
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestSplitArgs follows systemd's extract_first_word with EXTRACT_UNQUOTE
// and EXTRACT_RELAX, as it splits $VAR in ExecStart=.
func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "", want: nil},
		{in: "  a   b\tc  ", want: []string{"a", "b", "c"}},
		{in: `'a b' "c d"`, want: []string{"a b", "c d"}},
		{in: `a'b c'd`, want: []string{"ab cd"}},
		{in: `'it\'s'`, want: []string{"it's"}}, // unlike a shell, \ escapes inside '...'
		{in: `"a\"b" a\ b \\`, want: []string{`a"b`, "a b", `\`}},
		{in: `''`, want: []string{""}},
		{in: `'open`, err: "unbalanced"},
		{in: `a\`, err: "trailing backslash"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := SplitArgs(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseEnvFile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		err      string
	}{
		{name: "comments and blank lines", in: "# c\n; c\n\n  A=1\n", want: map[string]string{"A": "1"}},
		{name: "quotes", in: `A="x \"y\" \$z \a"` + "\nB='p \"q\" $r'\nC=plain words\n",
			want: map[string]string{"A": `x "y" $z \a`, "B": `p "q" $r`, "C": "plain words"}},
		{name: "export and a later assignment wins", in: "export A=1\nA=2\n", want: map[string]string{"A": "2"}},
		{name: "not an assignment", in: "just words\n", err: "line 1"},
		{name: "bad name", in: "A-B=1\n", err: "line 1"},
		{name: "unclosed quote", in: `A="x` + "\n", err: "no closing quote"},
		{name: "text after the quote", in: `A="x" y` + "\n", err: "after the closing quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnvFile([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
