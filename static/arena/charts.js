/* Draws the site's charts with Plotly from data in <script type="application/json"> tags
 * (Django's json_script) and, for range buttons, from the JSON series API.
 * No inline scripts anywhere: this file is loaded with `defer`. */
(function () {
  "use strict";

  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function baseLayout(yTitle, extra) {
    var layout = {
      margin: { l: 60, r: 20, t: 10, b: 40 },
      hovermode: "x unified",
      legend: { orientation: "h", y: -0.2 },
      xaxis: { type: "date", title: { text: "UTC" } },
      yaxis: { title: { text: yTitle }, zeroline: false },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)"
    };
    for (var k in extra || {}) { layout[k] = extra[k]; }
    return layout;
  }

  function line(name, x, y) {
    return { type: "scatter", mode: "lines", name: name, x: x, y: y, connectgaps: false };
  }

  var BUILDERS = {
    // Cohort / entry value series: {x: [...], entries: [{label, y: [...]}]}
    series: function (data) {
      var traces = (data.entries || []).map(function (e) { return line(e.label, data.x, e.y); });
      return { traces: traces, layout: baseLayout("Value (USD)"), points: (data.x || []).length };
    },
    // Home page: {x: [...], series: [{label, y: [...]}]} with y in percent
    overview: function (data) {
      var traces = (data.series || []).map(function (s) { return line(s.label, data.x, s.y); });
      return { traces: traces, layout: baseLayout("Average return (%)"), points: (data.x || []).length };
    },
    // Market prices: {lines: [{label, x, y}]}
    lines: function (data, el) {
      var traces = (data.lines || []).map(function (l) { return line(l.label, l.x, l.y); });
      var layout = baseLayout(el.dataset.yTitle || "", {});
      layout.yaxis.range = [0, 1];
      return { traces: traces, layout: layout, points: traces.length };
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
          marker: { size: pts.map(function (p) { return 8 + 22 * Math.sqrt(p.n / maxN); }) },
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
    if (data.range) { el.dataset.range = data.range; }
    var empty = el.querySelector(".empty");
    if (fig.points === 0) { return; }
    if (empty) { empty.remove(); }
    return window.Plotly.react(el, fig.traces, fig.layout, CONFIG).then(function () {
      el.dataset.drawn = String(Number(el.dataset.drawn || "0") + 1);
    });
  }

  function initCharts(root) {
    var nodes = (root || document).querySelectorAll("[data-chart-kind][data-chart-data]");
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
        return draw(el, data);
      })
      .catch(function () { window.location.href = btn.href; })  // fall back to a page load
      .finally(function () { el.removeAttribute("aria-busy"); });
  }

  document.addEventListener("DOMContentLoaded", function () { initCharts(document); });
  document.addEventListener("click", onRangeClick);
  document.addEventListener("htmx:afterSettle", function (event) { initCharts(event.target); });
})();
