// The site works without this script; with it, tables sort by a click on a heading and the
// comparison form opens the page of the two versions picked.
(function () {
  "use strict";
  function key(cell, numeric) {
    var raw = cell.getAttribute("data-value");
    var text = raw !== null ? raw : cell.textContent.trim();
    if (!numeric) return text.toLowerCase();
    var n = parseFloat(text);
    return isNaN(n) ? null : n;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, index) {
      var kind = th.getAttribute("data-sort");
      if (!kind) return;
      th.tabIndex = 0;
      var sort = function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[index], kind === "num"), y = key(b.cells[index], kind === "num");
          if (x === y) return 0;
          if (x === null) return 1;  // no value: always last
          if (y === null) return -1;
          return (x < y ? -1 : 1) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
    });
  });
  document.querySelectorAll("form.pick").forEach(function (form) {
    var pairs = JSON.parse(form.getAttribute("data-pairs"));
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var c = form.elements.candidate.value, b = form.elements.baseline.value;
      var href = pairs[c + "\n" + b];
      var error = form.querySelector(".pick-error");
      if (href) { window.location.href = href; } else { error.hidden = false; }
    });
  });
})();
