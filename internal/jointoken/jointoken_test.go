// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package jointoken

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	hash   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	id     = "abc123"
	secret = "0123456789abcdef"
)

func TestParse(t *testing.T) {
	tests := []struct {
		desc    string
		in      string
		want    Token
		wantErr string
	}{
		{desc: "full", in: "K10" + hash + "::" + id + "." + secret, want: Token{CAHash: hash, ID: id, Secret: secret}},
		{desc: "bare", in: id + "." + secret, want: Token{ID: id, Secret: secret}},
		{desc: "surrounding white space", in: " \t" + id + "." + secret + "\n", want: Token{ID: id, Secret: secret}},
		{desc: "upper-case hash", in: "K10" + strings.ToUpper(hash) + "::" + id + "." + secret, want: Token{CAHash: hash, ID: id, Secret: secret}},
		{desc: "empty", in: "", wantErr: "empty token"},
		{desc: "blank", in: "  ", wantErr: "empty token"},
		{desc: "no separator", in: "K10" + hash + id + "." + secret, wantErr: `"K10" must be followed by the CA hash and "::"`},
		{desc: "short hash", in: "K10" + hash[1:] + "::" + id + "." + secret, wantErr: "CA hash must be 64 hex digits"},
		{desc: "non-hex hash", in: "K10" + strings.Repeat("g", 64) + "::" + id + "." + secret, wantErr: "CA hash must be 64 hex digits"},
		{desc: "empty hash", in: "K10::" + id + "." + secret, wantErr: "CA hash must be 64 hex digits"},
		{desc: "k3s user:password credentials", in: "K10" + hash + "::server:" + secret, wantErr: `no "." between id and secret`},
		{desc: "no dot", in: id + secret, wantErr: `no "." between id and secret`},
		{desc: "short id", in: "abc12." + secret, wantErr: "the id must be 6 characters"},
		{desc: "long id", in: "abc1234." + secret, wantErr: "the id must be 6 characters"},
		{desc: "upper-case id", in: "ABC123." + secret, wantErr: "the id must be 6 characters of [a-z0-9]"},
		{desc: "short secret", in: id + "." + secret[1:], wantErr: "the secret must be 16 characters"},
		{desc: "long secret", in: id + "." + secret + "0", wantErr: "the secret must be 16 characters"},
		{desc: "secret with a dot", in: id + "." + secret[:8] + "." + secret[9:], wantErr: "the secret must be 16 characters"},
		{desc: "secret with a dash", in: id + "." + secret[:15] + "-", wantErr: "the secret must be 16 characters of [a-z0-9]"},
		{desc: "admin token", in: "q2b7Y2x3cT1ZbWFyeS1oYWQtYS1saXR0bGUtbGFtYg", wantErr: `no "." between id and secret`},
		{desc: "lower-case prefix", in: "k10" + hash + "::" + id + "." + secret, wantErr: "the id must be"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, "expected K10<sha256", "the error says what shape is expected")
				if len(tc.in) > 16 {
					require.NotContains(t, err.Error(), strings.TrimSpace(tc.in), "errors never repeat the token")
				}
				require.Equal(t, Token{}, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestStringAndBearer(t *testing.T) {
	tests := []struct {
		desc       string
		token      Token
		wantString string
	}{
		{desc: "full", token: Token{CAHash: hash, ID: id, Secret: secret}, wantString: "K10" + hash + "::" + id + "." + secret},
		{desc: "bare", token: Token{ID: id, Secret: secret}, wantString: id + "." + secret},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.wantString, tc.token.String())
			require.Equal(t, id+"."+secret, tc.token.Bearer())
			back, err := Parse(tc.token.String())
			require.NoError(t, err)
			require.Equal(t, tc.token, back, "String and Parse round-trip")
		})
	}
}

func TestNew(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	a, err := New(ca)
	require.NoError(t, err)
	b, err := New(ca)
	require.NoError(t, err)
	require.NotEqual(t, a.ID, b.ID)
	require.NotEqual(t, a.Secret, b.Secret)
	require.Equal(t, CAHash(ca), a.CAHash)
	for _, tok := range []Token{a, b} {
		parsed, err := Parse(tok.String())
		require.NoError(t, err)
		require.Equal(t, tok, parsed)
		require.True(t, ValidID(tok.ID))
	}

	_, err = New(nil)
	require.ErrorContains(t, err, "CA certificate")
}

func TestRandomUsesTheWholeAlphabet(t *testing.T) {
	seen := map[rune]bool{}
	for range 200 {
		s, err := random(SecretLength)
		require.NoError(t, err)
		require.Len(t, s, SecretLength)
		for _, r := range s {
			seen[r] = true
		}
	}
	// 3,200 draws from 36 characters miss one with negligible probability.
	require.Len(t, seen, len(alphabet))
}

func TestHashes(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{in: "", want: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{in: "abc", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, CAHash([]byte(tc.in)))
		require.Equal(t, tc.want, SecretHash(tc.in))
	}
}

func TestValidID(t *testing.T) {
	for in, want := range map[string]bool{"abc123": true, "000000": true, "abc12": false, "abc1234": false, "ABC123": false, "abc-12": false, "": false} {
		require.Equal(t, want, ValidID(in), in)
	}
}

// FuzzParse: no token a client sends crashes the server, and what is
// accepted prints back as itself (less surrounding spaces, which a pasted
// token may carry).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"abcdef.0123456789abcdef", "K10" + strings.Repeat("a", 64) + "::abcdef.0123456789abcdef", "K10::.", "", "::", "a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			return
		}
		if tok.String() != strings.TrimSpace(s) {
			t.Fatalf("Parse(%q).String() = %q", s, tok.String())
		}
		if !ValidID(tok.ID) {
			t.Fatalf("Parse(%q) accepted the id %q", s, tok.ID)
		}
	})
}
