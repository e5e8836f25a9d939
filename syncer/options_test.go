// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	const tok = "K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef"
	valid := func() *Options {
		o := NewOptions()
		o.Server, o.Token, o.SyncTarget, o.DataDir = "https://center:6443", tok, "edge1", "/tmp/x"
		return o
	}
	for _, tc := range []struct {
		desc    string
		change  func(*Options)
		wantErr string
	}{
		{desc: "valid", change: func(*Options) {}},
		{desc: "no server", change: func(o *Options) { o.Server = "" }, wantErr: "--server is required"},
		{desc: "http server", change: func(o *Options) { o.Server = "http://center:6443" }, wantErr: "--server"},
		{desc: "server with a space path", change: func(o *Options) { o.Server = "https://center:6443/spaces/x" }, wantErr: "must not have a path"},
		{desc: "no token", change: func(o *Options) { o.Token = "" }, wantErr: "--token is required"},
		{desc: "malformed token", change: func(o *Options) { o.Token = "nope" }, wantErr: "--token"},
		{desc: "bare token without a CA", change: func(o *Options) { o.Token = "abcdef.0123456789abcdef" }, wantErr: "--certificate-authority"},
		{desc: "bare token with a CA", change: func(o *Options) { o.Token, o.CertificateAuthority = "abcdef.0123456789abcdef", "/ca.crt" }},
		{desc: "no sync target", change: func(o *Options) { o.SyncTarget = "" }, wantErr: "--sync-target is required"},
		{desc: "bad sync target", change: func(o *Options) { o.SyncTarget = "Edge_1" }, wantErr: "--sync-target"},
		{desc: "heartbeat too fast", change: func(o *Options) { o.HeartbeatInterval = time.Millisecond }, wantErr: "--heartbeat-interval"},
		{desc: "no workers", change: func(o *Options) { o.Workers = 0 }, wantErr: "--workers"},
		{desc: "no edge rate", change: func(o *Options) { o.EdgeQPS = 0 }, wantErr: "--edge-qps"},
		{desc: "no edge burst", change: func(o *Options) { o.EdgeBurst = 0 }, wantErr: "--edge-burst"},
		{desc: "edge rate unlimited", change: func(o *Options) { o.EdgeQPS, o.EdgeBurst = -1, 0 }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := valid()
			tc.change(o)
			err := o.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestCompleteDefaultsTheDataDir(t *testing.T) {
	o := NewOptions()
	o.Server, o.SyncTarget = "https://center:6443/", "edge1"
	o.Complete()
	require.Equal(t, "https://center:6443", o.Server)
	require.True(t, strings.HasSuffix(o.DataDir, "/edge1"), o.DataDir)
}
