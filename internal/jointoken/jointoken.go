// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package jointoken is the format of the tokens a syncer joins the server
// with. A token pins the server's CA, as k3s join tokens do:
//
//	K10<hex sha256 of the CA certificate PEM>::<id>.<secret>
//
// id (6 characters) and secret (16 characters) are [a-z0-9], like kubeadm
// bootstrap tokens. The id is public: it names the token at the server
// (which keeps only the secret's SHA-256) and may be logged; the secret is
// never logged, and errors of this package never repeat the input.
//
// The package uses the standard library only: the syncer imports it too.
package jointoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

const (
	// Prefix starts the full form of a token; 10 is k3s's format version.
	Prefix = "K10"
	// Separator separates the CA hash from the credentials.
	Separator = "::"
	// IDLength and SecretLength are the lengths of the two credential parts.
	IDLength     = 6
	SecretLength = 16
	// alphabet is what ids and secrets are made of.
	alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// Shape describes the accepted forms, for error messages.
const Shape = "K10<sha256 of the CA certificate, 64 hex digits>::<id>.<secret> or <id>.<secret>, " +
	"where id is 6 and secret 16 characters of [a-z0-9]"

// Token is a syncer join token.
type Token struct {
	// CAHash is the hex SHA-256 of the server's CA certificate PEM; empty
	// for a bare token, which pins nothing.
	CAHash string
	ID     string
	Secret string
}

// Parse reads a token in its full (K10...::id.secret) or bare (id.secret)
// form. Surrounding white space is ignored.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, fmt.Errorf("empty token: expected %s", Shape)
	}
	var t Token
	creds := s
	if strings.HasPrefix(s, Prefix) {
		hash, rest, ok := strings.Cut(strings.TrimPrefix(s, Prefix), Separator)
		if !ok {
			return Token{}, fmt.Errorf("malformed token: %q must be followed by the CA hash and %q; expected %s", Prefix, Separator, Shape)
		}
		hash = strings.ToLower(hash)
		if !isHexSHA256(hash) {
			return Token{}, fmt.Errorf("malformed token: the CA hash must be 64 hex digits; expected %s", Shape)
		}
		t.CAHash, creds = hash, rest
	}
	id, secret, ok := strings.Cut(creds, ".")
	if !ok {
		return Token{}, fmt.Errorf("malformed token: no \".\" between id and secret; expected %s", Shape)
	}
	if !valid(id, IDLength) {
		return Token{}, fmt.Errorf("malformed token: the id must be %d characters of [a-z0-9]; expected %s", IDLength, Shape)
	}
	if !valid(secret, SecretLength) {
		return Token{}, fmt.Errorf("malformed token: the secret must be %d characters of [a-z0-9]; expected %s", SecretLength, Shape)
	}
	t.ID, t.Secret = id, secret
	return t, nil
}

// ValidID tells whether s has the shape of a token id.
func ValidID(s string) bool { return valid(s, IDLength) }

// String returns the full form when the token pins a CA, else the bare form.
func (t Token) String() string {
	if t.CAHash == "" {
		return t.Bearer()
	}
	return Prefix + t.CAHash + Separator + t.Bearer()
}

// Bearer returns id.secret, what a syncer sends as its bearer token.
func (t Token) Bearer() string { return t.ID + "." + t.Secret }

// New returns a new random token pinning the CA certificate caPEM.
func New(caPEM []byte) (Token, error) {
	if len(caPEM) == 0 {
		return Token{}, errors.New("a join token needs the server's CA certificate")
	}
	id, err := random(IDLength)
	if err != nil {
		return Token{}, err
	}
	secret, err := random(SecretLength)
	if err != nil {
		return Token{}, err
	}
	return Token{CAHash: CAHash(caPEM), ID: id, Secret: secret}, nil
}

// CAHash returns the hex SHA-256 of a CA certificate's PEM bytes, exactly as
// the server serves them at /cacerts.
func CAHash(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return hex.EncodeToString(sum[:])
}

// SecretHash returns the hex SHA-256 of a token secret, what the server
// stores instead of the secret.
func SecretHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func valid(s string, length int) bool {
	if len(s) != length {
		return false
	}
	for i := range len(s) {
		if !strings.ContainsRune(alphabet, rune(s[i])) {
			return false
		}
	}
	return true
}

func isHexSHA256(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// random returns n characters of alphabet drawn uniformly from crypto/rand.
func random(n int) (string, error) {
	// Bytes at or above the largest multiple of len(alphabet) are dropped,
	// so that every character is equally likely.
	const limit = 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("reading random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}
