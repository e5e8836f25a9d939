// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package windows reads a SyncTarget's update windows: when, by a cron
// schedule, a duration and a time zone, its edge takes changes. The
// syncer enforces them at the edge, the server's admission checks them,
// and a rollout reads them; all three read them here.
package windows

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the image has no zoneinfo of its own

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// MaxDuration bounds how long one window stays open.
const MaxDuration = 7 * 24 * time.Hour

// window is one parsed window.
type window struct {
	schedule cron.Schedule
	open     time.Duration
}

// Schedule is a SyncTarget's windows. With none, the edge takes changes
// at any time.
type Schedule struct {
	windows []window
}

// parser reads cron's five fields (minute hour day-of-month month
// day-of-week) and the descriptors (@daily, @weekly...) but @every, which
// is an interval, not a time of day.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads windows; the error, a *field.Error, names the first field
// that is wrong by its path in the SyncTarget
// (spec.updateWindows[i].schedule...).
func Parse(ws []edgev2alpha1.UpdateWindow) (Schedule, error) {
	var s Schedule
	for i, w := range ws {
		at := field.NewPath("spec", "updateWindows").Index(i)
		if strings.Contains(w.Schedule, "TZ=") || strings.HasPrefix(strings.TrimSpace(w.Schedule), "@every") {
			return Schedule{}, field.Invalid(at.Child("schedule"), w.Schedule, "give the time zone in timeZone, and a time of day rather than @every")
		}
		loc := time.UTC
		if w.TimeZone != "" {
			l, err := time.LoadLocation(w.TimeZone)
			if err != nil || w.TimeZone == "Local" {
				return Schedule{}, field.Invalid(at.Child("timeZone"), w.TimeZone, "not a time zone: give an IANA name such as Europe/Paris")
			}
			loc = l
		}
		sc, err := parser.Parse(w.Schedule)
		if err != nil {
			return Schedule{}, field.Invalid(at.Child("schedule"), w.Schedule,
				fmt.Sprintf("not a cron schedule (minute hour day-of-month month day-of-week, or @daily...): %v", err))
		}
		spec, ok := sc.(*cron.SpecSchedule)
		if !ok {
			return Schedule{}, field.Invalid(at.Child("schedule"), w.Schedule, "not a time of day")
		}
		spec.Location = loc
		if d := w.Duration.Duration; d <= 0 || d > MaxDuration {
			return Schedule{}, field.Invalid(at.Child("duration"), d.String(), fmt.Sprintf("a window is open for more than 0 and at most %s", MaxDuration))
		}
		// Five years of no opening (February 30th) is a mistake.
		if spec.Next(time.Now()).IsZero() {
			return Schedule{}, field.Invalid(at.Child("schedule"), w.Schedule, "never opens")
		}
		s.windows = append(s.windows, window{schedule: spec, open: w.Duration.Duration})
	}
	return s, nil
}

// Any reports whether there are windows at all.
func (s Schedule) Any() bool { return len(s.windows) > 0 }

// At reports whether the edge takes changes at t, and when that changes
// next: when the windows open at t have all closed, or when the next one
// opens. With no windows it is open for good (the zero time).
func (s Schedule) At(t time.Time) (open bool, change time.Time) {
	if len(s.windows) == 0 {
		return true, time.Time{}
	}
	closes, isOpen := s.closesAfter(t)
	if isOpen {
		// Windows that open before the last one closes keep it open.
		for range 100 {
			later, stillOpen := s.closesAfter(closes)
			if !stillOpen || !later.After(closes) {
				break
			}
			closes = later
		}
		return true, closes
	}
	var next time.Time
	for _, w := range s.windows {
		if n := w.schedule.Next(t); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return false, next
}

// closesAfter reports whether a window is open at t and, if so, the
// latest time one of those open at t closes.
func (s Schedule) closesAfter(t time.Time) (time.Time, bool) {
	var closes time.Time
	open := false
	for _, w := range s.windows {
		// The first opening after t-open is the only one that can still be
		// open at t, and any after it up to t extend it.
		a := w.schedule.Next(t.Add(-w.open))
		for n := 0; !a.IsZero() && !a.After(t) && n < 1000; n++ {
			if c := a.Add(w.open); c.After(t) {
				open = true
				if c.After(closes) {
					closes = c
				}
			}
			a = w.schedule.Next(a)
		}
	}
	return closes, open
}
