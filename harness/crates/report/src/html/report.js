// The report's script: grid filters, and the page of one cell (#/cell/NAME, #/cell/NAME@SEQ
// selects event SEQ). A cell's data is parsed only when its page opens; its timeline is
// virtualised: only the rows on screen (and a few around them) are in the DOM.
(function () {
  "use strict";
  const ROW = 26;
  const OVERSCAN = 12;
  // A timeline of this many entries or fewer starts folded: it holds little, and open it would
  // push what the page says below a tall empty panel.
  const NEAR_EMPTY = 8;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const names = JSON.parse(document.getElementById("cells-index").textContent);
  const indexOf = new Map(names.map((name, i) => [name, i]));
  const parsed = new Map();
  const matrixView = $("#matrix-view");
  const cellView = $("#cell-view");
  const baseTitle = document.title;
  const repositoryBase = (() => {
    const block = document.getElementById("repository-base");
    try { return block ? JSON.parse(block.textContent) : null; } catch (e) { return null; }
  })();

  function cellData(i) {
    if (!parsed.has(i)) {
      let data;
      try {
        data = JSON.parse(document.getElementById("cell-" + i).textContent);
        // Rows are arrays in the page (timeline::Entry): named again here.
        data.timeline = (data.timeline || []).map((r) => ({
          t: r[0], src: r[1], seq: r[2], file: r[3], line: r[4], title: r[5], text: r[6], body: r[7], cited: r[8] === 1,
        }));
      } catch (e) {
        data = { cell: names[i], notes: ["this cell's data in the report is broken: " + e] };
      }
      parsed.set(i, data);
    }
    return parsed.get(i);
  }

  // h("div.a.b#id", {attr: v}, child…): a small element builder; strings become text nodes.
  function h(spec, attrs, ...children) {
    const [tagAndClasses, id] = spec.split("#");
    const [tag, ...classes] = tagAndClasses.split(".");
    const el = document.createElement(tag || "div");
    if (classes.length) el.className = classes.join(" ");
    if (id) el.id = id;
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(el.dataset, value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    }
    return el;
  }

  // ---- the grid's filters ----
  const only = $("#only-differences");
  const filterProfile = $("#filter-profile");
  const filterSuite = $("#filter-suite");
  const filterRunner = $("#filter-runner");
  const filterEnv = $("#filter-environment");
  function applyFilters() {
    const differences = only.checked;
    const profile = filterProfile.value;
    const suite = filterSuite.value;
    const runner = filterRunner.value;
    const env = filterEnv.value;
    let shown = 0;
    for (const section of $$("section.suite")) {
      const suiteOk = (!suite || section.dataset.suite === suite) && (!profile || section.dataset.profile === profile);
      let inSection = 0;
      for (const el of $$("[data-env]", section)) el.classList.toggle("off", !!env && el.dataset.env !== env);
      for (const row of $$("tbody tr", section)) {
        const rowOk = suiteOk && (!runner || row.dataset.runner === runner);
        let inRow = 0;
        for (const td of $$("td[data-cell]", row)) {
          const ok = rowOk && (!env || td.dataset.env === env) && (!differences || td.dataset.failure === "true");
          td.classList.toggle("dim", !ok);
          if (ok) inRow++;
        }
        row.hidden = inRow === 0;
        inSection += inRow;
      }
      section.hidden = inSection === 0;
      shown += inSection;
    }
    for (const section of $$("section.profile")) {
      section.hidden = $$("section.suite", section).every((s) => s.hidden);
    }
    $("#shown").textContent = shown + " of " + names.length + " cells shown";
  }
  // The filters live in the address too (#?differences=1&suite=…&runner=…&environment=…), so
  // a filtered grid can be linked.
  function filtersToHash() {
    const params = new URLSearchParams();
    if (only.checked) params.set("differences", "1");
    if (filterProfile.value) params.set("profile", filterProfile.value);
    if (filterSuite.value) params.set("suite", filterSuite.value);
    if (filterRunner.value) params.set("runner", filterRunner.value);
    if (filterEnv.value) params.set("environment", filterEnv.value);
    const text = params.toString();
    history.replaceState(null, "", text ? "#?" + text : location.pathname + location.search);
  }
  function filtersFromHash(hash) {
    const params = new URLSearchParams(hash.slice(2));
    only.checked = params.get("differences") === "1";
    for (const [select, key] of [[filterProfile, "profile"], [filterSuite, "suite"], [filterRunner, "runner"], [filterEnv, "environment"]]) {
      const wanted = params.get(key) || "";
      select.value = Array.from(select.options).some((o) => o.value === wanted) ? wanted : "";
    }
  }
  for (const el of [only, filterProfile, filterSuite, filterRunner, filterEnv]) {
    el.addEventListener("change", () => { applyFilters(); filtersToHash(); });
  }

  // ---- a cell's page ----
  const SOURCES = [
    ["in", "driver → app-server"],
    ["out", "app-server → driver"],
    ["driver", "driver events"],
    ["harness", "harness evidence"],
    ["model", "what the model was told"],
    ["other", "notes, raw lines, records"],
  ];
  function groupOf(src) {
    if (src === "model-log") return "model";
    if (src === "note" || src === "raw" || src === "record") return "other";
    return src;
  }
  const STATUS_TEXT = {
    "as-expected": "as expected",
    differs: "differs from the baseline",
    stale: "stale baseline: the cell now passes",
    error: "harness error: no gradable run",
    ignored: "ignored: cannot run here",
    "not-applicable": "not applicable: the driver cannot express this case",
  };

  function section(title, ...children) {
    return h("section.panel", {}, h("h3", {}, title), ...children);
  }

  function kv(rows) {
    return h("table.kv", {}, rows.filter((r) => r[1] !== undefined).map(([k, v]) =>
      h("tr", {}, h("th", {}, k), h("td", {}, v === null ? h("span.null", {}, "null (the default applies)") : typeof v === "object" ? JSON.stringify(v) : String(v)))));
  }

  // argv with each option and its value (`-c key=value`, `--listen stdio://`) on its own line.
  function argvText(argv) {
    if (!Array.isArray(argv)) return JSON.stringify(argv);
    const lines = [];
    for (let i = 0; i < argv.length; i++) {
      const takesValue = argv[i] === "-c" || (String(argv[i]).startsWith("--") && !String(argv[i]).includes("="));
      if (takesValue && i + 1 < argv.length && !String(argv[i + 1]).startsWith("-")) {
        lines.push(argv[i] + " " + argv[i + 1]);
        i++;
      } else lines.push(argv[i]);
    }
    return lines.join("\n");
  }

  function launchPanel(d) {
    const left = [];
    const right = [];
    const l = d.launch;
    if (l && typeof l === "object") {
      left.push(kv([
        ["driver", l.driver],
        ["mode", l.mode],
        ["target", l.target],
        ["policy", l.policy],
        ["network enabled", l.network_enabled],
        ["thread/start permissions", l.thread_permissions],
        ["turn/start permissions", l.turn_permissions],
        ["launch identity", l.identity],
      ]));
      right.push(h("h4", {}, "app-server argv (after the program name)"), h("pre.argv", {}, argvText(l.argv)));
    } else {
      left.push(h("p.missing", {}, "no run.started event: the launch is unknown"));
    }
    for (const r of d.relaunches || []) {
      right.push(h("h4", {}, "relaunch (event #" + r.seq + ")"), kv([
        ["policy", r.policy], ["thread permissions", r.thread_permissions], ["resumes thread", r.resume_thread], ["identity", r.identity],
      ]), h("pre.argv", {}, argvText(r.argv)));
    }
    const tap = d.tap_launches || [];
    if (!tap.length) left.push(h("p.dim", {}, "the tap's launches: none recorded in transcript.jsonl"));
    else left.push(h("h4", {}, "the tap's launches (" + tap.length + ")"));
    for (const r of tap) {
      const ended = r.exit ? (r.exit.error ? "error: " + r.exit.error : r.exit.signal !== undefined && r.exit.signal !== null ? "signal " + r.exit.signal : "exit " + r.exit.status)
        : "no exit record (killed with the tap)";
      left.push(h("h4", {}, "launch #" + (r.launch !== undefined ? r.launch : "?") + " · transcript.jsonl line " + r.line + " · " + ended),
        kv([["program", r.program], ["cwd", r.cwd], ["pid", r.pid], ["environment names", Array.isArray(r.env_names) ? r.env_names.join(" ") : r.env_names]]),
        h("pre.argv", {}, "driver's argv:\n" + argvText(r.argv) + (r.added_args && r.added_args.length ? "\n\nadded by the cell:\n" + argvText(r.added_args) : "")));
    }
    return section("Launch", h("div.launch", {}, h("div", {}, left), h("div", {}, right)));
  }

  function formatTime(t, base) {
    if (t === null || t === undefined || base === null) return "";
    return "+" + ((t - base) / 1000).toFixed(3) + " s";
  }

  // The virtualised timeline; returns {select(seq), measure()}.
  function timelinePanel(d) {
    const entries = d.timeline || [];
    let base = null;
    for (const e of entries) if (e.t !== null && e.t !== undefined && (base === null || e.t < base)) base = e.t;
    const enabled = new Set(SOURCES.map((s) => s[0]));
    let citedOnly = false;
    let query = "";
    let view = [];
    let selected = -1;
    const counts = {};
    for (const e of entries) counts[groupOf(e.src)] = (counts[groupOf(e.src)] || 0) + 1;

    const count = h("span.count", {});
    const rows = h("div.rows", {});
    const spacer = h("div.spacer", {}, rows);
    const viewport = h("div.viewport", { tabindex: "0" }, spacer);
    const detail = h("div.detail", {}, h("p.dim", {}, "select a row to see the whole message"));

    let lowered = null;
    function haystack(k) {
      if (lowered === null) lowered = entries.map((e) => (e.title + " " + e.text).toLowerCase());
      return lowered[k];
    }

    function refilter() {
      view = [];
      for (let k = 0; k < entries.length; k++) {
        const e = entries[k];
        if (!enabled.has(groupOf(e.src))) continue;
        if (citedOnly && !e.cited) continue;
        if (query && !haystack(k).includes(query)) continue;
        view.push(k);
      }
      spacer.style.height = view.length * ROW + "px";
      count.textContent = view.length + " of " + entries.length + " entries";
      render();
    }

    function rowOf(k, r) {
      const e = entries[k];
      const cls = "row src-" + groupOf(e.src) + (e.cited ? " cited" : "") + (k === selected ? " selected" : "");
      return h("div", {
        class: cls, style: "top:" + r * ROW + "px", dataset: { k: k, seq: e.seq === null || e.seq === undefined ? "" : e.seq },
        onclick: () => select(k),
      },
      h("span.time", {}, formatTime(e.t, base)),
      h("span.src", {}, e.src),
      h("span.seq", {}, e.seq === null || e.seq === undefined ? "" : "#" + e.seq),
      h("span.title", {}, e.title),
      h("span.text", {}, e.text),
      e.cited ? h("span.badge", {}, "cited") : null);
    }

    function render() {
      const top = viewport.scrollTop;
      const height = viewport.clientHeight || 600;
      const from = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
      const to = Math.min(view.length, Math.ceil((top + height) / ROW) + OVERSCAN);
      const fragment = document.createDocumentFragment();
      for (let r = from; r < to; r++) fragment.appendChild(rowOf(view[r], r));
      rows.replaceChildren(fragment);
    }

    let pending = false;
    viewport.addEventListener("scroll", () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; render(); });
    });
    viewport.addEventListener("keydown", (ev) => {
      if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
      const r = view.indexOf(selected) + (ev.key === "ArrowDown" ? 1 : -1);
      if (r >= 0 && r < view.length) { select(view[r]); ev.preventDefault(); }
    });

    function select(k, center) {
      selected = k;
      let r = view.indexOf(k);
      if (r < 0) {
        // Filtered out: show everything again rather than select something invisible.
        citedOnly = false; query = ""; for (const s of SOURCES) enabled.add(s[0]);
        for (const box of $$("input[data-src]", toolbar)) box.checked = true;
        citedBox.checked = false; search.value = "";
        refilter();
        r = view.indexOf(k);
      }
      const e = entries[k];
      const wanted = r * ROW - viewport.clientHeight / 2 + ROW / 2;
      const hidden = r * ROW < viewport.scrollTop || r * ROW + ROW > viewport.scrollTop + viewport.clientHeight;
      if (center || hidden) viewport.scrollTop = Math.max(0, wanted);
      render();
      detail.replaceChildren(
        h("p.where", { dataset: { seq: e.seq === null || e.seq === undefined ? "" : e.seq, cited: e.cited ? "true" : "false" } },
          e.cited ? h("span.badge", {}, "cited by the verdict") : null,
          h("b", {}, e.title), " · ", e.src, e.seq === null || e.seq === undefined ? "" : " · event #" + e.seq,
          " · ", e.file + " line " + e.line, e.t ? " · " + formatTime(e.t, base) : ""),
        h("pre.body", {}, e.body || "(not in the report, which keeps a bounded share of each cell's messages: see " + e.file + " line " + e.line + ")"));
    }

    const citedBox = h("input", { type: "checkbox", onchange: (ev) => { citedOnly = ev.target.checked; refilter(); } });
    const search = h("input", { type: "search", placeholder: "search titles and text", oninput: (ev) => { query = ev.target.value.toLowerCase(); refilter(); } });
    const toolbar = h("div.toolbar", {},
      SOURCES.map(([src, label]) => h("label.src-" + src, {}, h("input", {
        type: "checkbox", checked: true, dataset: { src: src },
        onchange: (ev) => { if (ev.target.checked) enabled.add(src); else enabled.delete(src); refilter(); },
      }), " " + label + " (" + (counts[src] || 0) + ")")),
      h("label", {}, citedBox, " cited only"), search, count);
    const note = d.timed ? null : h("p.note", {}, "events.jsonl carries no timestamps (event schema v1): its events come first, in sequence order, then the wire messages in time order.");
    const folded = entries.length <= NEAR_EMPTY;
    const panel = h("details.panel.timeline", folded ? {} : { open: true },
      h("summary", {}, h("h3", {}, "Timeline"), " ", h("span.dim", {}, entries.length + " entries" + (folded ? " (folded: click to open)" : ""))),
      note, toolbar, h("div.tl-body", {}, viewport, detail));
    // Folded, the viewport has no height: render its rows when it opens.
    panel.addEventListener("toggle", () => { if (panel.open) refilter(); });

    function selectSeq(seq) {
      const k = entries.findIndex((e) => e.file === "events.jsonl" && e.seq === seq);
      if (k >= 0 && !panel.open) panel.open = true;
      if (k >= 0) select(k, true);
      return k >= 0;
    }

    // Scroll through the whole timeline synchronously, timing each render with its layout.
    function measure() {
      const times = [];
      const steps = 100;
      const max = Math.max(0, view.length * ROW - viewport.clientHeight);
      let rowsMin = Infinity;
      let rowsMax = 0;
      for (let i = 0; i < steps; i++) {
        viewport.scrollTop = (max * i) / (steps - 1);
        const start = performance.now();
        render();
        void rows.getBoundingClientRect();
        void document.body.offsetHeight;
        times.push(performance.now() - start);
        rowsMin = Math.min(rowsMin, rows.childElementCount);
        rowsMax = Math.max(rowsMax, rows.childElementCount);
      }
      const filterStart = performance.now();
      query = "item"; refilter(); void document.body.offsetHeight;
      const filterMs = performance.now() - filterStart;
      query = ""; refilter();
      const sorted = times.slice().sort((a, b) => a - b);
      return {
        entries: entries.length,
        rows_in_dom: rows.childElementCount,
        // What virtualised scrolling guarantees, whatever the machine's speed: every scroll
        // position renders a bounded window of rows, never none.
        rows_in_dom_min_while_scrolling: rowsMin,
        rows_in_dom_max_while_scrolling: rowsMax,
        scroll_height_px: viewport.scrollHeight,
        scroll_renders: steps,
        scroll_render_median_ms: sorted[Math.floor(steps / 2)],
        scroll_render_p95_ms: sorted[Math.floor(steps * 0.95)],
        scroll_render_max_ms: sorted[steps - 1],
        filter_ms: filterMs,
      };
    }
    return { panel, refilter, selectSeq, measure };
  }

  function openCell(i, seq, measure) {
    const started = performance.now();
    const d = cellData(i);
    matrixView.hidden = true;
    cellView.hidden = false;
    document.title = d.cell + " — " + baseTitle;
    const verdict = d.verdict || d.status || "unknown";
    const nav = h("nav.cellnav", {},
      h("a", { href: "#" }, "← matrix"),
      i > 0 ? h("a", { href: "#/cell/" + names[i - 1] }, "‹ previous cell") : null,
      i + 1 < names.length ? h("a", { href: "#/cell/" + names[i + 1] }, "next cell ›") : null);
    const head = h("div.cellhead.s-" + d.status, {},
      h("h2", {}, d.cell),
      h("p", {}, h("span.badge.big.v-" + verdict, {}, verdict), " ", h("span.status", {}, STATUS_TEXT[d.status] || d.status || ""),
        d.duration_ms !== undefined ? h("span.dim", {}, " · " + d.duration_ms + " ms") : null));
    // First what a reader sorts the cell by: the reason (its cause leading it), the cause on
    // its own, the driver's stderr tail, and what the case checks.
    const about = d.about;
    const aboutLink = about ? (repositoryBase
      ? h("a", { href: repositoryBase + about.page }, about.page)
      : h("code", {}, about.page)) : null;
    const why = h("section.panel.why#why", {},
      d.cause
        ? [h("p.cause", {}, h("b", {}, "cause: "), d.cause), h("p.reason", {}, h("b", {}, "then: "), d.check_reason || "")]
        : h("p.reason", {}, d.reason || ""),
      d.stderr_tail !== null && d.stderr_tail !== undefined
        ? [h("h4", {}, "the driver's stderr.log (last " + d.stderr_tail.length + " of " + d.stderr_bytes + " bytes)"), h("pre.stderr", {}, d.stderr_tail)]
        : h("p.dim", {}, "the driver left no stderr.log"),
      about ? h("p.about", {}, h("b", {}, "the case checks: "), about.case, " · ", aboutLink) : null,
      d.expected_declarations ? h("p.declarations", {}, h("b", {}, "expected with the driver's declarations: "), d.expected_declarations) : null);
    const verdictPanel = section("Verdict",
      h("h4", {}, "the baseline expects"),
      h("p", {}, h("span.badge.v-" + d.expected, {}, d.expected || "?"), " ",
        d.expected_reason ? d.expected_reason : (d.expected === "pass" ? "no baseline entry: every cell is expected to pass" : "")),
      d.agreement ? h("p.dim", {}, "agreement: " + d.agreement) : null);
    const evidence = d.evidence || [];
    const timeline = timelinePanel(d);
    const cited = h("ol.cited#cited", {}, evidence.map((ev) => h("li", { dataset: { seq: ev.seq === null || ev.seq === undefined ? "" : ev.seq } },
      ev.seq !== null && ev.seq !== undefined
        ? h("a", { href: "#/cell/" + d.cell + "@" + ev.seq, onclick: (e) => { e.preventDefault(); history.replaceState(null, "", "#/cell/" + d.cell + "@" + ev.seq); timeline.selectSeq(ev.seq); } }, "event #" + ev.seq)
        : h("span", {}, "events.jsonl line " + ev.line),
      " ", h("span.excerpt", {}, ev.excerpt || ""))));
    const evidencePanel = section("Evidence the verdict cites", evidence.length ? cited : h("p.dim", {}, "the verdict cites no event"));
    const notes = (d.notes || []).map((n) => h("p.warn", {}, n));
    // A protocol cell that did not pass: the finding about the driver, in plain words, first.
    const f = d.finding;
    const finding = f ? h("section.finding", {},
      h("h3", {}, "Finding" + (f.check ? " — check " : "")), f.check ? h("code", {}, f.check) : null,
      h("p.what", {}, f.what),
      f.lines.length ? h("ol.finding-lines", {}, f.lines.map((l) => h("li", {},
        l.seq !== null && l.seq !== undefined
          ? h("a", { href: "#/cell/" + d.cell + "@" + l.seq, onclick: (e) => { e.preventDefault(); history.replaceState(null, "", "#/cell/" + d.cell + "@" + l.seq); timeline.selectSeq(l.seq); } }, "event #" + l.seq)
          : null,
        " ", h("strong", {}, l.title), " ", h("span.excerpt", {}, l.text)))) : h("p.dim", {}, "the verdict cites no event")) : null;
    const files = section("Evidence files",
      h("p.dim", {}, d.evidence_dir || ""),
      h("table.kv", {}, (d.files || []).map((f) => h("tr.file-" + f.state, {}, h("th", {}, f.state === "missing" ? f.name : h("a", { href: encodeURI(d.cell + "/" + (f.stored || f.name)) }, f.stored || f.name)), h("td", {}, f.state + (f.state === "missing" ? "" : " · " + f.lines + " lines · " + f.bytes + " bytes") + (f.stored ? " · gzip-compressed" : "") + (f.note ? " · " + f.note : ""))))));
    cellView.replaceChildren(nav, head, why, ...notes, ...(finding ? [finding] : []), h("div.columns", {}, verdictPanel, evidencePanel), launchPanel(d), timeline.panel, files);
    timeline.refilter();
    const first = evidence.find((ev) => ev.seq !== null && ev.seq !== undefined);
    const target = seq !== null ? seq : first ? first.seq : null;
    if (target !== null && !timeline.selectSeq(target)) cellView.prepend(h("p.warn", {}, "event #" + target + " is not in this cell's timeline"));
    window.scrollTo(0, 0);
    const openMs = performance.now() - started;
    cellView.dataset.openMs = openMs.toFixed(1);
    if (measure) {
      const m = Object.assign({ open_ms: openMs }, timeline.measure());
      document.body.dataset.measure = JSON.stringify(m);
      cellView.prepend(h("pre#measure", {}, JSON.stringify(m, null, 2)));
    }
  }

  function route() {
    let hash = location.hash || "";
    try {
      hash = decodeURIComponent(hash);
    } catch (e) {
      // A malformed %-escape: use the address as it is.
    }
    const m = /^#\/cell\/([^@?]+)(?:@(\d+))?(\?measure)?$/.exec(hash);
    if (m && indexOf.has(m[1])) {
      openCell(indexOf.get(m[1]), m[2] !== undefined ? Number(m[2]) : null, !!m[3]);
      return;
    }
    cellView.hidden = true;
    cellView.replaceChildren();
    matrixView.hidden = false;
    if (hash.startsWith("#?")) {
      filtersFromHash(hash);
      applyFilters();
    }
    document.title = baseTitle;
    const old = $("#unknown-cell");
    if (old) old.remove();
    if (m) matrixView.prepend(h("p.warn#unknown-cell", {}, "no cell named " + m[1] + " in this report"));
  }
  window.addEventListener("hashchange", route);
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !cellView.hidden) location.hash = "#";
  });
  applyFilters();
  route();
  document.body.dataset.ready = "true";
  document.body.dataset.readyMs = performance.now().toFixed(1);
})();
