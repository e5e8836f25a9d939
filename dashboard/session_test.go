// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestSessions() (*Sessions, *clock) {
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return NewSessions(c.now), c
}

var alice = Identity{Name: "alice", Groups: []string{"team-a", "system:authenticated"}, Extra: map[string][]string{"k": {"v"}}}

func TestCodes(t *testing.T) {
	tests := []struct {
		desc   string
		wait   time.Duration
		twice  bool
		wantOK bool
		bogus  bool
	}{
		{desc: "redeemed at once", wantOK: true},
		{desc: "redeemed just before expiry", wait: CodeTTL - time.Millisecond, wantOK: true},
		{desc: "expired", wait: CodeTTL},
		{desc: "redeemed twice", twice: true},
		{desc: "unknown code", bogus: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s, c := newTestSessions()
			code, expires, err := s.NewCode(alice)
			require.NoError(t, err)
			require.Equal(t, c.t.Add(CodeTTL), expires)
			require.Len(t, code, 43, "256 random bits, base64url")
			c.advance(tc.wait)
			if tc.bogus {
				code += "x"
			}
			if tc.twice {
				_, ok, err := s.Redeem(code)
				require.NoError(t, err)
				require.True(t, ok)
			}
			sess, ok, err := s.Redeem(code)
			require.NoError(t, err)
			require.Equal(t, tc.wantOK, ok)
			if !ok {
				require.Nil(t, sess)
				return
			}
			require.Equal(t, alice, sess.Identity)
			got, ok := s.Get(sess.ID)
			require.True(t, ok)
			require.Equal(t, alice, got.Identity)
		})
	}
}

func TestCodesBounded(t *testing.T) {
	s, c := newTestSessions()
	for range MaxCodes {
		_, _, err := s.NewCode(alice)
		require.NoError(t, err)
	}
	_, _, err := s.NewCode(alice)
	require.ErrorIs(t, err, ErrTooManyCodes)
	// Expired codes make room.
	c.advance(CodeTTL)
	_, _, err = s.NewCode(alice)
	require.NoError(t, err)
	codes, _ := s.Counts()
	require.Equal(t, 1, codes)
}

func login(t *testing.T, s *Sessions, id Identity) *Session {
	t.Helper()
	code, _, err := s.NewCode(id)
	require.NoError(t, err)
	sess, ok, err := s.Redeem(code)
	require.NoError(t, err)
	require.True(t, ok)
	return sess
}

func TestSessionExpiry(t *testing.T) {
	s, c := newTestSessions()
	sess := login(t, s, alice)
	require.NotEqual(t, sess.ID, "")

	// Used within the idle timeout, it lives on...
	for range 3 {
		c.advance(SessionIdleTTL - time.Minute)
		_, ok := s.Get(sess.ID)
		require.True(t, ok)
	}
	// ...Alive does not count as use...
	c.advance(SessionIdleTTL - time.Minute)
	require.True(t, s.Alive(sess.ID))
	c.advance(time.Minute)
	require.False(t, s.Alive(sess.ID), "idle for SessionIdleTTL")
	_, ok := s.Get(sess.ID)
	require.False(t, ok)

	// ...and none outlives SessionMaxTTL, however used.
	sess = login(t, s, alice)
	for elapsed := time.Duration(0); elapsed < SessionMaxTTL-30*time.Minute; elapsed += 30 * time.Minute {
		c.advance(30 * time.Minute)
		_, ok := s.Get(sess.ID)
		require.True(t, ok)
	}
	c.advance(30 * time.Minute)
	_, ok = s.Get(sess.ID)
	require.False(t, ok, "older than SessionMaxTTL")

	// Logout ends it.
	sess = login(t, s, alice)
	s.End(sess.ID)
	_, ok = s.Get(sess.ID)
	require.False(t, ok)
}

func TestSessionsBounded(t *testing.T) {
	s, c := newTestSessions()
	first := login(t, s, alice)
	c.advance(time.Second)
	for range MaxSessions - 1 {
		login(t, s, alice)
	}
	_, sessions := s.Counts()
	require.Equal(t, MaxSessions, sessions)
	// One more ends the session closest to its end: the first.
	c.advance(time.Second)
	latest := login(t, s, alice)
	_, sessions = s.Counts()
	require.Equal(t, MaxSessions, sessions)
	_, ok := s.Get(first.ID)
	require.False(t, ok)
	_, ok = s.Get(latest.ID)
	require.True(t, ok)
}

func TestSessionCookie(t *testing.T) {
	rec := httptest.NewRecorder()
	http.SetCookie(rec, SessionCookie("abc"))
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, CookieName, c.Name)
	require.Equal(t, "abc", c.Value)
	require.True(t, c.HttpOnly)
	require.True(t, c.Secure)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/dashboard/", c.Path)
	require.Equal(t, int(SessionMaxTTL/time.Second), c.MaxAge)
}
