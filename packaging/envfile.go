// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The flags of a service live in one variable of an environment file,
// VAR="--flag=value ...", which the unit expands as $VAR in ExecStart=; its
// secrets live in other variables (KUBESTELLAR_TOKEN=...), which the binary
// reads from its environment, so that they stay out of its command line,
// which every user of the machine reads in the process list.
// Two layers of quoting apply, and both are written so that systemd and a
// POSIX shell read them alike:
//
//   - systemd splits an expanded $VAR into words at whitespace, honouring
//     single and double quotes, with a backslash escaping the next
//     character anywhere (inside single quotes too, unlike a shell).
//     QuoteArgs therefore leaves plain words bare, puts words without ' or \
//     in single quotes, and puts the rest in double quotes escaping \ " $ `.
//   - EnvironmentFile= reads VAR="..." taking \ " $ ` after a backslash
//     literally, as a shell does inside double quotes; FormatEnvFile escapes
//     exactly those.

// QuoteArgs joins args into one value that systemd splits back into args.
func QuoteArgs(args []string) (string, error) {
	words := make([]string, 0, len(args))
	for _, a := range args {
		if !utf8.ValidString(a) || strings.ContainsFunc(a, unicode.IsControl) {
			return "", fmt.Errorf("argument %q holds a control character or invalid UTF-8", a)
		}
		words = append(words, quoteWord(a))
	}
	return strings.Join(words, " "), nil
}

func quoteWord(a string) string {
	switch {
	case a == "":
		return "''"
	case !strings.ContainsFunc(a, needsQuoting):
		return a
	case !strings.ContainsAny(a, `'\`):
		return "'" + a + "'"
	default:
		return `"` + escapeDoubleQuoted(a) + `"`
	}
}

// needsQuoting is true for the characters a shell or systemd may treat
// specially; letters, digits and -_=+.,:/@% are plain.
func needsQuoting(r rune) bool {
	if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
		return false
	}
	return !strings.ContainsRune("-_=+.,:/@%", r)
}

func escapeDoubleQuoted(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`").Replace(s)
}

// SplitArgs splits a value into words as systemd splits an expanded $VAR in
// ExecStart=.
func SplitArgs(s string) ([]string, error) {
	var (
		words  []string
		word   strings.Builder
		inWord bool
		quote  rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\':
			if i+1 == len(rs) {
				return nil, errors.New("trailing backslash")
			}
			i++
			word.WriteRune(rs[i])
			inWord = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced %c quote", quote)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// EnvVar is one variable of an environment file that the binary reads
// from its environment (a secret kept off its command line).
type EnvVar struct {
	Name, Value string
}

// FormatEnvFile is an environment file: the comment lines of header, then
// name="args, quoted", then each of vars, NAME="value". A value with a
// control character (a newline would start another assignment) is
// refused, without quoting it: it may be a secret.
func FormatEnvFile(header, name string, args []string, vars ...EnvVar) ([]byte, error) {
	value, err := QuoteArgs(args)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if header != "" {
		for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
	fmt.Fprintf(&b, "%s=\"%s\"\n", name, escapeDoubleQuoted(value))
	for _, v := range vars {
		if !utf8.ValidString(v.Value) || strings.ContainsFunc(v.Value, unicode.IsControl) {
			return nil, fmt.Errorf("the value of %s holds a control character or invalid UTF-8", v.Name)
		}
		fmt.Fprintf(&b, "%s=\"%s\"\n", v.Name, escapeDoubleQuoted(v.Value))
	}
	return b.Bytes(), nil
}

// ParseEnvFile reads the assignments of an environment file as systemd's
// EnvironmentFile= does for the forms people write: NAME=value,
// NAME="value" (\ escapes \ " $ `) and NAME='value'; comment lines start
// with # or ;, and a later assignment wins.
func ParseEnvFile(data []byte) (map[string]string, error) {
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(strings.TrimPrefix(name, "export "))
		if !ok || name == "" || strings.ContainsFunc(name, func(r rune) bool {
			return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			return nil, fmt.Errorf("line %d is not NAME=VALUE", n)
		}
		v, err := unquoteEnvValue(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", n, name, err)
		}
		vars[name] = v
	}
	return vars, sc.Err()
}

func unquoteEnvValue(v string) (string, error) {
	switch {
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return v[1 : len(v)-1], nil
	case len(v) >= 1 && v[0] == '"':
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			switch c := v[i]; {
			case c == '\\' && i+1 < len(v) && strings.IndexByte("\\\"$`", v[i+1]) >= 0:
				i++
				b.WriteByte(v[i])
			case c == '"':
				if i != len(v)-1 {
					return "", errors.New("text after the closing quote")
				}
				return b.String(), nil
			default:
				b.WriteByte(c)
			}
		}
		return "", errors.New("no closing quote")
	default:
		return v, nil
	}
}
