// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// The performance doc's table (docs/performance.md) is generated. Its
// figures come from docs/performance.json, the record: for each section,
// the rows of the newest run that measured it, with that run's commit,
// time and machine. Each run of make bench merges its sections into the
// record and writes the table again, so that a run of one section leaves
// the others' figures as they were measured. The goals, and what bounds
// each figure, are the goals table below; how a figure moved is in git.

// record is docs/performance.json.
type record struct {
	Sections []recordSection `json:"sections"`
}

// recordSection is one section as the newest run that measured it left it.
type recordSection struct {
	Name     string      `json:"name"`
	Commit   string      `json:"commit"`
	Measured time.Time   `json:"measured"`
	Machine  machine     `json:"machine"`
	Args     []string    `json:"args"`
	Rows     []reportRow `json:"rows"`
}

// merge puts the sections of r that measured something, without an
// error, in place of the record's sections of the same names (new ones at
// the end).
func (rec *record) merge(r *report) {
	for _, s := range r.Sections {
		if s.Error != "" || len(s.Rows) == 0 {
			continue
		}
		rs := recordSection{Name: s.Name, Commit: r.Commit, Measured: r.Started, Machine: r.Machine, Args: r.Args, Rows: s.Rows}
		replaced := false
		for i := range rec.Sections {
			if rec.Sections[i].Name == s.Name {
				rec.Sections[i], replaced = rs, true
			}
		}
		if !replaced {
			rec.Sections = append(rec.Sections, rs)
		}
	}
}

func loadRecord(path string) (*record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &record{}, nil
	}
	if err != nil {
		return nil, err
	}
	rec := &record{}
	if err := json.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("%s is not a performance record: %w", path, err)
	}
	return rec, nil
}

func (rec *record) write(path string) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// The generated table sits between these lines of the doc; the prose
// around it is written by hand.
const (
	tableBegin = "<!-- BEGIN GENERATED TABLE: make bench writes it from performance.json; goals and bounds are in test/bench/perfdoc.go -->"
	tableEnd   = "<!-- END GENERATED TABLE -->"
)

// goal is what a figure should be and what bounds it: for the rows of a
// section whose metric starts with metric ("" for every row of the
// section without a goal of its own).
type goal struct {
	section, metric string
	goal, bound     string
}

// goals are the figures' goals (issue 18's, one 2-core machine with 24 GiB,
// unless a row says otherwise) and, in a sentence, what bounds each as the
// last look at a profile found it.
var goals = []goal{
	{section: "cold start", metric: "time to ready, fresh data dir", goal: "< 2 s"},
	{section: "one server", metric: "idle RSS", goal: "≤ 120 MiB",
		bound: "A live heap of about 30 MB and its growth before a collection (GOGC 100), the goroutines' stacks, and the binary's pages, which the server reads a page at a time once ready."},
	{section: "one server", metric: "RSS cost per space",
		bound: "Each space's default roles and objects in the watch cache, decoded, with the heap's headroom over them."},
	{section: "syncer", metric: "syncer idle RSS", goal: "≤ 40 MiB",
		bound: "A live heap of about 11 MB, a third of it the whole binary's package inits, grown to 1.4× by the syncer's GOGC 40, plus the binary's pages."},
	{section: "syncer", metric: "syncer: of which WDS create → mailbox copy", goal: "p99 ≤ 1 s at 500 creates/s",
		bound: "CPU: 5.5–6.5 ms per object in all processes is 2.7–3.3 cores' worth at 500/s, so the pipeline lags the creates and catches up after them."},
	{section: "fan-out", metric: "mailboxes: ", goal: "≤ 60 s for 10,000 SyncTargets",
		bound: "The server's CPU: three writes per SyncTarget (the SyncTarget, stored naming its mailbox, its Location and its mailbox Space; the mailbox's SyncerConfig waits for its syncer), each decoded from the request, validated, given its managed fields and decoded again after it is stored, and each event decoded by every controller's watch."},
	{section: "fan-out", metric: "fan-out: ", goal: "≤ 60 s for 1,000 SyncTargets; ≤ 15 min for 10,000",
		bound: "The server's CPU, since SQLite's waiting inserts are committed together."},
	{section: "fan-out", metric: "server RSS after fan-out", goal: "≤ 600 MiB for 1,000 SyncTargets; ≤ 4 GiB for 10,000",
		bound: "The heap grows to twice what is live (the copies' records and the caches' indexes over them) before a collection, with the binary's pages and the goroutines' stacks on top."},
	{section: "live edges", metric: "edges shown disconnected", goal: "0 at any moment"},
	{section: "live edges", metric: "server RSS at rest, ", goal: "≤ 4 GiB for 10,000 live edges",
		bound: "The live heap (next row) and its growth before a collection, the goroutines' stacks and the binary: at 10,000 edges the live heap alone would be about 2.7 GiB, so the goal needs an edge's watches to cost less than an HTTP/2 stream and an API server handler each."},
	{section: "live edges", metric: "server live heap at rest, ",
		bound: "Per edge, in a heap profile at 1,000 (-profiles): its HTTP/2 streams' and watch handlers' state (buffers, header tables, request contexts, encoders: about a quarter), objects decoded from its watches' events from the datastore and still held (a fifth), the watch caches' entries (a tenth), its tunnel (a tenth)."},
	{section: "live edges", metric: "server goroutines at rest, ",
		bound: "An idle edge holds two watches: its SyncerConfig from the datastore (one goroutine, served from the demultiplexer; five through the etcd client before) and its SyncTarget from the watch cache (one), each with its handler; its HTTP/2 connection's two and its tunnel's reader (one sweeper checks every tunnel for silence)."},
	{section: "live edges", metric: "server CPU at rest, ",
		bound: "The tunnels' pings (every 5 s each) and the watches' bookmarks: a heartbeat reads the syncer's own cache of its SyncTarget (one watch by name) and writes nothing unless its status changed (at most every 5 min while its tunnel is open)."},
	{section: "live edges", metric: "fan-out: ", goal: "≤ 5 min for 100 objects × 10,000 live edges",
		bound: "Every copy is a create in its mailbox, an event on its syncer's watch of the mailbox (served from the datastore's demultiplexer, apart from the watch caches') and the syncer's apply at its edge; the simulated syncers share the two cores with the server."},
	{section: "live edges", metric: "one update → all ", goal: "p50 ≤ 10 s, p99 ≤ 30 s for 10,000 live edges"},
	{section: "live edges", metric: "status: every edge reports", goal: "≤ 2 min for 100 objects × 10,000 live edges",
		bound: "In part the syncers' priority level in APF: its 3 of the server's 6 seats on 2 cores carry every edge's status writes, one SQLite write each; at 1,000 edges they waited about 3 s on average, 4 % were refused (429) and sent again, and the server used about one core. With three times the seats one run took 47 s, with 7 refusals and 3.8 ms of CPU per report, against 53–71 s, 411–485 refusals and 4.7–6.2 ms in two runs with the default (128 queues instead of 64 refused as many: not the queues' length). The simulators' own writes at the edges took 15–23 s of it; each Deployment's summary reads all its copies at most once a second."},
	{section: "live edges", metric: "restart with ", goal: "≤ 60 s SIGTERM → every tunnel and watch back, for 10,000 live edges; none shown disconnected for longer than the restart"},
	{section: "HA, 3 servers on PostgreSQL", metric: "SIGKILL of the leading server", goal: "≤ 2 min to every edge on a survivor and every mailbox exact, for 10,000 live edges on 3 servers",
		bound: "The new leader's start (its Lease runs out 10 s after the last renewal; its controllers list every space before they reconcile each mailbox again), and the moved syncers' watches, which read their ranges' history since the revisions they had reached, served from the demultiplexer."},
	{section: "rollouts", metric: "server CPU per copy placed, Progressive ÷ All", goal: "≤ 1.10×",
		bound: "The syncer's report rides the SyncTarget status write its heartbeat makes anyway once the copies are applied; beyond All's, the rollout's looks over every destination, the placement's status as the waves move and the record in each mailbox's SyncerConfig, written with its resources."},
	{section: "rollouts", metric: "one ConfigMap updated → canary wave", goal: "≤ 1 s"},
	{section: "rollouts", metric: "server CPU per edge for one update, Progressive ÷ All",
		bound: "A change writes, in each mailbox, the copy that changed and the record of the revision (an update of the SyncerConfig, a custom resource), and its syncer's report is a SyncTarget status write of its own (nothing else changed at the edge), where All writes the copy alone; each wave's admission looks at each mailbox again."},
	{section: "CRDs bound and per space", metric: "per space / bound: RSS per space, own CRDs",
		bound: "A space's own definition has no watch cache (one would hold every space's objects of the name): its serving entry is the upstream handler's schemas, validators and field sets alone."},
	{section: "CRDs bound and per space", metric: "per space / bound: list p50",
		bound: "A space's own custom resources are listed from the datastore at each request, not from a watch cache (one would decode every space's objects of the name, whatever each defines it as)."},
	{section: "tunnels", metric: "restart with ", goal: "≤ 5 s SIGTERM → all tunnels open",
		bound: "The exit waits for an idle HTTP/2 client to answer GOAWAY after recording tunnels closed; the start decodes the SyncTargets and makes a TLS handshake per tunnel."},
	{section: "forwarding", metric: "tunnel / direct", goal: "≥ 0.9× throughput, ≤ 1.3× latency",
		bound: "Not reachable on one 2-core machine, by ours or by konnectivity: every process of both paths shares the cores, and ours ends HTTP at both ends so that the admin's token never leaves the center."},
	{section: "stock kube-apiserver side by side", metric: "", goal: "creates ≥ 1.2× the stock server's; LIST p50 ≤ 1.0×",
		bound: "CPU for creates (every process shares 2 cores); for LIST, encoding the kubestellar.io/space annotation every object of ours carries."},
	{section: "tenants", metric: "noisy neighbour", goal: "≤ 2×",
		bound: "With a seat kept for the other flows, what is left is the cores the quiet request shares with the flood's one running request and the writers' own process."},
	{section: "tenants", metric: "RBAC on ÷ admin", goal: "≥ 0.9"},
	{section: "flood", metric: "flood: RSS per space at its limits", goal: "1,000 spaces at the limits within 24 GiB",
		bound: "The watch cache's decoded objects (1,000 per space), each space's quota controller and admission policy plug-ins, and the heap's headroom over them (GOGC 100)."},
	{section: "flood", metric: "flood: copies placed / left out", goal: "copies bounded by the mailbox limits"},
	{section: "flood", metric: "flood: quiet p99 beside the full spaces ÷ before", goal: "unchanged within the noise"},
	{section: "soak", metric: "soak: server RSS", goal: "grows ≤ 10 % after the warm-up",
		bound: "The datastore's history (one 5-minute compaction interval) and the caches over it fill during the warm-up; after it the heap swings with the churn's work in flight between two collections (GOGC 100). A leak would grow sample after sample."},
	{section: "soak", metric: "soak: goroutines", goal: "grows ≤ 10 % after the warm-up"},
	{section: "soak", metric: "soak: SQLite state.db",
		bound: "One compaction interval (5 min) of history, most of it the syncers' status writes and the controllers' label patches."},
	{section: "soak", metric: "soak: every mailbox exact", goal: "within -soak-settle (5 min)"},
	{section: "chaos", metric: "chaos: ready → every mailbox exact", goal: "every mailbox exact, and still 15 s later",
		bound: "The restarted server lists every mailbox and WDS object once and writes what the kill left missing."},
}

// goalOf returns the goal and bound of a row. A section named with its
// options ("fan-out, 10000 SyncTargets × 100 objects") has the goals of
// the section it varies.
func goalOf(section, metric string) (string, string) {
	best := -1
	for i, g := range goals {
		if (g.section == section || strings.HasPrefix(section, g.section+", ")) && strings.HasPrefix(metric, g.metric) && (best < 0 || len(g.metric) > len(goals[best].metric)) {
			best = i
		}
	}
	if best < 0 {
		return "", ""
	}
	return goals[best].goal, goals[best].bound
}

// table renders the record as the doc's table.
func (rec *record) table() string {
	var b strings.Builder
	b.WriteString("| section | figure | value | goal | measured | what bounds it |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, s := range rec.Sections {
		m := s.Machine
		measured := fmt.Sprintf("%s at `%s`; %d cores, %.0f GiB", s.Measured.UTC().Format("2006-01-02"), s.Commit, m.Cores, float64(m.MemoryMiB)/1024)
		for _, r := range s.Rows {
			value := r.Value
			if r.Note != "" {
				value += " (" + r.Note + ")"
			}
			g, bound := goalOf(s.Name, r.Metric)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(s.Name), mdCell(r.Metric), mdCell(value), mdCell(g), measured, mdCell(bound))
		}
	}
	return b.String()
}

// withTable returns doc with the text between its table markers replaced
// by the record's table.
func (rec *record) withTable(doc []byte) ([]byte, error) {
	begin := bytes.Index(doc, []byte(tableBegin))
	end := bytes.Index(doc, []byte(tableEnd))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("the doc has no generated table: it needs a line %q and, after it, a line %q", tableBegin, tableEnd)
	}
	var out bytes.Buffer
	out.Write(doc[:begin+len(tableBegin)])
	out.WriteString("\n\n")
	out.WriteString(rec.table())
	out.WriteString("\n")
	out.Write(doc[end:])
	return out.Bytes(), nil
}

// updateDocs merges r into the record at recordPath and writes the table
// of docPath again.
func updateDocs(r *report, recordPath, docPath string) error {
	rec, err := loadRecord(recordPath)
	if err != nil {
		return err
	}
	rec.merge(r)
	if err := rec.write(recordPath); err != nil {
		return err
	}
	return writeDoc(rec, docPath)
}

func writeDoc(rec *record, docPath string) error {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	out, err := rec.withTable(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", docPath, err)
	}
	return os.WriteFile(docPath, out, 0o644)
}

// mergeReport merges the saved report o.merge into the record and writes
// the doc's table again (-merge).
func mergeReport(o options) error {
	if o.record == "" || o.doc == "" {
		return errors.New("-merge needs -record and -doc")
	}
	data, err := os.ReadFile(o.merge)
	if err != nil {
		return err
	}
	rep := &report{}
	if err := json.Unmarshal(data, rep); err != nil {
		return fmt.Errorf("%s: %w", o.merge, err)
	}
	if len(rep.Sections) == 0 {
		return fmt.Errorf("%s has no sections", o.merge)
	}
	return updateDocs(rep, o.record, o.doc)
}

// docsOnly writes the doc's table from the record alone.
func docsOnly(o options) error {
	if o.record == "" || o.doc == "" {
		return errors.New("-docs needs -record and -doc")
	}
	rec, err := loadRecord(o.record)
	if err != nil {
		return err
	}
	return writeDoc(rec, o.doc)
}
