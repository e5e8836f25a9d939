// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package windows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func w(schedule string, d time.Duration, tz string) edgev2alpha1.UpdateWindow {
	return edgev2alpha1.UpdateWindow{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestAt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		windows []edgev2alpha1.UpdateWindow
		now     string
		open    bool
		change  string // "" for never
	}{
		{"no windows: always open", nil, "2026-12-03T10:00:00Z", true, ""},
		{"weekdays 02:00 for 2h, inside", []edgev2alpha1.UpdateWindow{w("0 2 * * 1-5", 2*time.Hour, "")}, "2026-12-03T03:30:00Z", true, "2026-12-03T04:00:00Z"},
		{"at the opening minute", []edgev2alpha1.UpdateWindow{w("0 2 * * 1-5", 2*time.Hour, "")}, "2026-12-03T02:00:00Z", true, "2026-12-03T04:00:00Z"},
		{"at the closing instant: closed", []edgev2alpha1.UpdateWindow{w("0 2 * * 1-5", 2*time.Hour, "")}, "2026-12-03T04:00:00Z", false, "2026-12-04T02:00:00Z"},
		{"Friday evening: opens on Monday", []edgev2alpha1.UpdateWindow{w("0 2 * * 1-5", 2*time.Hour, "")}, "2026-12-04T20:00:00Z", false, "2026-12-07T02:00:00Z"},
		{"in a time zone", []edgev2alpha1.UpdateWindow{w("0 2 * * *", time.Hour, "Europe/Paris")}, "2026-12-03T01:30:00Z", true, "2026-12-03T02:00:00Z"},
		{"a window over midnight", []edgev2alpha1.UpdateWindow{w("0 23 * * *", 3*time.Hour, "")}, "2026-12-04T01:00:00Z", true, "2026-12-04T02:00:00Z"},
		{"two windows that overlap close together", []edgev2alpha1.UpdateWindow{w("0 1 * * *", 2*time.Hour, ""), w("0 2 * * *", 3*time.Hour, "")},
			"2026-12-03T01:30:00Z", true, "2026-12-03T05:00:00Z"},
		{"the nearer of two openings", []edgev2alpha1.UpdateWindow{w("0 9 * * *", time.Hour, ""), w("30 6 * * *", time.Hour, "")},
			"2026-12-03T05:00:00Z", false, "2026-12-03T06:30:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.windows)
			require.NoError(t, err)
			open, change := s.At(at(tc.now))
			require.Equal(t, tc.open, open)
			if tc.change == "" {
				require.True(t, change.IsZero())
			} else {
				require.True(t, at(tc.change).Equal(change), "change at %s, want %s", change.UTC(), tc.change)
			}
		})
	}
}

// TestParseRefuses: what a syncer could not read is an error naming the
// field, its value and what to give instead.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		window edgev2alpha1.UpdateWindow
		field  string
		want   string
	}{
		{w("not cron", time.Hour, ""), "spec.updateWindows[1].schedule", "not a cron schedule"},
		{w("0 2 * * *", 0, ""), "spec.updateWindows[1].duration", "more than 0"},
		{w("0 2 * * *", 8*24*time.Hour, ""), "spec.updateWindows[1].duration", "at most 168h0m0s"},
		{w("0 2 * * *", time.Hour, "Mars/Olympus"), "spec.updateWindows[1].timeZone", "IANA name"},
		{w("0 2 * * *", time.Hour, "Local"), "spec.updateWindows[1].timeZone", "IANA name"},
		{w("TZ=UTC 0 2 * * *", time.Hour, ""), "spec.updateWindows[1].schedule", "timeZone"},
		{w("@every 1h", time.Hour, ""), "spec.updateWindows[1].schedule", "@every"},
		{w("0 0 30 2 *", time.Hour, ""), "spec.updateWindows[1].schedule", "never opens"},
		{w("0 2 * * * *", time.Hour, ""), "spec.updateWindows[1].schedule", "not a cron schedule"},
	} {
		_, err := Parse([]edgev2alpha1.UpdateWindow{w("@daily", time.Hour, ""), tc.window})
		var fe *field.Error
		require.True(t, errors.As(err, &fe), "%v: %v", tc.window, err)
		require.Equal(t, tc.field, fe.Field)
		require.Contains(t, fe.Error(), tc.want)
	}
}
