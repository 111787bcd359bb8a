// The case page's chart (uPlot): the rank of each relevant id (rank 1 at the top, "out" below
// the last rank) and the top score on its own axis. Data comes from a JSON script element.
(function () {
  "use strict";
  var palette = ["#0a4fb4", "#a3001b", "#1d5c25", "#7a4a00", "#6a1b9a", "#00695c", "#37474f", "#ad1457"];
  window.ragcanaryCharts = [];
  document.querySelectorAll("[data-chart]").forEach(function (box) {
    var source = document.getElementById(box.getAttribute("data-chart"));
    if (!source || typeof uPlot === "undefined") return;
    var data = JSON.parse(source.textContent);
    var depth = data.depth;
    var series = [{}];
    var columns = [data.times];
    Object.keys(data.ranks).forEach(function (doc, i) {
      series.push({ label: "rank of " + doc, scale: "rank", stroke: palette[i % palette.length], width: 2,
                    value: function (u, v) { return v == null ? "—" : (v > depth ? "out" : "#" + v); } });
      columns.push(data.ranks[doc]);
    });
    series.push({ label: "top score", scale: "score", stroke: "#4d4d4d", width: 1.5, dash: [6, 4],
                  value: function (u, v) { return v == null ? "—" : v.toFixed(3); } });
    columns.push(data.top_score);
    function size() { return { width: Math.max(box.clientWidth, 280), height: box.clientWidth < 500 ? 240 : 300 }; }
    var dims = size();
    var chart = new uPlot({
      width: dims.width, height: dims.height,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      scales: { x: { time: true }, rank: { dir: -1, range: [0.5, depth + 1.5] }, score: { auto: true } },
      series: series,
      axes: [
        { stroke: "#1a1a1a" },
        { scale: "rank", stroke: "#1a1a1a", label: "rank",
          splits: function () { var s = []; for (var r = 1; r <= depth + 1; r += Math.max(1, Math.ceil(depth / 6))) s.push(r); if (s[s.length - 1] !== depth + 1) s.push(depth + 1); return s; },
          values: function (u, splits) { return splits.map(function (v) { return v > depth ? "out" : String(v); }); } },
        { scale: "score", side: 1, stroke: "#4d4d4d", label: "top score", grid: { show: false } }
      ]
    }, columns, box);
    window.ragcanaryCharts.push(chart);
    if (window.ResizeObserver) {
      new ResizeObserver(function () { var d = size(); chart.setSize(d); }).observe(box);
    }
  });
})();
