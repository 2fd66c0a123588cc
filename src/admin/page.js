// seawall status page: polls /status.json every 2 s while the tab is visible and
// redraws. Every name shown comes from configuration or from upstreams, so the page
// builds its DOM with createElement, textContent and setAttribute only: no HTML is ever
// parsed from data.
"use strict";

(() => {
  const POLL_MS = 2000;
  // At most this many rows of one kind in the DOM; the rest are counted.
  const MAX_ROWS = 100;
  const SVG = "http://www.w3.org/2000/svg";

  const view = {
    data: null,
    expanded: null, // the upstream whose tools are shown (one at a time)
    filter: "",
    timer: null,
    lastOk: null,
    updates: 0,
    asked: 0, // polls started
    applied: 0, // the newest poll whose answer is shown
  };

  const $ = (id) => document.getElementById(id);

  // el("td", {class: "num"}, "text", child, ...): strings become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else node.setAttribute(k, String(v));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    }
    return node;
  }

  // Numbers and durations -------------------------------------------------------------

  const whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const oneDecimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

  function count(n) {
    return whole.format(n);
  }

  function perSecond(n) {
    if (n === 0) return "0";
    if (n < 0.1) return "<0.1";
    return n < 10 ? oneDecimal.format(n) : whole.format(n);
  }

  function percent(rate) {
    if (rate === null || rate === undefined) return "–";
    const p = rate * 100;
    if (p === 0) return "0 %";
    if (p < 0.1) return "<0.1 %";
    return (p < 10 ? oneDecimal.format(p) : whole.format(p)) + " %";
  }

  function duration(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
    const h = Math.floor(m / 60);
    if (h < 48) return h + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  function clock(date) {
    return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  }

  function sum(values, from) {
    let total = 0;
    for (let i = Math.max(0, from); i < values.length; i++) total += values[i];
    return total;
  }

  // The last minute: six buckets, the last of them still filling.
  function lastMinute(series, data) {
    const n = series.requests.length;
    const seconds = Math.max(
      1,
      Math.min(data.gateway.uptime_seconds + 1, 5 * data.bucket_seconds + data.current_bucket_ms / 1000),
    );
    const requests = sum(series.requests, n - 6);
    const errors = sum(series.errors, n - 6);
    return { requests, errors, rate: requests / seconds, errorRate: requests ? errors / requests : null };
  }

  // Sparklines ---------------------------------------------------------------------------

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  }

  // A small chart of `values` (oldest first); `kind` is "req" or "err".
  function spark(values, kind, label, cls) {
    const w = Math.max(1, values.length - 1);
    const h = 100;
    const max = Math.max(1, ...values);
    const chart = svg("svg", { class: cls || "spark", viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none", role: "img" });
    const title = svg("title", {});
    title.textContent = label;
    chart.append(title);
    chart.append(svg("line", { class: "base", x1: 0, y1: h, x2: w, y2: h }));
    if (values.some((v) => v > 0)) {
      const pts = values.map((v, i) => `${i},${(h - (v / max) * h * 0.94).toFixed(1)}`);
      const area = kind === "err" ? "err-area" : "area";
      const line = kind === "err" ? "err-line" : "line";
      chart.append(svg("path", { class: area, d: `M0,${h} L${pts.join(" L")} L${w},${h} Z` }));
      chart.append(svg("polyline", { class: line, points: pts.join(" ") }));
    }
    return chart;
  }

  // A chart of requests with errors drawn on the same scale.
  function trafficChart(series) {
    const { requests, errors } = series;
    const w = Math.max(1, requests.length - 1);
    const h = 100;
    const max = Math.max(1, ...requests);
    const chart = svg("svg", { class: "spark", viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none", role: "img" });
    const title = svg("title", {});
    title.textContent = `last 15 min: ${count(sum(requests, 0))} requests, ${count(sum(errors, 0))} errors`;
    chart.append(title);
    chart.append(svg("line", { class: "base", x1: 0, y1: h, x2: w, y2: h }));
    for (const [values, area, line] of [
      [requests, "area", "line"],
      [errors, "err-area", "err-line"],
    ]) {
      if (!values.some((v) => v > 0)) continue;
      const pts = values.map((v, i) => `${i},${(h - (v / max) * h * 0.94).toFixed(1)}`);
      chart.append(svg("path", { class: area, d: `M0,${h} L${pts.join(" L")} L${w},${h} Z` }));
      chart.append(svg("polyline", { class: line, points: pts.join(" ") }));
    }
    return chart;
  }

  // Words ----------------------------------------------------------------------------

  const STATE_WORDS = { ok: "healthy", degraded: "degraded", failing: "failing", half_open: "half-open" };
  const REASONS = {
    consecutive_failures: "failures in a row",
    failure_rate: "failure rate",
    slow_call_rate: "slow calls",
    break_elapsed: "break over, probing",
    probe_succeeded: "probe succeeded",
    probe_failed: "probe failed",
    probe_timed_out: "probe timed out",
    replica: "followed another replica",
  };

  function pill(state, text) {
    return el("span", { class: "pill", "data-state": state }, text || STATE_WORDS[state] || state);
  }

  function dot(state, title) {
    return el("span", { class: "dot", "data-state": state, title });
  }

  function matches(text) {
    return !view.filter || String(text).toLowerCase().includes(view.filter);
  }

  // "auto · modern", "legacy (pinned)", "legacy · 2025-11-25" (a stdio process).
  function eraText(u) {
    const era = u.era;
    if (era.protocol === "auto") {
      const found = { legacy_only: "legacy only", modern_only: "modern only" }[era.detected];
      return `auto · ${found || era.speaking || "not yet"}`;
    }
    if (era.version) return `${era.protocol} · ${era.version}`;
    return u.kind === "http" ? `${era.protocol} (pinned)` : era.protocol;
  }

  // Header ---------------------------------------------------------------------------

  function renderHeader(data) {
    const g = data.gateway;
    const overall = $("overall");
    overall.dataset.state = g.state;
    overall.textContent = STATE_WORDS[g.state] || g.state;
    document.title = `seawall · ${STATE_WORDS[g.state] || g.state}`;
    $("version").textContent = g.version;
    $("uptime").textContent = duration(g.uptime_seconds * 1000);
    const eras = Object.entries(g.sessions.by_era).map(([era, n]) => `${era}: ${count(n)}`);
    $("sessions").replaceChildren(count(g.sessions.total));
    $("sessions").title = eras.length ? eras.join("\n") : "no sessions";
    const minute = lastMinute(data.recent, data);
    $("rate").textContent = perSecond(minute.rate) + "/s";
    const errors = $("errors");
    errors.textContent = percent(minute.errorRate);
    errors.className = minute.errors > 0 ? "errors-nonzero" : "";
    errors.title = `last minute: ${count(minute.errors)} errors in ${count(minute.requests)} requests`;
    $("traffic-chart").replaceChildren(trafficChart(data.recent));
  }

  function renderUpdated() {
    const line = $("updated");
    if (view.lastOk === null) {
      line.dataset.stale = "true";
      line.textContent = "no answer from seawall yet";
      return;
    }
    const age = Date.now() - view.lastOk.getTime();
    const stale = age > 3 * POLL_MS;
    line.dataset.stale = String(stale);
    line.textContent = stale
      ? `no answer from seawall since ${clock(view.lastOk)} (${duration(age)} ago)`
      : `updated ${clock(view.lastOk)}`;
    if (stale) {
      const overall = $("overall");
      overall.dataset.state = "unreachable";
      overall.textContent = "unreachable";
    }
  }

  // Breakers -------------------------------------------------------------------------

  function breakerRow(b) {
    const tripped = b.tripped;
    const counts = b.state === "closed" || !tripped ? b.window : tripped;
    const word = (reason) => REASONS[reason] || reason;
    // What opened it, then what happened since ("5 failures in a row · then probe failed").
    let whyCell = b.reason ? word(b.reason) : "–";
    if (tripped && b.state !== "closed") {
      whyCell =
        tripped.reason === "consecutive_failures"
          ? `${count(tripped.consecutive_failures)} failures in a row`
          : word(tripped.reason);
      if (b.reason && b.reason !== tripped.reason) whyCell += ` · then ${word(b.reason)}`;
    }
    let probes = "–";
    if (b.state === "open" && b.retry_in_ms !== null) probes = `in ${duration(b.retry_in_ms)}`;
    else if (b.state === "half_open") probes = "probing now";
    const since = new Date(Date.now() - b.for_ms);
    return el(
      "tr",
      {
        class: "breaker",
        "data-state": b.state,
        "data-breaker-state": b.state,
        "data-upstream": b.upstream,
        "data-tool": b.tool === null ? "" : b.tool,
      },
      el("td", {}, pill(b.state)),
      el("td", { class: "name" }, b.upstream),
      el("td", { class: b.tool === null ? "muted" : "name" }, b.tool === null ? "the upstream itself" : b.tool),
      el(
        "td",
        { class: "num" },
        el("span", { class: "rate" }, percent(b.failure_rate)),
        el("span", { class: "muted" }, ` ${count(counts.failures)} of ${count(counts.calls)}`),
      ),
      el("td", {}, whyCell),
      el("td", { title: since.toLocaleString() }, `${duration(b.for_ms)} (${clock(since)})`),
      el("td", {}, probes, b.opens > 1 ? el("span", { class: "muted" }, ` · opened ${b.opens}× in a row`) : null),
    );
  }

  function renderBreakers(data) {
    const list = data.breakers;
    const shown = list.listed.filter((b) => matches(b.upstream) || (b.tool !== null && matches(b.tool)));
    const rows = shown.slice(0, MAX_ROWS).map(breakerRow);
    const table = $("breakers");
    table.tBodies[0].replaceChildren(...rows);
    table.hidden = rows.length === 0;
    const total = list.closed + list.open + list.half_open;
    const parts = [];
    if (total === 0) {
      parts.push("No breakers yet: each upstream and tool gets one with its first call.");
    } else if (list.open + list.half_open === 0) {
      parts.push(`All ${count(total)} breakers are closed.`);
    } else {
      parts.push(`${count(list.open)} open, ${count(list.half_open)} half-open, ${count(list.closed)} closed.`);
      if (list.unlisted > 0) parts.push(`${count(list.unlisted)} more not listed here.`);
      if (shown.length > rows.length) parts.push(`Showing ${count(rows.length)} of ${count(shown.length)}.`);
      else if (shown.length < list.listed.length) parts.push(`${count(shown.length)} match the filter.`);
    }
    if (list.closed > 0 && !list.all) parts.push("Closed breakers are listed under their upstream.");
    $("breaker-summary").textContent = parts.join(" ");
  }

  // Upstreams ------------------------------------------------------------------------

  function endpointsCell(u) {
    const cell = el("td", {});
    if (u.process) {
      const p = u.process;
      if (p.state === "per_session") {
        cell.append(el("span", {}, `${count(p.running)} running`, el("span", { class: "muted" }, ` · ${count(p.available)} free`)));
      } else {
        cell.append(dot(p.state, p.reason || p.state), p.state);
        if (p.restarts > 0) cell.append(el("span", { class: "muted" }, ` · ${count(p.restarts)} restarts`));
        const said = [p.exit_status, ...(p.stderr || [])].filter(Boolean);
        if (p.reason) cell.title = [p.reason, ...said].join("\n");
      }
      return cell;
    }
    if (u.endpoints.length === 0) {
      cell.append(el("span", { class: "muted" }, "one stream per session"));
      return cell;
    }
    for (const e of u.endpoints) {
      const state = e.ejected ? "open" : e.consecutive_failures > 0 ? "half_open" : "closed";
      const detail = e.ejected
        ? `${e.url}: ejected for ${duration(e.ejected_for_ms)}`
        : `${e.url}: ${e.consecutive_failures} failures in a row, ${e.in_flight} in flight`;
      cell.append(el("span", { class: "endpoint", title: detail }, dot(state, detail)));
    }
    const up = u.endpoints.filter((e) => !e.ejected).length;
    cell.append(el("span", { class: "muted" }, `${up}/${u.endpoints.length} in service`));
    return cell;
  }

  function toolsCell(u) {
    const b = u.tools.breakers;
    const cell = el("td", {}, `${count(u.tools.listed)} listed`);
    if (b.open) cell.append(el("span", { class: "errors-nonzero" }, ` · ${count(b.open)} open`));
    if (b.half_open) cell.append(el("span", {}, ` · ${count(b.half_open)} half-open`));
    return cell;
  }

  function upstreamRow(u, data) {
    const minute = lastMinute(u.recent, data);
    const expanded = view.expanded === u.name;
    const toggle = el(
      "button",
      { class: "toggle", type: "button", "aria-expanded": String(expanded), title: expanded ? "hide tools" : "show tools" },
      expanded ? "−" : "+",
    );
    toggle.addEventListener("click", () => {
      view.expanded = expanded ? null : u.name;
      remember();
      render();
      poll();
    });
    const kind = u.share ? `${u.kind} · ${u.share.replace("_", " ")}` : u.kind;
    const total15 = sum(u.recent.requests, 0);
    const errors15 = sum(u.recent.errors, 0);
    const ownState = u.breaker ? u.breaker.state : "closed";
    return el(
      "tr",
      { class: "upstream", "data-state": u.state, "data-upstream": u.name, "data-breaker-state": ownState },
      el("td", {}, toggle),
      el("td", { class: "name" }, dot(u.state, STATE_WORDS[u.state]), u.name),
      el("td", {}, el("span", { class: "tag" }, kind)),
      el("td", {}, eraText(u)),
      endpointsCell(u),
      toolsCell(u),
      el("td", { class: "num" }, perSecond(minute.rate)),
      el("td", {}, spark(u.recent.requests, "req", `last 15 min: ${count(total15)} requests`)),
      el(
        "td",
        { class: "num" + (minute.errors > 0 ? " errors-nonzero" : ""), title: `last minute: ${count(minute.errors)} errors` },
        percent(minute.errorRate),
      ),
      el("td", {}, spark(u.recent.errors, "err", `last 15 min: ${count(errors15)} errors`)),
    );
  }

  function toolsRow(u, data) {
    const cell = el("td", { colspan: 10 });
    const tools = data.tools && data.tools_of === u.name ? data.tools : null;
    if (!tools) {
      cell.append(el("p", { class: "more" }, "loading tools…"));
    } else {
      const shown = tools.filter((t) => matches(t.tool) || matches(u.name));
      const rows = shown.slice(0, MAX_ROWS).map((t) =>
        el(
          "tr",
          { class: "tool", "data-tool": t.tool, "data-breaker-state": t.state || "none" },
          el("td", { class: "name" }, t.tool, t.listed ? null : el("span", { class: "muted" }, " (not listed)")),
          el(
            "td",
            {},
            t.state ? dot(t.state, t.state) : null,
            t.state ? STATE_WORDS[t.state] || t.state : el("span", { class: "muted" }, "no calls yet"),
          ),
          el("td", { class: "num" }, percent(t.failure_rate)),
          el("td", { class: "num muted" }, t.state ? `${count(t.failures)} of ${count(t.calls)}` : ""),
          el("td", { class: "muted" }, t.for_ms === null ? "" : `for ${duration(t.for_ms)}`),
        ),
      );
      const head = el(
        "tr",
        {},
        ...[
          ["tool", ""],
          ["breaker", ""],
          ["failure rate", "num"],
          ["failures", "num"],
          ["state since", ""],
        ].map(([h, cls]) => el("th", { scope: "col", class: cls || null }, h)),
      );
      cell.append(el("table", { class: "tool-table" }, el("thead", {}, head), el("tbody", {}, ...rows)));
      const rest = shown.length - rows.length;
      const note = [];
      if (rest > 0) note.push(`${count(rest)} more tools match; narrow the filter to see them.`);
      if (shown.length === 0) note.push("No tool matches the filter.");
      if (note.length) cell.append(el("p", { class: "more" }, note.join(" ")));
    }
    return el("tr", { class: "tools", "data-tools-of": u.name }, cell);
  }

  function renderUpstreams(data) {
    const rows = [];
    let shown = 0;
    for (const u of data.upstreams) {
      const toolHit =
        view.expanded === u.name && data.tools_of === u.name && data.tools && data.tools.some((t) => matches(t.tool));
      if (!matches(u.name) && !toolHit) continue;
      shown++;
      if (rows.length >= 2 * MAX_ROWS) continue;
      rows.push(upstreamRow(u, data));
      if (view.expanded === u.name) rows.push(toolsRow(u, data));
    }
    $("upstreams").tBodies[0].replaceChildren(...rows);
    $("no-match").hidden = shown > 0 || data.upstreams.length === 0;
    const failing = data.upstreams.filter((u) => u.state === "failing").length;
    const degraded = data.upstreams.filter((u) => u.state === "degraded").length;
    const parts = [`${count(data.upstreams.length)} upstreams`];
    if (failing) parts.push(`${count(failing)} failing`);
    if (degraded) parts.push(`${count(degraded)} degraded`);
    if (shown < data.upstreams.length) parts.push(`${count(shown)} shown`);
    $("upstream-count").textContent = parts.join(" · ");
  }

  // The loop -------------------------------------------------------------------------

  function render() {
    const data = view.data;
    if (data) {
      renderHeader(data);
      renderBreakers(data);
      renderUpstreams(data);
      document.body.dataset.updates = String(view.updates);
    }
    renderUpdated();
  }

  async function poll() {
    clearTimeout(view.timer);
    view.timer = null;
    if (document.hidden) return;
    const asked = view.expanded;
    const seq = ++view.asked;
    const url = asked === null ? "/status.json" : "/status.json?upstream=" + encodeURIComponent(asked);
    try {
      const response = await fetch(url, { cache: "no-store" });
      if (seq < view.applied) {
        // A newer poll already answered (an upstream was expanded meanwhile).
      } else if (response.status === 404 && asked !== null) {
        view.expanded = null; // the upstream went away
      } else if (!response.ok) {
        throw new Error(`HTTP ${response.status}`);
      } else {
        const data = await response.json();
        data.tools_of = asked;
        view.applied = seq;
        view.data = data;
        view.lastOk = new Date();
        view.updates++;
      }
    } catch (_) {
      // Shown as stale by renderUpdated.
    }
    render();
    if (!document.hidden && view.timer === null) view.timer = setTimeout(poll, POLL_MS);
  }

  // The expanded upstream and the filter live in the address's fragment
  // (#upstream=NAME&filter=TEXT), so a link or a wall screen can open on them.
  function remember() {
    const params = new URLSearchParams();
    if (view.expanded !== null) params.set("upstream", view.expanded);
    if (view.filter) params.set("filter", $("filter").value.trim());
    const hash = params.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }

  function start() {
    const filter = $("filter");
    const params = new URLSearchParams(location.hash.slice(1));
    view.expanded = params.get("upstream");
    filter.value = params.get("filter") || "";
    view.filter = filter.value.trim().toLowerCase();
    filter.addEventListener("input", () => {
      view.filter = filter.value.trim().toLowerCase();
      remember();
      render();
    });
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) {
        clearTimeout(view.timer);
        view.timer = null;
      } else {
        poll();
      }
    });
    poll();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
