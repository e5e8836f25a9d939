// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package bootstrap shares one identity among the servers of a cluster, as
// k3s does for servers on an external datastore: the first server started
// with a token generates the CA and the admin token, and stores them in the
// datastore encrypted with a key derived from that token; every later
// server started with the same token loads them. So every server presents
// a certificate of the same CA, and admin kubeconfigs and syncer join
// tokens work against any of them. A server started with another token
// cannot decrypt them and refuses to start, rather than making a second CA.
package bootstrap

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key is the datastore key of the encrypted identity.
const Key = "/kubestellar/bootstrap/identity"

// Identity is what all servers of a cluster share.
type Identity struct {
	CACert     []byte `json:"caCert"`
	CAKey      []byte `json:"caKey"`
	AdminToken string `json:"adminToken"`
}

// sealed is the stored form.
type sealed struct {
	Version    int    `json:"version"`
	Salt       []byte `json:"salt"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// kdfIterations is PBKDF2-SHA256's work factor (OWASP's 2023 advice).
const kdfIterations = 600_000

// ErrWrongToken is returned when the stored identity was sealed with
// another token.
var ErrWrongToken = errors.New("the datastore holds the identity of a cluster started with another --token: " +
	"start this server with the token the first server was started with")

func aead(token string, salt []byte) (cipher.AEAD, error) {
	key, err := pbkdf2.Key(sha256.New, token, salt, kdfIterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts an identity with a key derived from token (AES-256-GCM).
func Seal(id Identity, token string) ([]byte, error) {
	if token == "" {
		return nil, errors.New("sealing the cluster identity needs a token")
	}
	plain, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	s := sealed{Version: 1, Salt: make([]byte, 16)}
	if _, err := rand.Read(s.Salt); err != nil {
		return nil, err
	}
	gcm, err := aead(token, s.Salt)
	if err != nil {
		return nil, err
	}
	s.Nonce = make([]byte, gcm.NonceSize())
	if _, err := rand.Read(s.Nonce); err != nil {
		return nil, err
	}
	s.Ciphertext = gcm.Seal(nil, s.Nonce, plain, []byte(Key))
	return json.Marshal(s)
}

// Open decrypts what Seal made; ErrWrongToken for another token.
func Open(data []byte, token string) (Identity, error) {
	var id Identity
	var s sealed
	if err := json.Unmarshal(data, &s); err != nil || s.Version != 1 {
		return id, fmt.Errorf("the cluster identity in the datastore (%s) is not one this version reads", Key)
	}
	gcm, err := aead(token, s.Salt)
	if err != nil {
		return id, err
	}
	if len(s.Nonce) != gcm.NonceSize() {
		return id, fmt.Errorf("the cluster identity in the datastore (%s) is damaged", Key)
	}
	plain, err := gcm.Open(nil, s.Nonce, s.Ciphertext, []byte(Key))
	if err != nil {
		return id, ErrWrongToken
	}
	if err := json.Unmarshal(plain, &id); err != nil {
		return id, fmt.Errorf("the cluster identity in the datastore (%s) is damaged: %w", Key, err)
	}
	return id, nil
}

// Sync returns the cluster's identity: the one in the datastore, or, when
// there is none yet, local() — stored for the servers to come. Two servers
// starting at once agree: the first write wins and the other loads it.
// created says this server's identity was stored.
func Sync(ctx context.Context, kv clientv3.KV, token string, local func() (Identity, error)) (id Identity, created bool, err error) {
	resp, err := kv.Get(ctx, Key)
	if err != nil {
		return id, false, fmt.Errorf("reading the cluster identity from the datastore: %w", err)
	}
	if len(resp.Kvs) > 0 {
		id, err = Open(resp.Kvs[0].Value, token)
		return id, false, err
	}
	mine, err := local()
	if err != nil {
		return id, false, err
	}
	data, err := Seal(mine, token)
	if err != nil {
		return id, false, err
	}
	// Create only if absent (the form kine supports, as the API server uses it).
	txn, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(Key), "=", 0)).
		Then(clientv3.OpPut(Key, string(data))).Commit()
	if err != nil {
		return id, false, fmt.Errorf("storing the cluster identity in the datastore: %w", err)
	}
	if txn.Succeeded {
		return mine, true, nil
	}
	resp, err = kv.Get(ctx, Key)
	if err != nil {
		return id, false, fmt.Errorf("reading the cluster identity from the datastore: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return id, false, errors.New("the cluster identity vanished from the datastore while this server started: start it again")
	}
	id, err = Open(resp.Kvs[0].Value, token)
	return id, false, err
}
