#include "server/dashboard.h"

namespace cohort {
namespace {

// Element ids are an interface: tests/metrics_test.sh reads the rendered
// page (worker-RANK rows, the charts' path.line elements, the summary).
constexpr char kHtml[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cohort</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #1b1f24; background: #f6f7f9; }
  h1 { font-size: 20px; margin: 0 12px 0 0; display: inline; }
  header { display: flex; align-items: center; flex-wrap: wrap; gap: 8px; margin-bottom: 12px; }
  .state { padding: 2px 10px; border-radius: 10px; font-weight: 600; color: #fff; background: #6b7280; }
  .state.RUNNING { background: #2563eb; } .state.SUCCEEDED { background: #16a34a; }
  .state.FAILED { background: #dc2626; } .state.STOPPED { background: #92400e; }
  .state.FORMING { background: #7c3aed; }
  #summary { display: flex; flex-wrap: wrap; gap: 8px 24px; margin: 0 0 12px; }
  #summary div { min-width: 90px; } #summary dt { color: #6b7280; font-size: 12px; }
  #summary dd { margin: 0; font-size: 18px; font-variant-numeric: tabular-nums; }
  #reason, #error, #stragglers { margin: 4px 0; } #error { color: #dc2626; }
  #stragglers { color: #b45309; }
  table { border-collapse: collapse; background: #fff; margin: 8px 0 16px; }
  th, td { padding: 4px 10px; border-bottom: 1px solid #e5e7eb; text-align: right; font-variant-numeric: tabular-nums; }
  th { background: #eef0f3; font-weight: 600; } td.host, th.host { text-align: left; }
  tr.straggler td { background: #fef3c7; } tr.finished td { color: #6b7280; }
  .charts { display: flex; flex-wrap: wrap; gap: 16px; }
  figure { margin: 0; background: #fff; padding: 8px; border: 1px solid #e5e7eb; }
  figcaption { font-weight: 600; margin-bottom: 4px; }
  svg { width: 480px; height: 220px; display: block; }
  svg .axis { stroke: #9ca3af; stroke-width: 1; fill: none; }
  svg .grid { stroke: #eef0f3; stroke-width: 1; }
  svg .line { fill: none; stroke-width: 2; }
  svg text { font-size: 11px; fill: #4b5563; }
  #loss-chart .line { stroke: #dc2626; } #accuracy-chart .line { stroke: #16a34a; }
  #accuracy-chart circle { fill: #16a34a; } #throughput-chart .line { stroke: #2563eb; }
  .muted { color: #6b7280; }
</style>
</head>
<body>
<header>
  <h1 id="job-name">cohort</h1>
  <span id="state" class="state">...</span>
  <span id="updated" class="muted"></span>
</header>
<dl id="summary">
  <div><dt>generation</dt><dd id="generation">-</dd></div>
  <div><dt>restarts</dt><dd id="restarts">-</dd></div>
  <div><dt>workers</dt><dd id="world-size">-</dd></div>
  <div><dt>epoch</dt><dd id="epoch">-</dd></div>
  <div><dt>step</dt><dd id="step">-</dd></div>
  <div><dt>samples/s</dt><dd id="samples-per-s">-</dd></div>
  <div><dt>mean loss</dt><dd id="loss">-</dd></div>
  <div><dt>test accuracy</dt><dd id="accuracy">-</dd></div>
  <div><dt>uptime</dt><dd id="uptime">-</dd></div>
</dl>
<p id="reason" class="muted"></p>
<p id="stragglers"></p>
<p id="error"></p>
<table id="workers">
  <thead><tr><th>rank</th><th class="host">address (host)</th><th>heartbeat age (s)</th><th>step</th>
  <th>epoch</th><th>samples/s</th><th>loss</th><th>busy / median</th><th>straggler</th></tr></thead>
  <tbody id="worker-rows"></tbody>
</table>
<table id="shards" hidden>
  <thead><tr><th>shard</th><th class="host">address</th><th>state</th><th>heartbeat age (s)</th>
  <th>pushes</th><th>pulls</th><th>version</th></tr></thead>
  <tbody id="shard-rows"></tbody>
</table>
<div class="charts">
  <figure><figcaption>Training loss (workers' mean) by step</figcaption><svg id="loss-chart" viewBox="0 0 480 220"></svg></figure>
  <figure><figcaption>Test accuracy (%) by epoch</figcaption><svg id="accuracy-chart" viewBox="0 0 480 220"></svg></figure>
  <figure><figcaption>Throughput (samples/s) over time (s)</figcaption><svg id="throughput-chart" viewBox="0 0 480 220"></svg></figure>
</div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function num(v) { return v === undefined || v === null || v === "" ? NaN : Number(v); }
function fmt(v, digits) {
  v = num(v);
  if (!isFinite(v)) return "-";
  if (Math.abs(v) >= 1e4 || Number.isInteger(v)) return Math.round(v).toLocaleString("en-US");
  // A converged loss is small: keep its significant digits.
  if (v !== 0 && Math.abs(v) < 0.01) return v.toExponential(2);
  return v.toFixed(digits);
}
function duration(s) {
  s = Math.floor(num(s));
  if (!isFinite(s)) return "-";
  const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + r + "s";
}
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}
function el(parent, name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}
function ticks(lo, hi, n) {
  const out = [];
  for (let i = 0; i <= n; i++) out.push(lo + (hi - lo) * i / n);
  return out;
}
function label(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
  if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
  if (a < 0.01) return v.toExponential(1);
  return v.toPrecision(3);
}

// Draws points [[x, y], ...] as a line (and dots) with labelled axes.
function chart(svg, points, opts) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 480, H = 220, L = 56, R = 12, T = 10, B = 30;
  points = points.filter((p) => isFinite(p[0]) && isFinite(p[1]));
  el(svg, "path", {class: "axis", d: `M${L},${T} L${L},${H - B} L${W - R},${H - B}`});
  if (points.length === 0) {
    el(svg, "text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, "no data yet");
    return;
  }
  let x0 = Math.min(...points.map((p) => p[0])), x1 = Math.max(...points.map((p) => p[0]));
  let y0 = Math.min(...points.map((p) => p[1])), y1 = Math.max(...points.map((p) => p[1]));
  if (opts.zero) y0 = Math.min(0, y0);
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  if (opts.max !== undefined) { y1 = Math.min(opts.max, y1); y0 = Math.min(y0, y1 - 1); }
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  for (const y of ticks(y0, y1, 4)) {
    el(svg, "line", {class: "grid", x1: L, x2: W - R, y1: sy(y), y2: sy(y)});
    el(svg, "text", {x: L - 4, y: sy(y) + 4, "text-anchor": "end"}, label(y));
  }
  const xs = opts.integerX ? [...new Set(ticks(x0, x1, 4).map(Math.round))] : ticks(x0, x1, 4);
  for (const x of xs) {
    el(svg, "text", {x: sx(x), y: H - B + 16, "text-anchor": "middle"}, label(x));
  }
  const d = points.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1)).join(" ");
  el(svg, "path", {class: "line", d: d, "data-points": points.length});
  if (opts.dots) {
    for (const p of points) el(svg, "circle", {cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 3});
  }
}

function renderStatus(s) {
  $("job-name").textContent = s.job_name || "cohort";
  document.title = (s.job_name || "cohort") + " - " + s.state;
  const state = $("state");
  state.textContent = s.state + (s.regrouping ? " (regrouping)" : "");
  state.className = "state " + s.state;
  $("generation").textContent = fmt(s.generation);
  $("restarts").textContent = fmt(s.restarts);
  $("world-size").textContent = fmt(s.world_size);
  $("epoch").textContent = fmt(s.epoch);
  $("step").textContent = fmt(s.step);
  $("uptime").textContent = duration(s.uptime_s);
  const workers = (s.workers || []).slice().sort((a, b) => num(a.rank) - num(b.rank));
  let rate = 0, loss = 0, losses = 0;
  const rows = $("worker-rows");
  rows.textContent = "";
  for (const w of workers) {
    const p = w.progress || {};
    rate += num(p.samples_per_s) || 0;
    if (isFinite(num(p.loss)) && num(p.step) > 0) { loss += num(p.loss); losses++; }
    const tr = document.createElement("tr");
    tr.id = "worker-" + w.rank;
    tr.className = (w.straggler ? "straggler " : "") + (w.finished ? "finished" : "");
    cell(tr, String(w.rank), "rank");
    cell(tr, w.address ? w.address + " (" + (w.host || "") + ")" : (w.host || ""), "host");
    cell(tr, fmt(w.heartbeat_age_s, 1), "age");
    cell(tr, fmt(p.step), "step");
    cell(tr, fmt(p.epoch), "epoch");
    cell(tr, fmt(p.samples_per_s, 1), "samples-per-s");
    cell(tr, fmt(p.loss, 4), "loss");
    cell(tr, fmt(w.busy_vs_median, 2), "busy");
    cell(tr, w.straggler ? "yes" : "no", "straggler");
    rows.appendChild(tr);
  }
  $("samples-per-s").textContent = fmt(rate, 1);
  $("loss").textContent = losses ? fmt(loss / losses, 4) : "-";
  $("reason").textContent = [s.reason, s.regrouping ? "regrouping: " + (s.regroup_reason || "") : ""]
      .filter((x) => x).join("; ");
  $("stragglers").textContent = (s.stragglers || []).length ? "stragglers: " + s.stragglers.join("; ") : "";
  const shards = s.shards || [];
  $("shards").hidden = shards.length === 0;
  const srows = $("shard-rows");
  srows.textContent = "";
  for (const sh of shards) {
    const st = sh.stats || {};
    const tr = document.createElement("tr");
    tr.id = "shard-" + sh.index;
    cell(tr, String(sh.index));
    cell(tr, sh.address || "", "host");
    cell(tr, sh.state || "serving");
    cell(tr, fmt(sh.heartbeat_age_s, 1));
    cell(tr, fmt(st.pushes));
    cell(tr, fmt(st.pulls));
    cell(tr, fmt(st.version));
    srows.appendChild(tr);
  }
}

function renderHistory(h) {
  const t = h.t || [], step = h.step || [], loss = h.loss || [], rate = h.samples_per_s || [];
  chart($("loss-chart"), step.map((x, i) => [num(x), num(loss[i])]), {integerX: true});
  chart($("throughput-chart"), t.map((x, i) => [num(x), num(rate[i])]), {zero: true});
  const epochs = h.epochs || [];
  chart($("accuracy-chart"), epochs.map((e) => [num(e.epoch), 100 * num(e.test_accuracy)]),
        {dots: true, max: 100, integerX: true});
  $("accuracy").textContent = epochs.length
      ? fmt(100 * num(epochs[epochs.length - 1].test_accuracy), 2) + "%" : "-";
}

async function getJson(path) {
  const r = await fetch(path, {cache: "no-store"});
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

async function poll() {
  try {
    const [s, h] = await Promise.all([getJson("api/status"), getJson("api/history")]);
    renderStatus(s);
    renderHistory(h);
    $("error").textContent = "";
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    $("error").textContent = "cannot reach the coordinator: " + e.message;
  }
}
poll();
setInterval(poll, 2000);
</script>
</body>
</html>
)html";

}  // namespace

absl::string_view DashboardHtml() { return kHtml; }

}  // namespace cohort
