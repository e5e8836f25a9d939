// The KubeStellar dashboard: one live view at a time, streamed by the server
// (Server-Sent Events), already filtered, sorted and paged there. No
// framework, no build step: the DOM is built with textContent only.
"use strict";

(function () {
  const views = ["fleet", "spaces", "placements", "workload"];
  const state = {
    view: "fleet",
    page: { fleet: 0, spaces: 0, placements: 0 },
    skew: 0, // server time minus browser time, in ms
    source: null,
    retry: null, // the timer of the next attempt of a failed stream
    backoff: 0, // ms before that attempt; 0 after a stream delivered
    heartbeatTimeout: 45,
    workload: null, // the query of the workload shown
    workloadTimer: null,
    workloadShown: "", // the answer shown, to skip redrawing it unchanged
  };
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function age(iso) {
    if (!iso) return "never";
    const s = Math.max(0, Math.round((Date.now() + state.skew - Date.parse(iso)) / 1000));
    if (s < 90) return s + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 172800) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function setLive(text, ok) {
    const live = $("live");
    live.textContent = text;
    live.className = "live " + (ok ? "on" : "off");
  }

  // --- streams ---------------------------------------------------------

  function params(view) {
    const p = new URLSearchParams({ view, page: String(state.page[view] || 0) });
    const q = $(view + "-q"), only = $(view + "-only");
    if (q && q.value) p.set("q", q.value);
    if (only && only.value) p.set("only", only.value);
    return p;
  }

  function connect() {
    clearTimeout(state.retry);
    state.retry = null;
    if (state.source) state.source.close();
    state.source = null;
    if (state.view === "workload") { setLive("", true); loadWorkload(); return; }
    const src = new EventSource("/dashboard/api/events?" + params(state.view).toString());
    state.source = src;
    setLive("connecting…", false);
    src.addEventListener("view", (ev) => {
      state.backoff = 0;
      const u = JSON.parse(ev.data);
      state.skew = Date.parse(u.now) - Date.now();
      $("user").textContent = u.user;
      if (u.loading) { setLive("loading…", true); return; }
      setLive("live", true);
      render(u);
    });
    src.addEventListener("logout", () => { src.close(); location.href = "/dashboard/login"; });
    src.onerror = () => {
      if (state.source !== src) return;
      setLive("reconnecting…", false);
      // A stream refused for want of a session does not come back.
      fetch("/dashboard/api/whoami", { credentials: "same-origin" }).then((r) => {
        if (r.status === 401) { src.close(); location.href = "/dashboard/login"; }
      }).catch(() => {});
      // The browser tries again by itself after a broken connection, but
      // not after an answer other than 200 (a 429 or 503 of a server that
      // is busy or restarting): then the stream is closed for good, and a
      // new one is opened, later each time, up to every 30 s.
      if (src.readyState === EventSource.CLOSED && state.retry === null) {
        state.backoff = Math.min(30000, Math.max(1000, state.backoff * 2));
        state.retry = setTimeout(connect, state.backoff);
      }
    };
  }

  function render(u) {
    if (u.fleet) renderFleet(u.fleet);
    if (u.spaces) renderSpaces(u.spaces);
    if (u.placements) renderPlacements(u.placements);
  }

  function pager(view, paging) {
    const box = document.querySelector('.pager[data-for="' + view + '"]');
    box.replaceChildren();
    state.page[view] = paging.page;
    const prev = el("button", { type: "button", disabled: paging.page <= 0 ? "" : null, "aria-label": "Previous page" }, "‹ Previous");
    const next = el("button", { type: "button", disabled: paging.page >= paging.pages - 1 ? "" : null, "aria-label": "Next page" }, "Next ›");
    prev.addEventListener("click", () => { state.page[view] = paging.page - 1; connect(); });
    next.addEventListener("click", () => { state.page[view] = paging.page + 1; connect(); });
    box.append(prev, el("span", { class: "pageno" }, "page " + (paging.page + 1) + " of " + paging.pages + " (" + paging.matched + " shown of the filter)"), next);
  }

  // --- fleet -----------------------------------------------------------

  const stateLabel = { connected: "connected", disconnected: "disconnected", silent: "silent", new: "never connected" };

  function renderFleet(f) {
    state.heartbeatTimeout = f.heartbeatTimeoutSeconds;
    const c = f.counts;
    $("count-connected").textContent = c.connected;
    $("count-total").textContent = c.total;
    $("count-disconnected").textContent = c.disconnected;
    $("count-silent").textContent = c.silent;
    $("count-problems").textContent = c.withProblems + (c.problems ? " (" + c.problems + " problems)" : "");
    $("count-conflicts").textContent = c.conflicts;
    $("count-spaces").textContent = c.spaces;
    const tbody = $("fleet-table").tBodies[0];
    const rows = f.edges.map((e) => {
      const problems = el("td", { class: e.problemCount ? "warn" : null }, String(e.problemCount));
      if (e.problems && e.problems.length) {
        const ul = el("ul", { class: "problems" });
        for (const p of e.problems) ul.append(el("li", {}, p.object + ": " + p.reason + (p.message ? " (" + p.message + ")" : "")));
        problems.append(ul);
      }
      const hb = el("td", { class: "age", "data-time": e.lastHeartbeat || "" }, age(e.lastHeartbeat));
      return el("tr", { "data-edge": e.space + "/" + e.name, "data-state": e.state, class: "state-" + e.state },
        el("td", {}, el("span", { class: "badge " + e.state, title: e.reason || "" }, stateLabel[e.state] || e.state),
          e.unschedulable ? el("span", { class: "tag" }, "unschedulable") : null),
        el("td", {}, e.space), el("th", { scope: "row" }, e.name), hb,
        el("td", { title: e.syncerImage || "" }, (e.syncerVersion || "–") + (e.syncerMode ? " (" + e.syncerMode + ")" : "")),
        el("td", {}, String(e.syncedObjects)),
        el("td", { class: e.conflicts ? "warn" : null }, String(e.conflicts)), problems, el("td", {}, String(e.drift)));
    });
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "9" }, c.total ? "No SyncTarget matches." : "No SyncTargets you may see yet.")));
    tbody.replaceChildren(...rows);
    pager("fleet", f.paging);
  }

  // Heartbeat ages move every second without the server.
  setInterval(() => {
    for (const td of document.querySelectorAll("td.age")) td.textContent = age(td.getAttribute("data-time"));
  }, 1000);

  // --- spaces ----------------------------------------------------------

  function renderSpaces(s) {
    const rows = s.spaces.map((sp) => el("tr", { "data-space": sp.name },
      el("th", { scope: "row" }, sp.name), el("td", {}, sp.type || "(none)"), el("td", {}, sp.phase || "–"),
      el("td", { class: "url" }, sp.url || "–"), el("td", {}, String(sp.syncTargets)), el("td", {}, String(sp.placements))));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "6" }, "No spaces you may see match.")));
    $("spaces-table").tBodies[0].replaceChildren(...rows);
    pager("spaces", s.paging);
  }

  // --- placements ------------------------------------------------------

  function cond(c, badWhen) {
    if (!c) return el("td", {}, "–");
    const bad = c.status === badWhen;
    return el("td", { class: bad ? "bad-cell" : null },
      el("span", { class: "badge " + (bad ? "disconnected" : "connected") }, c.status),
      c.reason ? el("div", { class: "reason" }, c.reason) : null,
      c.message && bad ? el("div", { class: "message" }, c.message) : null);
  }

  // rolloutCell: a Progressive placement's rollout, its phase and wave; a
  // paused one says why. A viewer who may patch the placement may pause
  // or resume it; the event stream then shows the new phase.
  function rolloutCell(pl) {
    const r = pl.rollout;
    if (!r) return el("td", {}, "all at once");
    const paused = r.phase === "Paused";
    const td = el("td", { class: paused ? "bad-cell" : null, "data-rollout": r.phase },
      el("span", { class: "badge " + (paused ? "disconnected" : r.phase === "Complete" ? "connected" : "new") }, r.phase),
      r.currentWave && r.phase !== "Complete" ? el("div", { class: "reason" }, "wave " + r.currentWave) : null,
      r.message ? el("div", { class: "message" }, r.message) : null);
    if (r.mayPause) {
      const action = r.paused ? "resume" : "pause";
      const button = el("button", { type: "button", "data-action": action }, r.paused ? "Resume" : "Pause");
      button.addEventListener("click", () => setPaused(pl, !r.paused, button, td));
      td.append(el("div", {}, button));
    }
    return td;
  }

  function setPaused(pl, paused, button, td) {
    button.disabled = true;
    fetch("/dashboard/api/rollout", { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ space: pl.space, name: pl.name, paused: paused }) })
      .then((r) => r.ok ? null : r.json().then((b) => { throw new Error(b.error || r.statusText); }))
      .catch((err) => {
        button.disabled = false;
        td.append(el("div", { class: "message", "data-error": "rollout" }, String(err.message || err)));
      });
  }

  function stateClass(state) {
    return state === "connected" ? "connected" : state === "new" || state === "unknown" ? "new" : "disconnected";
  }

  // copiesClass: all in step, some failed or missing, or waiting for the edge.
  function copiesClass(c) {
    if (c.failed || c.missing) return "copies bad";
    if (c.waiting || !c.expected) return "copies wait";
    return "copies ok";
  }

  function renderPlacements(p) {
    $("placements-summary").textContent = p.total + " EdgePlacements, " + p.trouble + " needing a look.";
    const rows = p.placements.map((pl) => {
      const dests = el("ul", { class: "dests" });
      for (const d of pl.destinations) {
        const c = d.copies || { summary: "", expected: 0 };
        const li = el("li", { class: "dest", "data-dest": d.space + "/" + d.syncTarget,
          "data-copies": c.synced + "/" + c.expected, "data-failed": String(c.failed || 0) },
          el("span", { class: "badge " + stateClass(d.state) }, d.space + "/" + d.syncTarget + ": " + (stateLabel[d.state] || d.state)),
          " ", el("span", { class: copiesClass(c) }, c.summary),
          d.problemCount ? el("span", { class: "tag" }, d.problemCount + (d.problemCount === 1 ? " edge problem" : " edge problems")) : null);
        if (c.failures && c.failures.length) {
          const ul = el("ul", { class: "problems" });
          for (const f of c.failures) ul.append(el("li", {}, f.object + ": " + f.reason + (f.message ? " (" + f.message + ")" : "")));
          li.append(ul);
        }
        dests.append(li);
      }
      if (!pl.destinations.length) dests.append(el("li", {}, "none"));
      const ready = pl.ready;
      return el("tr", { "data-placement": pl.space + "/" + pl.name, class: pl.trouble ? "trouble" : null },
        el("td", {}, pl.space), el("th", { scope: "row" }, pl.name),
        cond(ready, ready && ready.status !== "True" ? ready.status : "__"),
        cond(pl.misconfigured, "True"), cond(pl.conflicted, "True"), rolloutCell(pl), el("td", {}, dests));
    });
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7" }, "No EdgePlacements you may see match.")));
    $("placements-table").tBodies[0].replaceChildren(...rows);
    pager("placements", p.paging);
  }

  // --- workload --------------------------------------------------------

  // The workload view is read on demand, then again every few seconds
  // while it is shown, so that pods coming up show without a click.
  const workloadRefresh = 5000;

  function showWorkload(ev) {
    ev.preventDefault();
    state.workload = new URLSearchParams({ space: $("wl-space").value, resource: $("wl-resource").value,
      namespace: $("wl-namespace").value, name: $("wl-name").value });
    state.workloadShown = "";
    $("workload-out").replaceChildren(el("p", {}, "loading…"));
    loadWorkload();
  }

  const copyLabel = { synced: "synced", failed: "failed", waiting: "waiting for the edge", missing: "not in the mailbox" };

  function pods(e) {
    if (!e.reported) return el("td", {}, "not reported");
    const phases = Object.entries(e.podPhases || {}).sort().map(([ph, n]) => ph + " " + n).join(", ");
    return el("td", {}, phases || "no pods");
  }

  function workloadEdges(edges) {
    const t = el("table", { id: "workload-edges" }, el("thead", {}, el("tr", {},
      ...["Edge", "Edge state", "Placements", "Copy", "Pods", "Ready", "Not ready", "ReplicaSets"].map((c) => el("th", { scope: "col" }, c)))));
    const tb = el("tbody");
    for (const e of edges) {
      const notReady = el("td", {});
      if (e.notReadyPods && e.notReadyPods.length) {
        const ul = el("ul", { class: "problems" });
        for (const p of e.notReadyPods) ul.append(el("li", {}, p.name + ": " + p.reason));
        notReady.append(ul);
      } else notReady.append(e.reported ? "none" : "–");
      const ready = e.reported ? (e.readyAtMost ? "≤ " : "") + e.readyPods + "/" + e.livePods : "–";
      tb.append(el("tr", { "data-wl-edge": e.space + "/" + e.syncTarget, "data-copy": e.copy,
        "data-ready": e.reported ? e.readyPods + "/" + e.livePods : "", class: e.copy === "failed" || e.copy === "missing" ? "trouble" : null },
        el("th", { scope: "row" }, e.space + "/" + e.syncTarget),
        el("td", {}, el("span", { class: "badge " + stateClass(e.state) }, stateLabel[e.state] || e.state)),
        el("td", {}, e.placements.join(", ")),
        el("td", { class: e.copy === "synced" ? null : "warn" }, copyLabel[e.copy] || e.copy, e.syncError ? el("div", { class: "message" }, e.syncError) : null),
        pods(e), el("td", { class: e.reported && e.readyPods < e.livePods ? "warn" : null }, ready), notReady,
        el("td", {}, e.reported ? String(e.replicaSets) : "–")));
    }
    if (!edges.length) tb.append(el("tr", {}, el("td", { colspan: "8" }, "no destination: no EdgePlacement you may see places it")));
    t.append(tb);
    return el("div", { class: "scroll" }, t);
  }

  function loadWorkload() {
    clearTimeout(state.workloadTimer);
    const query = state.workload;
    if (!query || state.view !== "workload") return;
    const out = $("workload-out");
    fetch("/dashboard/api/workload?" + query.toString(), { credentials: "same-origin" })
      .then((r) => r.text().then((text) => ({ ok: r.ok, text })))
      .then(({ ok, text }) => {
        if (state.workload !== query) return;
        if (state.view === "workload") state.workloadTimer = setTimeout(loadWorkload, workloadRefresh);
        // Unchanged: leave the page (and the keyboard focus) as it is.
        if (text === state.workloadShown && out.children.length) return;
        state.workloadShown = text;
        const body = JSON.parse(text);
        if (!ok) { out.replaceChildren(el("p", { class: "error", role: "alert" }, body.error || "failed")); return; }
        const parts = [el("h3", {}, body.space + ": " + body.resource + " " + (body.namespace ? body.namespace + "/" : "") + body.name)];
        parts.push(el("h4", {}, "Where it runs: its copy and its pods at each edge"));
        parts.push(workloadEdges(body.edges || []));
        parts.push(el("h4", {}, "Status (the edge's own when it runs on one cluster and its placement asks for it)"));
        parts.push(el("pre", { class: "status" }, body.status ? JSON.stringify(body.status, null, 2) : "none"));
        for (const cs of body.combinedStatuses || []) {
          for (const res of cs.results || []) {
            parts.push(el("h4", {}, "Combined status " + res.name + " (placement " + cs.placement + ")"));
            const t = el("table", {}, el("thead", {}, el("tr", {}, ...res.columnNames.map((c) => el("th", { scope: "col" }, c)))));
            const tb = el("tbody");
            for (const row of res.rows || []) tb.append(el("tr", {}, ...row.columns.map((v) => el("td", {}, typeof v === "string" ? v : JSON.stringify(v)))));
            t.append(tb);
            parts.push(el("div", { class: "scroll" }, t));
          }
        }
        out.replaceChildren(...parts);
      })
      .catch((e) => {
        if (state.workload !== query) return;
        out.replaceChildren(el("p", { class: "error", role: "alert" }, String(e)));
        if (state.view === "workload") state.workloadTimer = setTimeout(loadWorkload, workloadRefresh);
      });
  }

  // --- navigation ------------------------------------------------------

  function show() {
    const v = location.hash.replace("#", "");
    state.view = views.includes(v) ? v : "fleet";
    for (const name of views) {
      $("view-" + name).hidden = name !== state.view;
      const tab = $("tab-" + name);
      if (name === state.view) tab.setAttribute("aria-current", "page"); else tab.removeAttribute("aria-current");
    }
    connect();
  }

  document.addEventListener("DOMContentLoaded", () => {
    let timer = null;
    for (const view of ["fleet", "spaces", "placements"]) {
      const restart = () => { state.page[view] = 0; clearTimeout(timer); timer = setTimeout(connect, 250); };
      $(view + "-q").addEventListener("input", restart);
      $(view + "-only").addEventListener("change", restart);
    }
    $("workload-form").addEventListener("submit", showWorkload);
    window.addEventListener("hashchange", show);
    show();
  });
})();
