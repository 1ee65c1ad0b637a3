/* Draws the site's charts with Plotly from data in <script type="application/json"> tags
 * (Django's json_script) and, for range buttons, from the JSON APIs.
 * No inline scripts anywhere: this file is loaded with `defer`.
 *
 * Plotly (1 MB) is fetched in parallel with the page (a preload link) but run only after the
 * page's content is parsed: a deferred Plotly held DOMContentLoaded back by its parse time.
 *
 * Every line carries its competitor's fixed colour (arena/colours.py) so a competitor looks
 * the same on every chart; `annotations` ({x, kind, label, detail}) become dotted vertical
 * lines: grey for cohort events, red for staff corrections. Colours repeat after seven
 * competitors, so a line is also found by name: hovering or focusing its legend entry (or
 * hovering near it) fades the others, and the home and cohort charts write each name at its
 * line's end while there are at most LABEL_MAX lines. */
(function () {
  "use strict";

  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var NARROW = 640;
  var EVENT_COLOURS = { cohort: "#8a94a0", correction: "#b3261e", resolution: "#137333" };
  var PLOTLY_SRC = document.currentScript && document.currentScript.dataset.plotly;
  // Up to this many lines carry their name at their last point; beyond it the labels would be
  // nudged out of reach of their lines (35 competitors), so a reader finds a line by hovering
  // or focusing its legend entry, which fades every other line (highlight, below).
  var LABEL_MAX = 8;
  var LABEL_GAP = 15;  // px between label centres: an 11 px label box is about 15 px tall
  var FADED = 0.15;
  var plotlyLoading = null;

  // Resolves once window.Plotly exists (loading it the first time a chart needs it).
  function withPlotly() {
    if (window.Plotly) { return Promise.resolve(); }
    if (!plotlyLoading) {
      plotlyLoading = new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = PLOTLY_SRC;
        tag.onload = resolve;
        tag.onerror = reject;
        document.head.appendChild(tag);
      });
    }
    return plotlyLoading;
  }

  function narrow(el) { return (el.clientWidth || window.innerWidth) < NARROW; }

  // Text from the data (market questions, staff reasons) is shown as text, never as markup:
  // Plotly reads a small HTML subset in labels, so the markup characters are escaped.
  function esc(s) {
    return String(s == null ? "" : s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function baseLayout(el, yTitle, nLegend) {
    var small = narrow(el);
    // A horizontal legend under the plot needs room for its rows; the x axis has no title
    // (the caption says the times are UTC), so the legend never sits on top of one.
    var perRow = small ? 2 : 6;
    var rows = Math.max(1, Math.ceil((nLegend || 0) / perRow));
    var legendPx = nLegend > 1 ? 22 * rows + 10 : 0;
    var plotPx = small ? 260 : 340;
    return {
      height: plotPx + legendPx + 40,
      margin: { l: small ? 48 : 64, r: small ? 8 : 20, t: 24, b: 30 + legendPx },
      hovermode: "x unified",
      // The hover box lists every line at that time, highest value first, each with its full
      // name (Plotly cuts names at 15 characters by default) and its unit (hoverFormat).
      hoversort: "value descending",
      hoverlabel: { namelength: -1 },
      showlegend: nLegend > 1,
      legend: { orientation: "h", x: 0, xanchor: "left", y: -(30 / plotPx), yanchor: "top",
                font: { size: small ? 11 : 12 } },
      xaxis: { type: "date", automargin: true },
      yaxis: { title: { text: yTitle, standoff: 4 }, zeroline: false, automargin: true },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      shapes: [],
      annotations: []
    };
  }

  // One number format per unit, fixed places, so a hover box never mixes "10.14049k" with
  // "8,935.98".
  var HOVER = {
    usd: "%{fullData.name}: $%{y:,.2f}<extra></extra>",
    pct: "%{fullData.name}: %{y:,.1f} %<extra></extra>",
    // The home chart draws growth factors on a log axis; its hover shows the percent it carries.
    growth: "%{fullData.name}: %{customdata:+,.1f} %<extra></extra>",
    price: "%{fullData.name}: %{y:.3f}<extra></extra>"
  };

  function line(s, x, y, extra) {
    var t = { type: "scatter", mode: "lines", name: esc(s.label), x: x, y: y, connectgaps: false,
              line: { width: 2 } };
    if (s.color) { t.line.color = s.color; }
    if (s.dash) { t.line.dash = s.dash; }
    for (var k in extra || {}) { t[k] = extra[k]; }
    return t;
  }

  function addEvents(layout, events, el) {
    var small = narrow(el);
    events = events || [];
    // Events at the same instant and of the same kind share one line and one label ("+N"),
    // with every detail on hover: several corrections at one tick no longer print on top of
    // each other.
    var groups = [];
    var byKey = {};
    events.forEach(function (ev) {
      var key = ev.x + "|" + ev.kind;
      if (!byKey[key]) { byKey[key] = { x: ev.x, kind: ev.kind, items: [] }; groups.push(byKey[key]); }
      byKey[key].items.push(ev);
    });
    var labelled = 0;
    groups.forEach(function (g) {
      var colour = EVENT_COLOURS[g.kind] || EVENT_COLOURS.cohort;
      layout.shapes.push({ type: "line", xref: "x", yref: "paper", x0: g.x, x1: g.x, y0: 0, y1: 1,
                           line: { color: colour, width: g.kind === "cohort" ? 1 : 2, dash: "dot" } });
      // Corrections are always labelled; cohort events only where there is room.
      if (g.kind === "cohort" && (small || groups.length > 8)) { return; }
      var first = g.items[0];
      var text = esc(first.label) + (g.items.length > 1 ? " +" + (g.items.length - 1) : "");
      var hover = g.items.map(function (ev) { return esc(ev.label + (ev.detail ? ": " + ev.detail : "")); });
      layout.annotations.push({ x: g.x, xref: "x", y: 1, yref: "paper", yanchor: "bottom",
                                text: text, showarrow: false, textangle: 0,
                                font: { size: 10, color: colour },
                                hovertext: hover.join("<br>"), yshift: (labelled % 2) * 11 });
      labelled += 1;
    });
  }

  function countPoints(traces) {
    return traces.reduce(function (n, t) {
      return n + (t.y || []).filter(function (v) { return v !== null && v !== undefined; }).length;
    }, 0);
  }

  // Percent ticks of the home chart's log axis: from these, the ones inside the values of the
  // lines shown, at least an eighth of that span apart (in log terms), always with 0%.
  var GROWTH_TICKS = [-95, -90, -80, -70, -60, -50, -40, -30, -20, -10, -5, -2, -1, 0, 1, 2, 5,
                      10, 20, 30, 50, 75, 100, 150, 200, 300, 400, 600, 900, 1400, 1900, 2900,
                      4900, 9900, 19900, 49900, 99900];

  function growthTicks(traces) {
    var lo = Infinity, hi = -Infinity;
    traces.forEach(function (t) {
      if (t.visible === "legendonly" || t.visible === false) { return; }
      (t.y || []).forEach(function (v) {
        if (v !== null && v !== undefined && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      });
    });
    if (!isFinite(lo)) { lo = 1; hi = 1; }
    var span = Math.max(Math.log(hi) - Math.log(lo), Math.log(1.02));
    var kept = [];
    GROWTH_TICKS.forEach(function (p) {
      var f = Math.log(1 + p / 100);
      if (f < Math.log(lo) - span / 8 || f > Math.log(hi) + span / 8) { return; }
      if (p !== 0 && kept.length && f - Math.log(1 + kept[kept.length - 1] / 100) < span / 8) { return; }
      kept.push(p);
    });
    if (kept.indexOf(0) === -1) { kept.push(0); kept.sort(function (a, b) { return a - b; }); }
    return {
      "yaxis.tickvals": kept.map(function (p) { return 1 + p / 100; }),
      "yaxis.ticktext": kept.map(function (p) { return (p > 0 ? "+" : "") + p + "%"; })
    };
  }

  // Under the home chart: which lines the reader has hidden (legend clicks), in words.
  function noteHidden(el) {
    var note = document.querySelector('[data-chart-hidden="' + el.id + '"]');
    if (!note || !el.data) { return; }
    var hidden = el.data.filter(function (t) { return t.visible === "legendonly"; })
      .map(function (t) { return t.name; });
    note.textContent = hidden.length
      ? hidden.length + " of " + el.data.length + " lines hidden: " + hidden.join(", ") +
        " (click a name in the legend to show it again; the axis follows the lines shown)."
      : "";
    el.dataset.hidden = String(hidden.length);
  }

  // Beside the home chart: each line's value at the end of the range, highest first.
  function fillEnds(el, data) {
    var table = document.querySelector('[data-chart-ends="' + el.id + '"]');
    if (!table || !data.series) { return; }
    var body = table.querySelector("tbody");
    var ends = data.series.map(function (s) {
      var ys = (s.y || []).filter(function (v) { return v !== null && v !== undefined; });
      return { label: s.label, color: s.color, value: ys.length ? ys[ys.length - 1] : null };
    }).filter(function (e) { return e.value !== null; });
    ends.sort(function (a, b) { return b.value - a.value; });
    body.textContent = "";
    ends.forEach(function (e) {
      var tr = document.createElement("tr");
      var th = document.createElement("th");
      th.scope = "row";
      var svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      svg.setAttribute("class", "swatch");
      svg.setAttribute("width", "16");
      svg.setAttribute("height", "8");
      svg.setAttribute("viewBox", "0 0 16 8");
      svg.setAttribute("aria-hidden", "true");
      var stroke = document.createElementNS("http://www.w3.org/2000/svg", "line");
      [["x1", "0"], ["y1", "4"], ["x2", "16"], ["y2", "4"], ["stroke-width", "3"],
       ["stroke", e.color || "#888"]].forEach(function (a) { stroke.setAttribute(a[0], a[1]); });
      svg.appendChild(stroke);
      th.appendChild(svg);
      th.appendChild(document.createTextNode(e.label));
      var td = document.createElement("td");
      td.className = "num";
      td.dataset.label = "Chain-linked growth";
      // Signed by the figure shown: -0.04 reads 0.0%, never a negative zero.
      var shown = Math.abs(e.value).toFixed(1);
      var sign = Number(shown) === 0 ? "" : e.value > 0 ? "+" : "\u2212";
      td.textContent = sign + shown + "%";
      tr.appendChild(th);
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }

  // Which trace a Plotly node draws (a line's g.trace, a legend entry's g.traces): Plotly binds
  // the trace's calcdata to both, so this holds when hidden lines shift the DOM order.
  function traceIndexOf(node) {
    var d = node && node.__data__;
    d = d && d[0];
    if (d && !d.trace && d[0]) { d = d[0]; }
    return d && d.trace && typeof d.trace.index === "number" ? d.trace.index : null;
  }

  // The competitor's name beside its line's last point, in its colour, for up to LABEL_MAX
  // lines shown. The labels are placed before Plotly draws (no second redraw): each point's
  // height is estimated from the values shown (Plotly pads a line's autorange by 5 %), then the
  // labels are pushed apart to LABEL_GAP px, keeping their order, and held inside the plot so
  // they never reach the event labels above it. `labels` are the raw names (trace.name is
  // already escaped); they are escaped here after any cut.
  function directLabels(el, traces, layout, labels) {
    var small = narrow(el);
    var ends = [];
    traces.forEach(function (t, i) {
      if (t.visible === "legendonly" || t.visible === false) { return; }
      var ys = t.y || [];
      for (var k = ys.length - 1; k >= 0; k--) {
        if (ys[k] !== null && ys[k] !== undefined && (layout.yaxis.type !== "log" || ys[k] > 0)) {
          ends.push({ trace: i, x: t.x[k], y: ys[k], colour: (t.line || {}).color });
          return;
        }
      }
    });
    if (!ends.length || ends.length > LABEL_MAX) { return { annotations: [], traces: [] }; }
    var log = layout.yaxis.type === "log";
    var f = function (v) { return log ? Math.log(v) / Math.LN10 : v; };
    var lo = Infinity, hi = -Infinity;
    traces.forEach(function (t) {
      if (t.visible === "legendonly" || t.visible === false) { return; }
      (t.y || []).forEach(function (v) {
        if (v === null || v === undefined || (log && v <= 0)) { return; }
        lo = Math.min(lo, f(v)); hi = Math.max(hi, f(v));
      });
    });
    var pad = (hi - lo) * 0.05 || 1;
    lo -= pad; hi += pad;
    var height = layout.height - layout.margin.t - layout.margin.b;
    ends.forEach(function (e) { e.natural = height * (1 - (f(e.y) - lo) / (hi - lo)); });
    ends.sort(function (a, b) { return a.natural - b.natural; });
    var edge = LABEL_GAP / 2;
    ends.forEach(function (e, i) {
      e.at = Math.max(e.natural, edge, i ? ends[i - 1].at + LABEL_GAP : -Infinity);
    });
    for (var i = ends.length - 1; i >= 0; i--) {
      var below = i === ends.length - 1 ? height - edge : ends[i + 1].at - LABEL_GAP;
      ends[i].at = Math.min(ends[i].at, below);
    }
    // Room on the right for the longest name; on a phone the names are cut to keep the plot
    // wide (the full name is on hover and in the legend).
    var maxChars = small ? 13 : 26;
    var longest = 0;
    var out = ends.map(function (e) {
      var name = String(labels[e.trace] == null ? "" : labels[e.trace]);
      var shown = name.length > maxChars ? name.slice(0, maxChars - 1) + "\u2026" : name;
      longest = Math.max(longest, shown.length);
      return { x: e.x, y: f(e.y), xref: "x", yref: "y", xanchor: "left", yanchor: "middle",
               xshift: 4, yshift: Math.round(e.natural - e.at), showarrow: false,
               text: esc(shown), hovertext: esc(name), captureevents: true,
               font: { size: 11, color: e.colour || "#444" } };
    });
    layout.margin.r = Math.max(layout.margin.r, Math.round(longest * 6.6) + 12);
    return { annotations: out, traces: ends.map(function (e) { return e.trace; }) };
  }

  // Puts the direct labels after the chart's event labels and remembers which annotation
  // names which trace (the highlight fades the labels of the other lines too).
  function placeLabels(el, traces, layout, events, labels) {
    var placed = directLabels(el, traces, layout, labels);
    layout.annotations = events.concat(placed.annotations);
    el._arenaLabelTrace = {};
    placed.traces.forEach(function (t, i) { el._arenaLabelTrace[events.length + i] = t; });
    el.dataset.directLabels = String(placed.annotations.length);
    el.dataset.directLabelsFrom = String(events.length);  // the first label's annotation index
  }

  // One line at full strength, the others faded (index null: all restored). Styles the drawn
  // SVG directly: a Plotly restyle would redraw the chart on every mouse move, and the next
  // redraw starts from full strength anyway.
  function highlight(el, index) {
    el.dataset.highlight = index === null ? "" : String(index);
    el.querySelectorAll(".scatterlayer .trace").forEach(function (g) {
      g.style.opacity = index === null || traceIndexOf(g) === index ? "" : String(FADED);
    });
    var labelTrace = el._arenaLabelTrace || {};
    el.querySelectorAll("g.annotation").forEach(function (g) {
      var t = labelTrace[g.getAttribute("data-index")];
      g.style.opacity = index === null || t === undefined || t === index ? "" : String(FADED);
    });
  }

  // The trace a legend entry or a direct label stands for, or null.
  function itemTrace(el, node) {
    var item = node && node.closest ? node.closest("g.legend g.traces, g.annotation") : null;
    if (!item || !el.contains(item)) { return null; }
    if (item.matches("g.annotation")) {
      var t = (el._arenaLabelTrace || {})[item.getAttribute("data-index")];
      return t === undefined ? null : t;
    }
    return traceIndexOf(item);
  }

  // Hovering, focusing or tapping (a tap is a mouseover too) a legend entry or a direct label,
  // or hovering near a line, highlights that line; leaving restores them all. Listeners sit on
  // the chart's element, not on Plotly's nodes, which every redraw replaces.
  function watchHighlight(el) {
    if (el.dataset.highlightWatch) { return; }
    el.dataset.highlightWatch = "1";
    var enter = function (event) {
      var t = itemTrace(el, event.target);
      if (t !== null) { highlight(el, t); }
    };
    var leave = function (event) {
      if (itemTrace(el, event.target) === null) { return; }
      if (event.relatedTarget && itemTrace(el, event.relatedTarget) !== null) { return; }
      highlight(el, null);
    };
    el.addEventListener("mouseover", enter);
    el.addEventListener("focusin", enter);
    el.addEventListener("mouseout", leave);
    el.addEventListener("focusout", leave);
    // "x unified" hover reports every line at that time: the one nearest the pointer is meant.
    el.on("plotly_hover", function (ev) {
      var drag = el.querySelector(".nsewdrag");
      if (!ev || !ev.event || !drag || !ev.points || ev.points.length < 2) { return; }
      var y = ev.event.clientY - drag.getBoundingClientRect().top;
      var best = null, gap = Infinity;
      ev.points.forEach(function (p) {
        if (p.y === null || p.y === undefined || !p.yaxis) { return; }
        var d = Math.abs(p.yaxis.c2p(p.y) - y);
        if (d < gap) { gap = d; best = p.curveNumber; }
      });
      if (best !== null) { highlight(el, best); }
    });
    el.on("plotly_unhover", function () { highlight(el, null); });
    // Legend entries reachable from the keyboard, redone after each redraw (new nodes).
    var focusable = function () {
      el.querySelectorAll("g.legend g.traces").forEach(function (g) { g.setAttribute("tabindex", "0"); });
    };
    el.on("plotly_afterplot", focusable);
    focusable();
  }

  var BUILDERS = {
    // Cohort / entry value series: {x: [...], entries: [{label, color, dash, y: [...]}], annotations}
    series: function (data, el) {
      var traces = (data.entries || []).map(function (e) {
        return line(e, data.x, e.y, { hovertemplate: HOVER.usd });
      });
      var layout = baseLayout(el, "Value (USD)", traces.length);
      addEvents(layout, data.annotations, el);
      return { traces: traces, layout: layout, points: countPoints(traces),
               labels: (data.entries || []).map(function (e) { return e.label; }) };
    },
    // Home page: {x: [...], series: [{label, color, y: [...]}], annotations}, y the chain-linked
    // growth in percent (web/charts.py scope_return_series). Drawn as the growth factor
    // 1 + y/100 on a log axis, ticks labelled in percent: one competitor running away leaves
    // the others readable, and the axis autoranges over the lines shown.
    overview: function (data, el) {
      var traces = (data.series || []).map(function (s) {
        var factor = (s.y || []).map(function (v) {
          return v === null || v === undefined || v <= -100 ? null : 1 + v / 100;
        });
        return line(s, data.x, factor, {
          customdata: s.y,
          hovertemplate: HOVER.growth
        });
      });
      var layout = baseLayout(el, "Chain-linked growth (%, log scale)", traces.length);
      layout.yaxis.type = "log";
      var ticks = growthTicks(traces);
      layout.yaxis.tickvals = ticks["yaxis.tickvals"];
      layout.yaxis.ticktext = ticks["yaxis.ticktext"];
      addEvents(layout, data.annotations, el);
      return { traces: traces, layout: layout, points: countPoints(traces),
               labels: (data.series || []).map(function (e) { return e.label; }) };
    },
    // Market prices: {lines: [{label, x, y}], annotations}; a price holds until the next one
    lines: function (data, el) {
      var traces = (data.lines || []).map(function (l) {
        var few = (l.x || []).length <= 40;
        return line(l, l.x, l.y, { mode: few ? "lines+markers" : "lines", line: { shape: "hv", width: 2 },
                                   hovertemplate: HOVER.price });
      });
      // Always a legend here, even for one line: it names the outcome the line prices.
      var layout = baseLayout(el, el.dataset.yTitle || "", Math.max(traces.length, 2));
      layout.showlegend = traces.length > 0;
      layout.yaxis.range = [0, 1.02];
      var xs = [];
      traces.forEach(function (t) { xs = xs.concat(t.x || []); });
      xs.sort();
      if (xs.length && xs[0] === xs[xs.length - 1]) {
        // One instant only: a day either side instead of an axis of milliseconds.
        var t0 = new Date(xs[0].replace(" ", "T") + "Z").getTime();
        layout.xaxis.range = [new Date(t0 - 864e5).toISOString(), new Date(t0 + 864e5).toISOString()];
      }
      addEvents(layout, data.annotations, el);
      return { traces: traces, layout: layout, points: countPoints(traces) };
    },
    // Reliability diagram: {points: [{x: mean forecast, y: observed frequency, n}]}
    reliability: function (data) {
      var pts = data.points || [];
      var maxN = Math.max.apply(null, pts.map(function (p) { return p.n; }).concat([1]));
      var traces = [
        { type: "scatter", mode: "lines", name: "Perfect calibration", x: [0, 1], y: [0, 1],
          line: { dash: "dot", color: "#888" }, hoverinfo: "skip" },
        { type: "scatter", mode: "markers+text", name: "Bins",
          x: pts.map(function (p) { return p.x; }), y: pts.map(function (p) { return p.y; }),
          text: pts.map(function (p) { return "n=" + p.n; }), textposition: "top center",
          marker: { size: pts.map(function (p) { return 8 + 22 * Math.sqrt(p.n / maxN); }),
                    color: data.color || "#2563eb" },
          hovertemplate: "mean forecast %{x:.3f}<br>observed %{y:.3f}<br>%{text}<extra></extra>" }
      ];
      var layout = {
        margin: { l: 60, r: 20, t: 10, b: 50 }, showlegend: false,
        xaxis: { range: [-0.05, 1.05], title: { text: "Mean stated probability" } },
        yaxis: { range: [-0.05, 1.1], title: { text: "Observed frequency" }, scaleanchor: "x" }
      };
      return { traces: traces, layout: layout, points: pts.length };
    }
  };

  function draw(el, data) {
    var build = BUILDERS[el.dataset.chartKind];
    if (!build || !window.Plotly) { return; }
    var fig = build(data, el);
    el.dataset.points = String(fig.points);
    el.dataset.annotations = String((data.annotations || []).length);
    if (data.range) { el.dataset.range = data.range; }
    var empty = el.querySelector(".empty");
    if (fig.points === 0) {
      window.Plotly.purge(el);
      if (!empty) {
        empty = document.createElement("p");
        empty.className = "empty";
        el.appendChild(empty);
      }
      empty.textContent = "No values in this range.";
      el.dataset.drawn = String(Number(el.dataset.drawn || "0") + 1);
      return;
    }
    if (empty) { empty.remove(); }
    var events = (fig.layout.annotations || []).slice();  // a reliability diagram has none
    if (fig.labels) {
      el._arenaRawLabels = fig.labels;
      el._arenaRight = fig.layout.margin.r;  // before the labels widen it
      placeLabels(el, fig.traces, fig.layout, events, fig.labels);
    }
    return window.Plotly.react(el, fig.traces, fig.layout, CONFIG).then(function () {
      watchHighlight(el);
      if (el.dataset.chartKind === "overview") {
        fillEnds(el, data);
        noteHidden(el);
      }
      if ((fig.labels || el.dataset.chartKind === "overview") && !el.dataset.hiddenWatch) {
        el.dataset.hiddenWatch = "1";
        el.on("plotly_restyle", function () {
          var update = {};
          if (el.dataset.chartKind === "overview") {
            noteHidden(el);
            // The axis autoranges over the lines shown; its ticks follow them.
            update = growthTicks(el.data);
          }
          if (el._arenaRawLabels) {
            // A hidden line loses its label, and the others are placed again among the lines
            // still shown (the first annotations are the chart's events, kept as they were).
            var layout = { height: el.layout.height,
                           margin: { t: el.layout.margin.t, b: el.layout.margin.b, r: el._arenaRight },
                           yaxis: { type: el.layout.yaxis.type }, annotations: [] };
            var keep = (el.layout.annotations || []).filter(function (a, i) {
              return (el._arenaLabelTrace || {})[i] === undefined;
            });
            placeLabels(el, el.data, layout, keep, el._arenaRawLabels);
            update.annotations = layout.annotations;
            update["margin.r"] = layout.margin.r;
          }
          window.Plotly.relayout(el, update);
        });
      }
      el.dataset.drawn = String(Number(el.dataset.drawn || "0") + 1);
      // When the page's first chart is on screen (bench/browser.py reads it).
      if (window.performance && performance.mark &&
          !performance.getEntriesByName("arena:first-chart").length) {
        performance.mark("arena:first-chart");
      }
    });
  }

  function initCharts(root) {
    var nodes = (root || document).querySelectorAll("[data-chart-kind][data-chart-data]");
    if (!nodes.length) { return; }
    if (!window.Plotly) {
      withPlotly().then(function () { initCharts(root); }, function () {
        nodes.forEach(function (el) { el.textContent = "The chart library could not be loaded."; });
      });
      return;
    }
    nodes.forEach(function (el) {
      var source = document.getElementById(el.dataset.chartData);
      if (!source) { return; }
      try {
        draw(el, JSON.parse(source.textContent));
      } catch (err) {
        el.textContent = "Chart data could not be read.";
      }
    });
  }

  function updateCaption(figure, data) {
    if (!figure) { return; }
    var range = figure.querySelector('[data-caption="range"]');
    var step = figure.querySelector('[data-caption="step"]');
    if (range) { range.textContent = data.range; }
    if (step && data.step_seconds) { step.textContent = String(Math.round(data.step_seconds / 60)); }
  }

  function onRangeClick(event) {
    var btn = event.target.closest(".range-btn");
    if (!btn) { return; }
    var el = document.getElementById(btn.dataset.target);
    if (!el || !el.dataset.seriesUrl) { return; }  // no JS target: follow the link
    event.preventDefault();
    var url = el.dataset.seriesUrl;
    url += (url.indexOf("?") === -1 ? "?" : "&") + "range=" + encodeURIComponent(btn.dataset.range);
    el.setAttribute("aria-busy", "true");
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (res) {
        if (!res.ok) { throw new Error("HTTP " + res.status); }
        return res.json();
      })
      .then(function (data) {
        var nav = btn.closest(".ranges");
        nav.querySelectorAll(".range-btn").forEach(function (b) { b.removeAttribute("aria-current"); });
        btn.setAttribute("aria-current", "true");
        updateCaption(btn.closest("figure"), data);
        return withPlotly().then(function () { return draw(el, data); });
      })
      .catch(function () { window.location.href = btn.href; })  // fall back to a page load
      .finally(function () { el.removeAttribute("aria-busy"); });
  }

  document.addEventListener("DOMContentLoaded", function () { initCharts(document); });
  document.addEventListener("click", onRangeClick);
  document.addEventListener("htmx:afterSettle", function (event) { initCharts(event.target); });
})();
