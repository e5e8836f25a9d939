// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Datastore endpoints hold passwords, in every form kine takes:
//
//	postgres://user:password@host:5432/db?sslmode=disable  (postgresql:// too; a URL)
//	mysql://user:password@tcp(host:3306)/db                (go-sql-driver's DSN, password raw)
//	nats://user:password@host:4222,nats://host2:4222       (nats://token@host: the user is the secret)
//	https://host1:2379,https://host2:2379                  (etcd; http, unix and unixs too)
//	sqlite:///path/state.db?_journal_mode=WAL&...          (litestream:// too)
//
// and a password may hold any character. Redact hides them for logs and
// errors; CheckEndpoint refuses the endpoints whose password the drivers
// would read differently from Redact (a password with / ? or # unescaped in
// a URL, a MySQL DSN without its database), for the drivers then put the
// pieces of the password in fields that their errors print.

// Redacted stands for a secret in logs and errors.
const Redacted = "REDACTED"

// listSchemes are the schemes whose endpoint is a comma-separated list of
// URLs, each with its own user info.
var listSchemes = []string{"nats", "http", "https", "unix", "unixs"}

// urlSchemes are the schemes whose endpoint kine parses as URLs.
var urlSchemes = []string{"postgres", "postgresql", "nats", "http", "https", "unix", "unixs"}

// etcdSchemes are the schemes of an etcd cluster, which kine passes through.
var etcdSchemes = []string{"http", "https", "unix", "unixs"}

// listStart is where the next URL of a list starts: a comma, then a scheme.
var listStart = regexp.MustCompile(`,[A-Za-z][A-Za-z0-9+.-]*://`)

// secretParam is a key=value parameter whose value is a secret: in a query
// (?password=...&), in a DSN of key=value pairs (password='...' ...), in
// SQLite's (_auth_pass=...). The value runs to the next & or blank, or to
// its closing quote.
var secretParam = regexp.MustCompile(`(?i)(^|[?&;\s])([a-z0-9_.-]*(?:pass|pwd|secret|token)[a-z0-9_.-]*)(\s*=\s*)('(?:\\.|[^'\\])*'?|[^&\s]*)`)

// Redact returns endpoint with its secrets replaced by REDACTED: the
// password of each user info (the whole user info for NATS, where a lone
// user is a token) and every parameter named like a password, token or
// secret. The rest stays as written, for the administrator to recognise.
// It errs on the side of hiding: the user info ends at the last @ of each
// URL, wherever that is.
func Redact(endpoint string) string {
	scheme, _, _ := strings.Cut(endpoint, "://")
	out := endpoint
	if !isSQLite(scheme) { // a path is no user info
		parts := splitEndpoint(endpoint)
		for i, part := range parts {
			parts[i] = redactUserinfo(part)
		}
		out = strings.Join(parts, ",")
	}
	return secretParam.ReplaceAllString(out, "${1}${2}${3}"+Redacted)
}

// splitEndpoint splits a list of URLs (etcd, NATS) into its URLs; any other
// endpoint is one part, commas and all (a password may hold a comma).
func splitEndpoint(endpoint string) []string {
	scheme, _, _ := strings.Cut(endpoint, "://")
	if !slices.Contains(listSchemes, scheme) {
		return []string{endpoint}
	}
	var parts []string
	for {
		loc := listStart.FindStringIndex(endpoint)
		if loc == nil {
			return append(parts, endpoint)
		}
		parts = append(parts, endpoint[:loc[0]])
		endpoint = endpoint[loc[0]+1:]
	}
}

// userinfo finds the user info of one URL or DSN (with or without a
// scheme): rest is what follows scheme://, at the index of the last @ in
// it (-1 for none).
func userinfo(part string) (scheme, rest string, at int) {
	scheme, rest, hasScheme := strings.Cut(part, "://")
	if !hasScheme {
		scheme, rest = "", part
	}
	return scheme, rest, strings.LastIndex(rest, "@")
}

// mysqlAddress is the protocol and address of a DSN: tcp(host:port),
// unix(/path).
var mysqlAddress = regexp.MustCompile(`^[a-z0-9]*(\(.*\))?$`)

func redactUserinfo(part string) string {
	scheme, rest, at := userinfo(part)
	prefix := part[:len(part)-len(rest)]
	if at < 0 {
		if address := bogusAddress(scheme, rest); address != "" {
			return prefix + Redacted + rest[len(address):]
		}
		return part
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	switch {
	case hasPassword:
		return prefix + user + ":" + Redacted + rest[at:]
	case scheme == "nats":
		return prefix + Redacted + rest[at:]
	default:
		return part
	}
}

// bogusAddress is the protocol and address of a MySQL DSN without user
// info (rest follows mysql://, or is all of an endpoint without scheme)
// when they are not tcp(...), unix(...) or nothing: a user:password without
// its @, which the driver takes for the protocol and its errors quote.
func bogusAddress(scheme, rest string) string {
	if scheme != "mysql" && scheme != "" {
		return ""
	}
	address := rest
	if slash := strings.LastIndex(rest, "/"); slash >= 0 {
		address = rest[:slash]
	}
	if mysqlAddress.MatchString(address) {
		return ""
	}
	return address
}

// secrets are the secrets of endpoint as they are written and as the
// drivers decode them, to scrub from text that may quote them.
func secrets(endpoint string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if dec, err := url.PathUnescape(s); err == nil && dec != s {
			out = append(out, dec)
		}
		if dec, err := url.QueryUnescape(s); err == nil && dec != s {
			out = append(out, dec)
		}
	}
	scheme, _, _ := strings.Cut(endpoint, "://")
	if !isSQLite(scheme) {
		for _, part := range splitEndpoint(endpoint) {
			partScheme, rest, at := userinfo(part)
			if at < 0 {
				add(bogusAddress(partScheme, rest))
				continue
			}
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
			} else if partScheme == "nats" {
				add(rest[:at])
			}
		}
	}
	for _, m := range secretParam.FindAllStringSubmatch(endpoint, -1) {
		add(strings.Trim(m[4], "'"))
	}
	// The pieces of each secret between the characters that cut URLs and
	// DSNs: a driver that cut the endpoint elsewhere quotes a piece.
	for _, s := range slices.Clone(out) {
		for _, piece := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("/@:?#,&=%", r) }) {
			if len(piece) >= 3 && piece != s {
				out = append(out, piece)
			}
		}
	}
	// Longest first, so that no longer secret is left half replaced.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// scrub replaces in text (an error of a driver, say) the endpoint by its
// redacted form and every secret of it by REDACTED.
func scrub(endpoint, text string) string {
	if endpoint == "" {
		return text
	}
	text = strings.ReplaceAll(text, endpoint, Redact(endpoint))
	for _, s := range secrets(endpoint) {
		text = strings.ReplaceAll(text, s, Redacted)
	}
	return text
}

// redactedError is an error whose message has no secret of the endpoint;
// it unwraps to the original, for errors.Is, which must not be printed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// RedactError returns err with every secret of endpoint scrubbed from its
// message (nil for nil): for the errors of kine and its drivers, which may
// quote the endpoint (a URL that does not parse is printed whole).
func RedactError(endpoint string, err error) error {
	if err == nil {
		return nil
	}
	msg := scrub(endpoint, err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// CheckEndpoint says what is wrong with a datastore endpoint before kine
// sees it, naming the endpoint only redacted. It refuses what kine would
// refuse with a less helpful error, and the endpoints whose password a
// driver would read differently from Redact: there the password (or part
// of it) would land in the host, port or database, which errors print.
func CheckEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	scheme, rest, hasScheme := strings.Cut(endpoint, "://")
	if !hasScheme || scheme == "" {
		return fmt.Errorf("datastore endpoint %q has no scheme: write it as postgres://user:password@host:5432/database, "+
			"mysql://user:password@tcp(host:3306)/database, nats://host:4222, https://etcd1:2379 or sqlite:///path/state.db", Redact(endpoint))
	}
	switch {
	case isSQLite(scheme):
		return nil
	case scheme == "mysql":
		return checkMySQL(endpoint, rest)
	case slices.Contains(urlSchemes, scheme):
		for _, part := range splitEndpoint(endpoint) {
			if err := checkURL(endpoint, scheme, part); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMySQL checks a DSN as go-sql-driver reads it: the user info ends at
// the last @ before the last /, and the password at the first : of it is
// taken as written. With a / after the last @ (the database), that is the
// last @, as Redact reads it.
func checkMySQL(endpoint, rest string) error {
	if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.Contains(rest[at:], "/") {
		return fmt.Errorf("datastore endpoint %q: write it as mysql://user:password@tcp(host:3306)/database, "+
			"the database after the address (the password is taken as written, / @ : ? # included; write an @ in the database or parameters as %%40)", Redact(endpoint))
	}
	if rest == "" || strings.HasPrefix(rest, "tcp(") || strings.HasPrefix(rest, "unix(") || strings.HasPrefix(rest, "/") {
		return nil // no user info: the driver's default user, without password
	}
	if !strings.Contains(rest, "@") {
		return fmt.Errorf("datastore endpoint %q: write it as mysql://user:password@tcp(host:3306)/database", Redact(endpoint))
	}
	return nil
}

// checkURL checks one URL of an endpoint as net/url reads it: the user info
// ends at the last @ before the first / ? or #, and must be the last @ of
// the URL, as Redact reads it.
func checkURL(endpoint, scheme, part string) error {
	partScheme, rest, at := userinfo(part)
	if partScheme != scheme {
		return fmt.Errorf("datastore endpoint %q: every URL of the list must be %s://", Redact(endpoint), scheme)
	}
	const escape = "percent-encode / ? # @ and %% in the user name and password (%%2F %%3F %%23 %%40 %%25), and write any other @ as %%40"
	authority := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		authority = rest[:end]
	}
	if at >= len(authority) {
		return fmt.Errorf("datastore endpoint %q: an @ after the host: "+escape, Redact(endpoint))
	}
	if strings.ContainsAny(rest, " \t") {
		return fmt.Errorf("datastore endpoint %q is not a URL (key=value connection strings are not supported): "+
			"write it as %s://user:password@host:port/database", Redact(endpoint), scheme)
	}
	u, err := url.Parse(part)
	if err != nil {
		// url's error quotes the URL; its detail names a bad port or host,
		// or quotes a bad %-escape, which may be in the password.
		detail := ""
		var ue *url.Error
		if errors.As(err, &ue) && !strings.Contains(ue.Err.Error(), "escape") {
			detail = " (" + scrub(part, ue.Err.Error()) + ")"
		}
		return fmt.Errorf("datastore endpoint %q is not a valid URL%s: "+escape, Redact(endpoint), detail)
	}
	if slices.Contains(etcdSchemes, scheme) && u.User != nil {
		return fmt.Errorf("datastore endpoint %q: the etcd client ignores a user name and password in the URL; "+
			"authenticate to etcd with a client certificate (--datastore-certfile, --datastore-keyfile)", Redact(endpoint))
	}
	return nil
}

func isSQLite(scheme string) bool { return scheme == "sqlite" || scheme == "litestream" }
