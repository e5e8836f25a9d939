// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubestellar/kubestellar/internal/jointoken"
	"github.com/kubestellar/kubestellar/internal/version"
)

// Identity is what the server says the syncer's token is for.
type Identity struct {
	InventorySpace string `json:"inventorySpace"`
	SyncTarget     string `json:"syncTarget"`
	MailboxSpace   string `json:"mailboxSpace"`
}

// IdentityPath is where the server tells a syncer who it is.
const IdentityPath = "/kubestellar/v1/syncer"

// errPermanent marks connection errors that retrying cannot fix.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// IsPermanent reports whether err will not go away by trying again.
func IsPermanent(err error) bool {
	var p errPermanent
	return errors.As(err, &p)
}

// serverCA returns the CA that the server's certificate must chain to: the
// one the token pins (read from the server and checked against the token's
// hash before anything else is sent), or the --certificate-authority file.
func serverCA(ctx context.Context, o *Options, server string, tok jointoken.Token) ([]byte, error) {
	if o.CertificateAuthority != "" {
		pem, err := os.ReadFile(o.CertificateAuthority)
		if err != nil {
			return nil, errPermanent{fmt.Errorf("--certificate-authority: %w", err)}
		}
		if tok.CAHash != "" && jointoken.CAHash(pem) != tok.CAHash {
			return nil, errPermanent{fmt.Errorf("--certificate-authority %s is not the CA the token pins", o.CertificateAuthority)}
		}
		return pem, nil
	}
	// The CA is public; what makes it trusted is its hash in the token. So
	// it is read without verifying the server, and nothing secret is sent.
	transport := &http.Transport{Proxy: o.ProxyFunc(),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // checked against the token's hash below
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 15 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/cacerts", nil)
	if err != nil {
		return nil, errPermanent{err}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the server's CA: %w", err)
	}
	defer resp.Body.Close()
	pem, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the server's CA: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the server's CA: %s answered %s", server, resp.Status)
	}
	if got := jointoken.CAHash(pem); got != tok.CAHash {
		return nil, errPermanent{fmt.Errorf("the server at %s has CA %s, but the token pins CA %s: "+
			"the token is for another server (or something is in between); get a token from this server with `kubestellar synctarget create` or `kubestellar token create`",
			server, short(got), short(tok.CAHash))}
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, errPermanent{fmt.Errorf("the server at %s sent a CA that is not PEM certificates", server)}
	}
	return pem, nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12] + "…"
	}
	return hash
}

// baseConfig is the client configuration of the center, as the syncer;
// requests go to the server in use.
func baseConfig(o *Options, tok jointoken.Token, ca []byte, srv *servers) *rest.Config {
	return &rest.Config{
		Host:            srv.URL(),
		WrapTransport:   srv.wrap,
		BearerToken:     tok.Bearer(),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		UserAgent:       "kubestellar-syncer/" + version.Version,
		Proxy:           o.ProxyFunc(),
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
}

// watchConfig is cfg for caches: without its request timeout, which the
// HTTP client applies to the whole of a response, a watch's too, so that
// every watch would end after it and start again (the server ends a watch
// after 5 to 10 minutes, and the client notices a dead connection by its
// HTTP/2 health checks).
func watchConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Timeout = 0
	return out
}

// spaceConfig addresses one space of the center.
func spaceConfig(base *rest.Config, space string) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Host = base.Host + "/spaces/" + space
	return cfg
}

// identify asks the server who the token is for, and checks that it is
// for the SyncTarget the syncer was told to serve.
func identify(ctx context.Context, client *http.Client, base *rest.Config, syncTarget string) (Identity, error) {
	var id Identity
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.Host+IdentityPath, nil)
	if err != nil {
		return id, errPermanent{err}
	}
	resp, err := client.Do(req)
	if err != nil {
		return id, fmt.Errorf("connecting to %s: %w", base.Host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return id, fmt.Errorf("the server does not accept the token (revoked, expired, or not yet known to a server that just started): get a new one with `kubestellar token create --sync-target INVENTORY/%s`", syncTarget)
	case http.StatusForbidden:
		return id, errPermanent{fmt.Errorf("the token is not a syncer token: use the one `kubestellar synctarget create` printed")}
	default:
		return id, fmt.Errorf("asking %s who the token is for: %s", base.Host, resp.Status)
	}
	if err := json.Unmarshal(body, &id); err != nil {
		return id, fmt.Errorf("reading %s: %w", IdentityPath, err)
	}
	if id.SyncTarget != syncTarget {
		return id, errPermanent{fmt.Errorf("the token is for SyncTarget %s/%s, not --sync-target %s", id.InventorySpace, id.SyncTarget, syncTarget)}
	}
	return id, nil
}
