// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kubestellar/kubestellar/internal/provenance"
)

// Bounds of the in-memory login codes and sessions. They live in the
// server's memory only: a restart logs everyone out, and with several
// servers behind a load balancer a session works on the server that made it.
const (
	// CodeTTL is how long a login code may wait to be used (once).
	CodeTTL = 60 * time.Second
	// SessionIdleTTL ends a session nobody has used for that long.
	SessionIdleTTL = time.Hour
	// SessionMaxTTL ends any session that long after login.
	SessionMaxTTL = 12 * time.Hour
	// MaxCodes is how many unused, unexpired codes may wait at once.
	MaxCodes = 64
	// MaxSessions is how many sessions may be open at once; a login
	// beyond it ends the session closest to its end.
	MaxSessions = 256
)

// ErrTooManyCodes is returned when MaxCodes codes wait already.
var ErrTooManyCodes = errors.New("too many dashboard login codes are waiting to be used: use one or wait a minute")

// Identity is who a session acts as: the user the API server authenticated
// when the login code was made.
type Identity struct {
	Name   string              `json:"name"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
	// Privileged: the server's authentication vouched for the user as
	// an admin (provenance.IsPrivileged); its group names alone do not
	// make it one.
	Privileged bool `json:"privileged,omitempty"`
}

// IdentityOf copies what the dashboard keeps of u.
func IdentityOf(u user.Info) Identity {
	id := Identity{Name: u.GetName(), UID: u.GetUID(), Groups: append([]string(nil), u.GetGroups()...), Privileged: provenance.IsPrivileged(u)}
	if extra := u.GetExtra(); len(extra) > 0 {
		id.Extra = make(map[string][]string, len(extra))
		for k, v := range extra {
			id.Extra[k] = append([]string(nil), v...)
		}
	}
	return id
}

// User returns the identity as a user.Info, for authorization: as the
// server's authentication vouched for it at login.
func (id Identity) User() user.Info {
	u := &user.DefaultInfo{Name: id.Name, UID: id.UID, Groups: id.Groups, Extra: id.Extra}
	if id.Privileged {
		return provenance.Vouch(u)
	}
	return u
}

// Session is a logged-in browser.
type Session struct {
	ID       string
	Identity Identity
	Created  time.Time
	// LastUsed moves with each request; the session ends SessionIdleTTL after it.
	LastUsed time.Time
}

func (s *Session) expiry() time.Time {
	idle, limit := s.LastUsed.Add(SessionIdleTTL), s.Created.Add(SessionMaxTTL)
	if idle.Before(limit) {
		return idle
	}
	return limit
}

type code struct {
	identity Identity
	expires  time.Time
}

// Sessions holds the login codes and sessions, bounded, safe for
// concurrent use. Codes and session ids are 256 random bits.
type Sessions struct {
	now func() time.Time

	mu       sync.Mutex
	codes    map[string]code
	sessions map[string]*Session
}

// NewSessions returns an empty store reading the time from now.
func NewSessions(now func() time.Time) *Sessions {
	return &Sessions{now: now, codes: map[string]code{}, sessions: map[string]*Session{}}
}

func randomID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// NewCode records a one-time code for id, valid for CodeTTL.
func (s *Sessions) NewCode(id Identity) (string, time.Time, error) {
	c, err := randomID()
	if err != nil {
		return "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.pruneLocked(now)
	if len(s.codes) >= MaxCodes {
		return "", time.Time{}, ErrTooManyCodes
	}
	expires := now.Add(CodeTTL)
	s.codes[c] = code{identity: id, expires: expires}
	return c, expires, nil
}

// Redeem exchanges a code, once, for a new session.
func (s *Sessions) Redeem(c string) (*Session, bool, error) {
	id, err := randomID()
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	found, ok := s.codes[c]
	delete(s.codes, c)
	if !ok || !now.Before(found.expires) {
		return nil, false, nil
	}
	s.pruneLocked(now)
	for len(s.sessions) >= MaxSessions {
		s.evictLocked()
	}
	sess := &Session{ID: id, Identity: found.identity, Created: now, LastUsed: now}
	s.sessions[id] = sess
	return sess, true, nil
}

// Get returns the live session of id and marks it used.
func (s *Sessions) Get(id string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return Session{}, false
	}
	now := s.now()
	if !now.Before(sess.expiry()) {
		delete(s.sessions, id)
		return Session{}, false
	}
	sess.LastUsed = now
	return *sess, true
}

// Alive tells whether session id is still open, without marking it used
// (a live stream checks this, and must not keep an idle session alive).
func (s *Sessions) Alive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	return ok && s.now().Before(sess.expiry())
}

// End ends session id.
func (s *Sessions) End(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
}

// Counts returns how many codes and sessions are held.
func (s *Sessions) Counts() (codes, sessions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.codes), len(s.sessions)
}

func (s *Sessions) pruneLocked(now time.Time) {
	for c, v := range s.codes {
		if !now.Before(v.expires) {
			delete(s.codes, c)
		}
	}
	for id, sess := range s.sessions {
		if !now.Before(sess.expiry()) {
			delete(s.sessions, id)
		}
	}
}

// evictLocked ends the session that would end first.
func (s *Sessions) evictLocked() {
	var first *Session
	for _, sess := range s.sessions {
		if first == nil || sess.expiry().Before(first.expiry()) {
			first = sess
		}
	}
	if first != nil {
		delete(s.sessions, first.ID)
	}
}
