/* nastriage report: draws the charts from the JSON data block with Plotly.
 *
 * Security: the data block is parsed with JSON.parse and only ever handed to Plotly as
 * data; nothing from it is inserted as HTML (no innerHTML, no eval). The page text was
 * escaped when the report was written. The Content-Security-Policy allows only this
 * script and plotly.js (by hash).
 */
(function () {
  "use strict";

  var dataNode = document.getElementById("report-data");
  var report = JSON.parse(dataNode.textContent);
  var figures = report.figures || {};
  var ioSeries = report.io || {};
  var drawn = {};
  // Timings (ms since navigation start), for the tests and docs/report.md.
  var timings = { charts: {} };
  window.nastriageTimings = timings;
  var plotConfig = {
    responsive: true,
    displaylogo: false,
    scrollZoom: false,
    modeBarButtonsToRemove: ["sendDataToCloud", "lasso2d", "select2d"],
    toImageButtonOptions: { format: "png", scale: 2 }
  };

  function setStatus(div, text) {
    var status = div.parentNode.querySelector(".chart-status");
    if (status) {
      status.textContent = text;
    }
  }

  function draw(div) {
    var id = div.getAttribute("data-fig");
    if (!id || drawn[id]) {
      return drawn[id];
    }
    var fig = figures[id];
    if (!fig) {
      return null;
    }
    var layout = fig.layout || {};
    var height = parseInt(div.getAttribute("data-height"), 10);
    if (height > 0) {
      layout.height = height;
    }
    var start = performance.now();
    drawn[id] = Plotly.newPlot(div, fig.data, layout, plotConfig).then(function () {
      timings.charts[id] = Math.round(performance.now() - start);
      div.setAttribute("data-drawn", "1");
      setStatus(div, "");
      return div;
    });
    return drawn[id];
  }

  // Draw charts as they come into view, and the rest when the browser is idle.
  var charts = Array.prototype.slice.call(document.querySelectorAll("div.chart[data-fig]"));
  if ("IntersectionObserver" in window) {
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) {
          observer.unobserve(entry.target);
          draw(entry.target);
        }
      });
    }, { rootMargin: "300px 0px" });
    charts.forEach(function (div) { observer.observe(div); });
  }
  var queue = charts.slice();
  var idle = window.requestIdleCallback || function (fn) { return window.setTimeout(fn, 50); };
  function drawNextWhenIdle() {
    idle(function () {
      var div = queue.shift();
      if (!div) {
        timings.allDrawn = Math.round(performance.now());
        document.body.setAttribute("data-charts-drawn", "all");
        return;
      }
      var p = draw(div);
      if (p && p.then) {
        p.then(drawNextWhenIdle, drawNextWhenIdle);
      } else {
        drawNextWhenIdle();
      }
    });
  }
  drawNextWhenIdle();

  // x values of a series sent as start and step (not reduced: one value per interval).
  function evenly(x0, dx, n) {
    var xs = new Array(n);
    for (var i = 0; i < n; i++) {
      xs[i] = Math.round((x0 + i * dx) * 1e6) / 1e6;
    }
    return xs;
  }

  // I/O graph interval selectors.
  Array.prototype.forEach.call(document.querySelectorAll("select.io-interval"), function (sel) {
    sel.addEventListener("change", function () {
      var figId = sel.getAttribute("data-fig");
      var stream = sel.getAttribute("data-stream");
      var series = ioSeries[stream] && ioSeries[stream].series[sel.value];
      var div = document.getElementById("chart-" + figId);
      if (!series || !div) {
        return;
      }
      var note = document.getElementById("note-" + figId);
      Promise.resolve(draw(div)).then(function () {
        var update = { x: [], y: [] };
        var traces = [];
        (div.data || []).forEach(function (trace, i) {
          var dir = trace.meta && trace.meta.dir;
          var s = dir && series[dir];
          if (s) {
            update.x.push(s.x || evenly(s.x0, s.dx, s.y.length));
            update.y.push(s.y);
            traces.push(i);
          }
        });
        if (traces.length) {
          Plotly.restyle(div, update, traces);
        }
        if (note) {
          note.textContent = series.note || "";
        }
      });
    });
  });

  // The y range covering the points of the visible traces between x0 and x1 (so that a
  // zoom on time also fits the values), or null.
  function yRangeWithin(div, x0, x1) {
    var lo = Infinity;
    var hi = -Infinity;
    (div.data || []).forEach(function (trace) {
      if (trace.visible === false || trace.visible === "legendonly" || trace.type === "bar") {
        return;
      }
      var xs = trace.x || [];
      var ys = trace.y || [];
      if (trace.type === "heatmap") {
        return;
      }
      for (var i = 0; i < xs.length; i++) {
        var x = xs[i];
        var y = ys[i];
        if (x === null || y === null || x < x0 || x > x1 || typeof y !== "number") {
          continue;
        }
        if (y < lo) { lo = y; }
        if (y > hi) { hi = y; }
      }
    });
    if (!isFinite(lo) || !isFinite(hi)) {
      return null;
    }
    var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }

  // "Show in chart" links from the findings: draw the chart, then zoom to the time range.
  function showRange(link) {
    var figId = link.getAttribute("data-fig");
    var div = document.getElementById("chart-" + figId);
    if (!div) {
      return;
    }
    var x0 = parseFloat(link.getAttribute("data-x0"));
    var x1 = parseFloat(link.getAttribute("data-x1"));
    Promise.resolve(draw(div)).then(function () {
      if (isFinite(x0) && isFinite(x1)) {
        var pad = Math.max((x1 - x0) * 0.1, 0.0005);
        var update = { "xaxis.range": [x0 - pad, x1 + pad] };
        var yaxis = div.layout && div.layout.yaxis;
        if (div.getAttribute("data-fity") === "1" && !(yaxis && yaxis.type === "log")) {
          var yr = yRangeWithin(div, x0 - pad, x1 + pad);
          if (yr) {
            update["yaxis.range"] = yr;
          }
        }
        Plotly.relayout(div, update);
      }
      var box = div.closest(".figure");
      if (box) {
        box.classList.add("flash");
        window.setTimeout(function () { box.classList.remove("flash"); }, 1600);
      }
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("a.show-range"), function (link) {
    link.addEventListener("click", function () { showRange(link); });
  });

  // "Reset zoom" buttons.
  Array.prototype.forEach.call(document.querySelectorAll("button.reset-zoom"), function (btn) {
    btn.addEventListener("click", function () {
      var div = document.getElementById("chart-" + btn.getAttribute("data-fig"));
      if (div && div.getAttribute("data-drawn")) {
        Plotly.relayout(div, { "xaxis.autorange": true, "yaxis.autorange": true });
      }
    });
  });

  // Sortable tables: click a header; numbers sort by their data-v value.
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var headers = table.querySelectorAll("thead th");
    Array.prototype.forEach.call(headers, function (th, col) {
      var button = th.querySelector("button");
      if (!button) {
        return;
      }
      button.addEventListener("click", function () {
        var numeric = th.getAttribute("data-type") === "num";
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var ca = a.cells[col];
          var cb = b.cells[col];
          var va = ca.getAttribute("data-v");
          var vb = cb.getAttribute("data-v");
          var r;
          if (numeric) {
            var na = va === null || va === "" ? -Infinity : parseFloat(va);
            var nb = vb === null || vb === "" ? -Infinity : parseFloat(vb);
            r = na < nb ? -1 : na > nb ? 1 : 0;
          } else {
            r = (va !== null ? va : ca.textContent).localeCompare(vb !== null ? vb : cb.textContent);
          }
          return asc ? r : -r;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });

  // Copy buttons for Wireshark filters.
  Array.prototype.forEach.call(document.querySelectorAll("button.copy"), function (btn) {
    btn.addEventListener("click", function () {
      var code = document.getElementById(btn.getAttribute("data-target"));
      if (!code) {
        return;
      }
      var text = code.textContent;
      var done = function () { btn.textContent = "copied"; };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(code); });
      } else {
        selectText(code);
      }
    });
  });
  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  timings.ready = Math.round(performance.now());
  document.body.setAttribute("data-ready", "1");
})();
