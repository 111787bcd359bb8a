// Sorting the case table in place when every matching case is on the page; without JavaScript
// (or across pages) the column headers are links that sort on the server.
(function () {
  "use strict";
  function compare(a, b) {
    if (a === b) return 0;
    if (a === "") return 1; // missing values last, whatever the direction
    if (b === "") return -1;
    var x = Number(a), y = Number(b);
    if (!isNaN(x) && !isNaN(y)) return x - y;
    return a < b ? -1 : 1;
  }
  document.querySelectorAll("table[data-sortable][data-complete='true']").forEach(function (table) {
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    heads.forEach(function (th, column) {
      var link = th.querySelector("a");
      if (!link) return;
      link.addEventListener("click", function (event) {
        event.preventDefault();
        var descending = th.getAttribute("aria-sort") === "ascending";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var a = r1.cells[column].getAttribute("data-v") || "";
          var b = r2.cells[column].getAttribute("data-v") || "";
          var order = compare(a, b);
          if (a === "" || b === "") return order;
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
        heads.forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        if (window.history && window.history.replaceState) {
          var url = new URL(link.href, window.location.href);
          url.searchParams.set("dir", descending ? "desc" : "asc");
          window.history.replaceState(null, "", url.toString());
        }
      });
    });
  });
})();
