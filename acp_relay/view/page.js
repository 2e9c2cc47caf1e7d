// acp-relay view: draws the embedded session. Everything recorded is untrusted: it reaches the page only
// through textContent and createTextNode, never as markup. Rows are virtual: only those on screen exist.
"use strict";
(function () {
  const T0 = performance.now(), timing = { start: Math.round(T0) };
  function mark(name) { timing[name] = Math.round(performance.now() - T0); }
  const D = JSON.parse(document.getElementById("data").textContent);
  mark("parse");
  const H = D.header, F = D.frames, S = D.strings, N = F.n;
  const KIND = { q: "request", n: "notification", r: "response", e: "error", b: "batch", i: "invalid" };
  const ROW = 30, OVERSCAN = 12, GAP = 2.0, TICK = 10000, LONG = 5000, GAP_ITEM = -1e9 - 1;

  // -- columns: delta-coded on the wire, absolute here ------------------------------------------------
  function undelta(a) { const out = new Float64Array(a.length); let t = 0; for (let i = 0; i < a.length; i++) { t += a[i]; out[i] = t; } return out; }
  const ids = undelta(F.id), seqs = undelta(F.seq), times = undelta(F.t);
  for (let i = 0; i < N; i++) times[i] /= TICK;
  const runOf = new Int32Array(N).fill(-1);
  F.runs.forEach(function (r, k) { for (let i = r[0]; i < r[0] + r[1]; i++) runOf[i] = k; });
  const turnOfRow = new Int32Array(N).fill(0);
  (function () { let t = 0; for (let i = 0; i < N; i++) { if (t < F.turns.length && F.turns[t] === i) t++; turnOfRow[i] = t; } })();

  // -- small helpers ----------------------------------------------------------------------------------
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  // Controls, bidi overrides and other invisible characters become visible escapes, so recorded text
  // cannot reorder or hide what is shown next to it.
  const INVISIBLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;
  function visible(s) {
    return s.replace(INVISIBLE, function (c) { return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"); });
  }
  function oneLine(s) { return visible(s.replace(/\r?\n/g, " ⏎ ")); }
  function shorten(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }
  function secs(t) { // signed: frames before the session's first one (initialize) come out negative
    const a = Math.abs(t); let s = a.toFixed(3) + "s";
    if (a >= 60) { const m = Math.floor(a / 60); s = m + ":" + (a - m * 60).toFixed(3).padStart(6, "0"); }
    return (t < 0 ? "−" : "+") + s;
  }
  function dur(s) {
    if (s < 1) return Math.round(s * 1000) + " ms";
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }
  function plural(n, word) { return n.toLocaleString("en-US") + " " + word + (n === 1 ? "" : "s"); }
  function ms(v) { return v < 1000 ? v.toFixed(v < 10 ? 1 : 0) + " ms" : (v / 1000).toFixed(2) + " s"; }
  function str(i) { return i >= 0 ? S[i] : null; }
  const parsed = new Map();
  function message(row) { // lazily parsed, cached for the rows looked at
    if (parsed.has(row)) return parsed.get(row);
    let v;
    try { v = JSON.parse(F.raw[row]); } catch (e) { v = undefined; }
    if (parsed.size > 5000) parsed.clear();
    parsed.set(row, v);
    return v;
  }
  function isObj(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function blocksText(c) {
    if (Array.isArray(c)) return c.map(blocksText).join("");
    if (!isObj(c)) return "";
    if (typeof c.text === "string") return c.text;
    if (c.type === "content") return blocksText(c.content);
    if (c.type) return "[" + c.type + "]";
    return "";
  }
  function b64text(s) {
    try {
      const bin = atob(String(s)); const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return new TextDecoder("utf-8").decode(bytes);
    } catch (e) { return "(bad base64)"; }
  }
  function chunkText(row) {
    const m = message(row); const u = isObj(m) && isObj(m.params) ? m.params.update : null;
    if (!isObj(u)) return "";
    if (u.sessionUpdate === "terminal_output_chunk") return b64text(u.data);
    return blocksText(u.content);
  }
  // A one-line hint of what a frame carries, from its parsed message: made visible here, once, whatever
  // field the hint picked (oneLine is idempotent, so a part made visible before is unchanged).
  function preview(row) { return oneLine(hint(row)); }
  function hint(row) {
    const k = F.kind[row], raw = F.raw[row];
    if (k === "i" || k === "b") return shorten(oneLine(raw.slice(0, 400)), 160);
    if (raw.length > 8192) { // not worth parsing for a hint: show where its payload starts
      const at = Math.max(0, raw.search(/"(params|result|error)":/));
      return Math.round(raw.length / 1024) + " KB " + shorten(oneLine(raw.slice(at, at + 300)), 150);
    }
    const m = message(row);
    if (!isObj(m)) return "";
    if (k === "e") { const e = m.error; return isObj(e) ? shorten(oneLine(String(e.message || "")), 160) : ""; }
    if (k === "r") {
      const r = m.result;
      if (!isObj(r)) return shorten(oneLine(JSON.stringify(r) || ""), 120);
      if (r.stopReason) return "stopReason " + r.stopReason;
      if (r.sessionId) return String(r.sessionId);
      if (r.outcome) return oneLine(JSON.stringify(r.outcome));
      return shorten(oneLine(JSON.stringify(r)), 120);
    }
    const p = m.params;
    if (!isObj(p)) return "";
    const u = p.update;
    if (isObj(u)) {
      const t = blocksText(u.content) || planText(isObj(u.plan) ? u.plan : u);
      if (t) return shorten(oneLine(t), 200);
      if (u.sessionUpdate === "terminal_output_chunk") return shorten(oneLine(b64text(u.data)), 200);
      const bits = [u.title, u.status, u.state, u.stopReason, u.command].filter(function (x) { return typeof x === "string"; });
      return shorten(oneLine(bits.join(" · ")), 160);
    }
    if (p.prompt) return shorten(oneLine(blocksText(p.prompt)), 200);
    for (const key of ["path", "command", "title", "cwd", "content"]) {
      if (typeof p[key] === "string") return shorten(oneLine(p[key]), 160);
    }
    if (isObj(p.toolCall) && typeof p.toolCall.title === "string") return shorten(oneLine(p.toolCall.title), 160);
    return "";
  }
  function planText(p) { // a plan's entries (v1 on the update, v2 under "plan"), its markdown, or its file
    if (Array.isArray(p.entries)) {
      return p.entries.filter(isObj).map(function (e) { return "[" + e.status + "] " + String(e.content); }).join(" · ");
    }
    if (typeof p.content === "string") return p.content;
    return typeof p.uri === "string" ? "file " + p.uri : "";
  }
  const runText = new Map();
  function runPreview(k) { // the first few hundred characters: enough for a row, cheap for a huge run
    const r = F.runs[k]; let s = "";
    for (let i = r[0]; i < r[0] + r[1] && s.length < 400; i++) s += chunkText(i);
    return s;
  }
  function runJoined(k) {
    if (runText.has(k)) return runText.get(k);
    const r = F.runs[k]; const parts = [];
    for (let i = r[0]; i < r[0] + r[1]; i++) parts.push(chunkText(i));
    const s = parts.join(""); runText.set(k, s); return s;
  }

  // -- header -----------------------------------------------------------------------------------------
  function infoText(info) {
    if (!isObj(info)) return "?";
    const name = String(info.title || info.name || "?");
    // a title often carries the version already ("WebStorm 2026.1.2"): say it once
    const version = info.version ? String(info.version) : "";
    return version && !name.includes(version) ? name + " " + version : name;
  }
  function buildHeader() {
    const who = document.getElementById("who");
    const editor = infoText(H.client), agent = infoText(H.agent === null || !Object.keys(H.agent).length ? { name: H.argv[0] || "?" } : H.agent);
    who.append(el("span", "ed", "Editor: " + visible(editor)), el("span", "vs", "⇄"), el("span", "ag", "Agent: " + visible(agent)));
    if (H.session_title) who.append(el("span", "vs", "· " + visible(String(H.session_title))));
    [["lane-editor", "Editor · " + visible(editor)], ["lane-agent", "Agent · " + visible(agent)]].forEach(function (l) {
      const lane = document.getElementById(l[0]); lane.textContent = l[1]; lane.title = l[1];
    });
    const facts = document.getElementById("facts");
    function fact(label, value, bad) {
      const s = el("span", bad ? "bad" : ""); s.append(label + " ", el("b", "", value)); facts.append(s);
    }
    fact("protocol", H.protocol === null ? "unknown" : "v" + H.protocol);
    fact(H.session ? "session" : "connection", H.session ? visible(H.session) : String(H.connection));
    if (H.session) fact("connection", String(H.connection));
    fact("ended", visible(H.ended + (H.closed_by ? " (" + H.closed_by + ")" : "")), !/^(exit 0|running)$/.test(H.ended));
    fact("frames", N.toLocaleString("en-US"));
    fact("turns", String(H.turns));
    if (N > 1) fact("spans", dur(times[N - 1] - times[0]));
    if (H.unanswered) fact("unanswered", String(H.unanswered), true);
    const nerr = Object.keys(F.flags).length;
    if (nerr) fact("flagged frames", String(nerr), true);
    if (H.started) fact("started", new Date(H.started * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC");
    if (H.label) fact("label", visible(String(H.label)));
    if (H.cwd) fact("cwd", visible(String(H.cwd)));
    const caps = document.getElementById("caps");
    function capList(who, list, cls) {
      caps.append(el("span", "who", who));
      if (!list.length) caps.append(el("span", "chip", "none"));
      list.forEach(function (c) { caps.append(el("span", "chip " + cls, visible(c))); });
    }
    capList("editor can:", H.client_caps, "ed");
    capList("agent can:", H.agent_caps, "ag");
    if (H.auth.length) capList("auth:", H.auth, "");
    if (H.stderr_tail) { // what the agent wrote on stderr last: often why it ended
      const d = el("details", "stderr"); d.append(el("summary", "", "agent stderr (last lines)"));
      d.append(escapedPre(String(H.stderr_tail), "raw", 20000));
      document.getElementById("head").append(d);
    }
    if (isObj(H.check)) { // `acp-relay check` ran over the same frames
      const c = document.getElementById("check");
      c.hidden = false; c.append(el("span", "", "check: " + visible(String(H.check.summary))));
      if (H.check.errors) c.classList.add("fail");
      if (H.check.connection.length) {
        const d = el("details", "wide"); d.append(el("summary", "", H.check.connection.length + " about the whole connection"));
        H.check.connection.forEach(function (f) { d.append(el("div", "", visible(f))); });
        c.append(d);
      }
    }
    document.title = document.title + " · " + plural(N, "frame");
  }

  // -- the display list: frames, collapsed runs, idle gaps --------------------------------------------
  // item >= 0: a frame row; item = -1 - k: the head of run k; GAP: an idle stretch, whose length is in
  // gapBefore (item index -> seconds).
  let items = new Int32Array(0), gapBefore = new Map();
  const open = new Set(); // runs shown frame by frame
  let flt = { text: "", method: null, kind: "", dir: "" }, lowered = null;

  function globRe(g) { return new RegExp("^" + g.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".") + "$"); }
  function parseFilter(text) {
    const f = { text: "", method: null, kind: document.getElementById("kind").value, dir: document.getElementById("dir").value };
    const words = [];
    text.trim().split(/\s+/).forEach(function (w) {
      const m = /^(method|m|kind|k|dir|d):(.+)$/i.exec(w);
      if (!m) { if (w) words.push(w); return; }
      const key = m[1].toLowerCase()[0], v = m[2].toLowerCase();
      if (key === "m") f.method = globRe(m[2].includes("*") ? m[2] : "*" + m[2] + "*");
      else if (key === "k") f.kind = ({ request: "q", req: "q", response: "r", result: "r", error: "e", err: "e", notification: "n", notif: "n", batch: "b", invalid: "i" })[v] || "?";
      else f.dir = ({ c2a: "c", editor: "c", a2c: "a", agent: "a" })[v] || "?";
    });
    f.text = words.join(" ").toLowerCase();
    return f;
  }
  function active() { return !!(flt.text || flt.method || flt.kind || flt.dir); }
  function matches(i) {
    if (flt.kind && F.kind[i] !== flt.kind) return false;
    if (flt.dir && F.dir[i] !== flt.dir) return false;
    if (flt.method) { const m = str(F.m[i]); if (m === null || !flt.method.test(m)) return false; }
    if (flt.text) {
      if (!lowered) lowered = F.raw.map(function (r) { return r.toLowerCase(); });
      if (!lowered[i].includes(flt.text) && !S[F.w[i]].toLowerCase().includes(flt.text)) return false;
    }
    return true;
  }
  function rebuild() {
    const out = []; gapBefore = new Map();
    const on = active();
    let lastT = null;
    for (let i = 0; i < N; i++) {
      const k = runOf[i];
      if (k >= 0 && !open.has(k) && F.runs[k][0] === i) { // a closed run: one item for all of it
        const r = F.runs[k];
        let hit = !on;
        for (let j = i; !hit && j < i + r[1]; j++) hit = matches(j);
        if (hit) { gap(out, lastT, times[i]); out.push(-1 - k); lastT = times[i + r[1] - 1]; }
        i += r[1] - 1; continue;
      }
      if (k >= 0 && open.has(k) && F.runs[k][0] === i && !on) { gap(out, lastT, times[i]); out.push(-1 - k); lastT = times[i]; }
      if (on && !matches(i)) continue;
      gap(out, lastT, times[i]); out.push(i); lastT = times[i];
    }
    items = Int32Array.from(out);
    document.getElementById("spacer").style.height = (items.length * ROW) + "px";
    const shown = on ? countFrames() : N;
    document.getElementById("count").textContent = on ? shown.toLocaleString("en-US") + " of " + plural(N, "frame") : plural(N, "frame");
    draw(true);
  }
  function gap(out, lastT, t) {
    if (lastT === null || active() || t - lastT < GAP) return;
    gapBefore.set(out.length, t - lastT); out.push(GAP_ITEM);
  }
  function countFrames() {
    let n = 0;
    for (let x = 0; x < items.length; x++) { const it = items[x]; if (it >= 0) n++; else if (it !== GAP_ITEM) n += F.runs[-1 - it][1]; }
    return n;
  }

  // -- drawing the visible rows -----------------------------------------------------------------------
  const scroller = document.getElementById("scroller"), rowsEl = document.getElementById("rows");
  let sel = -1, selRun = -1, pending = false; // selected frame row, or selected run head

  function partnerOf(row) { const p = F.partner[row]; return p === undefined ? -1 : p; }
  function frameRow(it, x) {
    const i = it, k = F.kind[i];
    const r = el("div", "row " + F.dir[i] + " k-" + k);
    if (runOf[i] >= 0) r.classList.add("member");
    if (i === sel) r.classList.add("sel");
    if (sel >= 0 && partnerOf(sel) === i) r.classList.add("partner");
    r.dataset.row = String(i);
    r.append(el("span", "t", secs(times[i])));
    r.append(el("span", "arrow"));
    const lbl = el("span", "lbl");
    if (k === "e") lbl.append(el("span", "mark", "✕"));
    if (k === "i") lbl.append(el("span", "mark", "⚠"));
    if (F.flags[i] && k !== "e" && k !== "i") lbl.append(el("span", "mark", "!"));
    const what = visible(S[F.w[i]].replace(/ [0-9.]+m?s$/, "")), space = k === "n" ? what.indexOf(" ") : -1;
    if (space > 0) { // name and entity id apart: the id gives way first (.ent in page.css)
      const w = el("span", "what ent"); w.append(el("span", "wn", what.slice(0, space)), " ", el("span", "wid", what.slice(space + 1)));
      lbl.append(w);
    } else lbl.append(el("span", "what", what));
    const lat = F.lat[i];
    if (lat !== undefined) { const b = el("span", "lat" + (lat >= 5000 ? " slow" : ""), ms(lat)); b.title = "latency"; lbl.append(b); }
    if (k === "q" && partnerOf(i) < 0) { const b = el("span", "lat slow", "no answer"); b.title = "no answer in this view"; lbl.append(b); }
    const pv = preview(i);
    if (pv) lbl.append(el("span", "pv", pv));
    r.append(lbl);
    return r;
  }
  function runRow(k) {
    const rr = F.runs[k], first = rr[0], isOpen = open.has(k);
    const r = el("div", "row run " + F.dir[first] + " k-n");
    if (selRun === k) r.classList.add("sel");
    r.dataset.run = String(k);
    r.append(el("span", "t", secs(times[first])));
    r.append(el("span", "arrow"));
    const lbl = el("span", "lbl");
    lbl.append(el("span", "tw", isOpen ? "▾" : "▸"));
    const kind = (str(F.w[first]) || "").split(" ")[0];
    lbl.append(el("span", "what", visible(kind) + " ×" + rr[1]));
    lbl.append(el("span", "pv", "“" + shorten(oneLine(runPreview(k)), 300) + "”"));
    r.append(lbl);
    r.title = rr[1] + " chunks over " + dur(times[first + rr[1] - 1] - times[first]) + (isOpen ? "; click to collapse" : "; click to expand");
    return r;
  }
  function gapRow(x) {
    const r = el("div", "row gap");
    r.append(el("span", "zig"));
    const g = el("span", "gl"); g.append(el("span", "", "… " + dur(gapBefore.get(x)) + " idle …")); r.append(g);
    return r;
  }
  let drawn = new Map(); // item index -> its row element, for the rows on screen
  function draw(force) { // force: the items or the selection changed, so every row is made again
    const top = scroller.scrollTop, h = scroller.clientHeight || 600;
    const a = Math.max(0, Math.floor(top / ROW) - OVERSCAN), b = Math.min(items.length, Math.ceil((top + h) / ROW) + OVERSCAN);
    if (!force && rowsEl.dataset.a === String(a) && rowsEl.dataset.b === String(b)) return;
    rowsEl.dataset.a = String(a); rowsEl.dataset.b = String(b);
    const keep = new Map();
    if (force) rowsEl.replaceChildren();
    else drawn.forEach(function (r, x) { if (x >= a && x < b) keep.set(x, r); else r.remove(); });
    const frag = document.createDocumentFragment();
    for (let x = a; x < b; x++) {
      if (keep.has(x)) continue; // a small scroll makes only the rows that came into view
      const it = items[x];
      const r = it >= 0 ? frameRow(it, x) : it === GAP_ITEM ? gapRow(x) : runRow(-1 - it);
      r.style.top = (x * ROW) + "px"; r.dataset.item = String(x);
      frag.append(r); keep.set(x, r);
    }
    rowsEl.append(frag);
    drawn = keep;
    if (!items.length) { const e = el("div", "", "No frame matches the filter."); e.id = "empty"; rowsEl.append(e); }
  }
  scroller.addEventListener("scroll", function () {
    if (pending) return; pending = true;
    requestAnimationFrame(function () { pending = false; draw(false); });
  });
  window.addEventListener("resize", function () { draw(true); });

  // -- selection, the frame panel ---------------------------------------------------------------------
  function itemIndexOf(row) { // the item showing frame `row` (its run head when the run is closed)
    const k = runOf[row];
    const want = k >= 0 && !open.has(k) ? -1 - k : row;
    let lo = 0, hi = items.length - 1;
    while (lo <= hi) { // items are in frame order; gaps and run heads sort by their first frame
      const mid = (lo + hi) >> 1, v = firstRowOf(mid);
      if (v < row) lo = mid + 1; else if (v > row) hi = mid - 1; else { lo = mid; break; }
    }
    for (let x = Math.max(0, lo - 2); x < Math.min(items.length, lo + 3); x++) if (items[x] === want) return x;
    for (let x = 0; x < items.length; x++) if (items[x] === want) return x;
    return -1;
  }
  function firstRowOf(x) {
    let it = items[x];
    if (it === GAP_ITEM) it = x + 1 < items.length ? items[x + 1] : N;
    if (it === undefined) return N;
    if (it < 0 && it !== GAP_ITEM) return F.runs[-1 - it][0] + (open.has(-1 - it) ? -0.5 : 0);
    return it;
  }
  function scrollToItem(x) {
    if (x < 0) return;
    const top = x * ROW, h = scroller.clientHeight;
    if (top < scroller.scrollTop || top + ROW > scroller.scrollTop + h) scroller.scrollTop = Math.max(0, top - h / 3);
  }
  function selectRow(row, scroll) {
    sel = row; selRun = -1;
    if (scroll) scrollToItem(itemIndexOf(row));
    draw(true); showFrame(row); markTranscript(row); showTurn(turnOfRow[row]);
  }
  function selectRun(k, scroll) {
    sel = -1; selRun = k;
    if (scroll) scrollToItem(itemIndexOf(F.runs[k][0]));
    draw(true); showRun(k); markTranscript(F.runs[k][0]); showTurn(turnOfRow[F.runs[k][0]]);
  }
  function toggleRun(k) {
    if (open.has(k)) open.delete(k); else open.add(k);
    rebuild(); selectRun(k, true);
  }
  rowsEl.addEventListener("click", function (ev) {
    const r = ev.target.closest(".row");
    if (!r) return;
    if (r.dataset.run !== undefined) { const k = +r.dataset.run; if (selRun === k || !open.has(k)) toggleRun(k); else selectRun(k, false); }
    else if (r.dataset.row !== undefined) selectRow(+r.dataset.row, false);
    scroller.focus({ preventScroll: true });
  });

  const pbody = document.getElementById("pbody"), pempty = document.getElementById("pempty");
  function meta(pairs) {
    const dl = el("dl", "meta");
    pairs.forEach(function (p) { if (p[1] !== null && p[1] !== undefined && p[1] !== "") dl.append(el("dt", "", p[0]), el("dd", "", p[1])); });
    return dl;
  }
  function rawBytes(row) {
    const b64 = F.raw64[row];
    if (b64 === undefined) return F.raw[row];
    const bin = atob(b64); let s = ""; // not UTF-8: show printable ASCII, escape the other bytes
    for (let i = 0; i < bin.length; i++) { const c = bin.charCodeAt(i); s += c >= 0x20 && c < 0x7f ? bin[i] : "\\x" + c.toString(16).padStart(2, "0"); }
    return s;
  }
  function escapedPre(text, cls, limit) {
    const pre = el("pre", cls);
    const shown = text.length > limit ? text.slice(0, limit) : text;
    let last = 0; const re = new RegExp(INVISIBLE.source, "g"); let m;
    while ((m = re.exec(shown))) {
      pre.append(shown.slice(last, m.index));
      pre.append(el("span", "esc", "\\u" + m[0].charCodeAt(0).toString(16).padStart(4, "0")));
      last = m.index + 1;
    }
    pre.append(shown.slice(last));
    if (text.length > limit) {
      const more = el("span", "more", " … " + (text.length - limit).toLocaleString("en-US") + " more characters (click)");
      more.addEventListener("click", function () { pre.replaceWith(escapedPre(text, cls, Infinity)); });
      pre.append(more);
    }
    return pre;
  }
  function showFrame(row) {
    pempty.hidden = true; pbody.hidden = false; pbody.replaceChildren();
    const k = F.kind[row], dirWord = F.dir[row] === "c" ? "editor → agent" : "agent → editor";
    pbody.append(el("h3", "", visible(S[F.w[row]])));
    pbody.append(el("div", "sub", "frame " + ids[row] + " · seq " + seqs[row] + " · " + secs(times[row]) + " · " + dirWord + " · " + KIND[k]));
    pbody.append(meta([
      ["method", str(F.m[row]) === null ? null : visible(str(F.m[row]))], ["id", F.rid[row] === undefined ? null : visible(F.rid[row])],
      ["latency", F.lat[row] === undefined ? null : ms(F.lat[row])], ["bytes", String(F.raw64[row] ? atob(F.raw64[row]).length : new TextEncoder().encode(F.raw[row]).length)],
      ["turn", turnOfRow[row] ? String(turnOfRow[row]) : null], ["chunk run", runOf[row] >= 0 ? (row - F.runs[runOf[row]][0] + 1) + " of " + F.runs[runOf[row]][1] : null],
    ]));
    const p = partnerOf(row);
    pbody.append(el("h4", "", "Partner"));
    if (p >= 0) {
      const b = el("button", "partnerlink", (p > row ? "answered by " : "answers ") + visible(S[F.w[p]]).replace(/ [0-9.]+m?s$/, "") + " (frame " + ids[p] + ")");
      b.type = "button"; b.addEventListener("click", function () { selectRow(p, true); });
      pbody.append(b);
      if (p > row) pbody.append(el("span", "pv", "  after " + ms(F.lat[p] !== undefined ? F.lat[p] : (times[p] - times[row]) * 1000)));
    } else pbody.append(el("span", "none", k === "q" ? "no answer in this view" : "none"));
    pbody.append(el("h4", "", "Findings"));
    const found = F.flags[row];
    if (found && found.length) { const ul = el("ul", "find"); found.forEach(function (f) { ul.append(el("li", "", visible(f))); }); pbody.append(ul); }
    else pbody.append(el("span", "none", "none"));
    pbody.append(el("h4", "", "Message"));
    const m = message(row);
    if (m === undefined) pbody.append(el("span", "none", "not JSON: see the raw bytes"));
    else { const t = el("div", "tree"); t.append(tree(null, m, 0)); pbody.append(t); }
    pbody.append(el("h4", "", "Raw bytes" + (F.raw64[row] ? " (not UTF-8: other bytes as \\xNN)" : "")));
    if (F.red && F.red[row]) pbody.append(el("div", "sub", visible(F.red[row])));
    if (F.cut && F.cut[row]) pbody.append(el("div", "sub", visible(F.cut[row])));
    pbody.append(escapedPre(rawBytes(row), "raw", 20000));
  }
  function showRun(k) {
    const r = F.runs[k], first = r[0], last = r[0] + r[1] - 1;
    pempty.hidden = true; pbody.hidden = false; pbody.replaceChildren();
    const kind = (str(F.w[first]) || "").split(" ")[0];
    pbody.append(el("h3", "", visible(kind) + " × " + r[1]));
    pbody.append(el("div", "sub", "frames " + ids[first] + "–" + ids[last] + " · " + secs(times[first]) + " to " + secs(times[last]) + " · " + dur(times[last] - times[first])));
    const b = el("button", "jump", open.has(k) ? "collapse (Enter)" : "show each frame (Enter)"); b.type = "button";
    b.addEventListener("click", function () { toggleRun(k); });
    pbody.append(b);
    pbody.append(el("h4", "", "Joined text"));
    pbody.append(escapedPre(runJoined(k), "joined", 200000));
  }

  // A collapsible tree of a JSON value; children are built when a node is first opened.
  function scalar(v) {
    if (typeof v === "string") return el("span", "s", JSON.stringify(v).length > 2000 ? visible(JSON.stringify(v).slice(0, 2000)) + "…" : visible(JSON.stringify(v)));
    if (v === null) return el("span", "z", "null");
    return el("span", "n", String(v));
  }
  function tree(key, v, depth) {
    if (v === null || typeof v !== "object") {
      const d = el("div", "leaf");
      if (key !== null) d.append(el("span", "k", visible(key) + ": "));
      d.append(scalar(v)); return d;
    }
    const arr = Array.isArray(v), keys = arr ? null : Object.keys(v), n = arr ? v.length : keys.length;
    const det = el("details"), sum = el("summary");
    if (key !== null) sum.append(el("span", "k", visible(key) + ": "));
    sum.append(arr ? "[" + n + "]" : "{" + n + "}");
    if (!arr && typeof v.method === "string") sum.append(el("span", "pv", " " + visible(v.method)));
    if (!arr && typeof v.sessionUpdate === "string") sum.append(el("span", "pv", " " + visible(v.sessionUpdate)));
    det.append(sum);
    let built = 0;
    function build(limit) {
      const stop = Math.min(n, limit);
      for (; built < stop; built++) det.append(arr ? tree(String(built), v[built], depth + 1) : tree(keys[built], v[keys[built]], depth + 1));
      const old = det.querySelector(":scope > .more"); if (old) old.remove();
      if (built < n) {
        const more = el("div", "more", "… " + (n - built) + " more");
        more.addEventListener("click", function () { build(built + 500); });
        det.append(more);
      }
    }
    det.addEventListener("toggle", function () { if (det.open && !built) build(200); });
    if (depth < 4 && n <= 50) { det.open = true; build(200); }
    return det;
  }

  // -- transcript -------------------------------------------------------------------------------------
  const tlines = document.getElementById("tlines"), tsecs = [], tRows = [];
  // The first sections at once, the rest in slices after the first paint: a long session has thousands.
  function buildTranscript(from) { // in blocks of 100 sections: few enough for content-visibility to be cheap
    const frag = document.createDocumentFragment(), all = D.transcript;
    const to = Math.min(all.length, from + (from ? 2000 : 300));
    let block = null;
    for (let i = from; i < to; i++) {
      if (i % 100 === 0 || !block) { block = el("div", "tblock"); frag.append(block); }
      const row = all[i][0], text = all[i][1];
      const d = el("div", "tsec", visible(text.replace(/^\n/, "").slice(0, LONG)));
      if (text.length > LONG + 1) { // a message of 100,000 chunks: its start here, all of it on request
        const more = el("span", "more", " … " + (text.length - LONG).toLocaleString("en-US") + " more characters (click)");
        more.addEventListener("click", function (ev) { ev.stopPropagation(); d.textContent = visible(text.replace(/^\n/, "")); });
        d.append(more);
      }
      if (/^\n?=== Turn /.test(text)) d.classList.add("turn");
      if (row >= 0) { d.classList.add("link"); d.dataset.row = String(row); d.title = "frame " + ids[row]; tsecs.push(d); tRows.push(row); }
      block.append(d);
    }
    tlines.append(frag);
    if (to < all.length) setTimeout(function () { buildTranscript(to); }, 0);
    else tlines.dataset.complete = "1";
  }
  function transcriptClicks() {
    tlines.addEventListener("click", function (ev) {
      const d = ev.target.closest(".tsec.link");
      if (!d) return;
      jumpTo(+d.dataset.row);
    });
  }
  function jumpTo(row) {
    if (active()) { document.getElementById("filter").value = ""; document.getElementById("kind").value = ""; document.getElementById("dir").value = ""; flt = parseFilter(""); rebuild(); }
    const k = runOf[row];
    if (k >= 0 && !open.has(k)) selectRun(k, true); else selectRow(row, true);
  }
  let curT = null;
  function markTranscript(row) {
    let lo = 0, hi = tRows.length - 1, best = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (tRows[mid] <= row) { best = mid; lo = mid + 1; } else hi = mid - 1; }
    if (curT) curT.classList.remove("cur");
    curT = best >= 0 ? tsecs[best] : null;
    if (curT) {
      curT.classList.add("cur");
      const top = curT.offsetTop - tlines.offsetTop;
      if (top < tlines.scrollTop || top > tlines.scrollTop + tlines.clientHeight - 20) tlines.scrollTop = Math.max(0, top - 40);
    }
  }

  // -- filter, turns, keys ----------------------------------------------------------------------------
  let timer = 0;
  function refilter() { flt = parseFilter(document.getElementById("filter").value); rebuild(); scroller.scrollTop = 0; draw(true); }
  document.getElementById("filter").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refilter, 120); });
  document.getElementById("kind").addEventListener("change", refilter);
  document.getElementById("dir").addEventListener("change", refilter);

  let turn = 0;
  function showTurn(t) {
    turn = t;
    const n = F.turns.length;
    document.getElementById("turnpos").textContent = n ? (t ? "turn " + t + " of " + n : "before turn 1 (" + plural(n, "turn") + ")") : "no turns";
    document.getElementById("prevturn").disabled = t <= 1;
    document.getElementById("nextturn").disabled = t >= n;
  }
  function goTurn(t) { if (t >= 1 && t <= F.turns.length) jumpTo(F.turns[t - 1]); }
  document.getElementById("prevturn").addEventListener("click", function () { goTurn(turn - 1); });
  document.getElementById("nextturn").addEventListener("click", function () { goTurn(turn + 1); });

  function currentItem() {
    if (sel >= 0) return itemIndexOf(sel);
    if (selRun >= 0) return itemIndexOf(F.runs[selRun][0]);
    return -1;
  }
  function move(delta) {
    let x = currentItem();
    if (x < 0) x = delta > 0 ? -1 : items.length;
    for (x += delta; x >= 0 && x < items.length; x += delta) {
      const it = items[x];
      if (it === GAP_ITEM) continue;
      if (it >= 0) selectRow(it, true); else selectRun(-1 - it, true);
      return;
    }
  }
  document.addEventListener("keydown", function (ev) {
    const typing = ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement;
    if (typing) { if (ev.key === "Escape" || ev.key === "Enter") { ev.target.blur(); scroller.focus(); } return; }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "j" || ev.key === "ArrowDown") { move(1); ev.preventDefault(); }
    else if (ev.key === "k" || ev.key === "ArrowUp") { move(-1); ev.preventDefault(); }
    else if (ev.key === "Enter") {
      if (selRun >= 0) toggleRun(selRun);
      else if (sel >= 0) { showFrame(sel); document.getElementById("panel").scrollTop = 0; }
      else move(1);
      ev.preventDefault();
    } else if (ev.key === "/") { document.getElementById("filter").focus(); ev.preventDefault(); }
    else if (ev.key === "Escape") {
      if (active()) { document.getElementById("filter").value = ""; document.getElementById("kind").value = ""; document.getElementById("dir").value = ""; refilter(); }
      else { sel = -1; selRun = -1; draw(true); pbody.hidden = true; pempty.hidden = false; }
    }
    else if (ev.key === "[") goTurn(turn - 1);
    else if (ev.key === "]") goTurn(turn + 1);
  });

  mark("columns");
  buildHeader();
  flt = parseFilter("");
  rebuild();
  mark("diagram");
  buildTranscript(0);
  transcriptClicks();
  mark("transcript");
  showTurn(0);
  document.body.dataset.ready = "1";
  requestAnimationFrame(function () { setTimeout(function () { // after the first screen is painted
    timing.painted = Math.round(performance.now()); // since navigation start, unlike the marks above
    document.body.dataset.timing = JSON.stringify(timing); // read by tools/bench.py
  }, 0); });
})();
