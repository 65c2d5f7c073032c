/* decguard_pipeline report pages: data tables filtered, searched, sorted and paged in the
 * browser from the page's JSON blocks. Data only ever reaches the page as textContent (never
 * as markup), so a hostile input stays text. No network: nothing here fetches anything. */
(function () {
  "use strict";

  function make(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function num(value) {
    if (value === null || value === undefined) return "n/a";
    if (typeof value !== "number") return String(value);
    if (Number.isInteger(value) && Math.abs(value) >= 1e4) return value.toLocaleString("en-US");
    return String(parseFloat(value.toPrecision(4)));
  }

  function slug(text) {
    return String(text).toLowerCase().replace(/[^a-z0-9]+/g, "-");
  }

  function cellText(column, value) {
    if (column.vocab) return value === null || value === undefined || value < 0 ? "—" : column.vocab[value];
    if (column.kind === "num" || column.kind === "conf") return num(value);
    return value === null || value === undefined ? "" : String(value);
  }

  function renderCell(column, value) {
    var td = make("td", "k-" + column.kind);
    var text = cellText(column, value);
    if (column.kind === "label" || column.kind === "status") {
      if (text !== "—") {
        var cls = column.kind === "status" ? "chip st-" + slug(text) : "chip label";
        td.appendChild(make("span", cls, text));
      } else td.textContent = text;
    } else if (column.kind === "conf" && typeof value === "number") {
      var bar = make("span", "bar");
      var fill = make("span", "fill");
      fill.style.width = Math.max(0, Math.min(1, value)) * 100 + "%";
      bar.appendChild(fill);
      td.appendChild(bar);
      td.appendChild(make("span", "barnum", text));
    } else {
      td.textContent = text;
      if (column.kind === "text" && text.length > 0) td.title = text.length > 2000 ? text.slice(0, 2000) + "…" : text;
    }
    return td;
  }

  function renderDetail(spec, row, colspan) {
    var tr = make("tr", "detail");
    var td = make("td");
    td.colSpan = colspan;
    var list = make("dl", "detail-list");
    spec.details.forEach(function (d) {
      var value = spec.rows[d.key][row];
      if (value === null || value === undefined || value === "") return;
      if (d.kind === "probs" && value.every(function (p) { return p === null; })) return;
      list.appendChild(make("dt", null, d.title));
      var dd = make("dd");
      if (d.kind === "probs" || d.kind === "topprobs") {
        var labels = spec.labels || [];
        var table = make("div", "probs");
        // topprobs: [label index, p] pairs of the largest, then [-1, the others' sum]
        var pairs = d.kind === "probs" ? value.map(function (p, i) { return [i, p]; }) : value;
        pairs.forEach(function (pair) {
          var i = pair[0], p = pair[1];
          var line = make("div", "prob");
          var total = spec.label_count || labels.length;
          var name = i < 0 ? (total - pairs.length + 1).toLocaleString("en") + " other labels" : labels[i];
          line.appendChild(make("span", "prob-label", name));
          var bar = make("span", "bar wide");
          var fill = make("span", "fill");
          fill.style.width = Math.max(0, Math.min(1, p || 0)) * 100 + "%";
          bar.appendChild(fill);
          line.appendChild(bar);
          line.appendChild(make("span", "barnum", num(p)));
          table.appendChild(line);
        });
        dd.appendChild(table);
      } else if (d.vocab) {
        dd.textContent = value < 0 ? "—" : d.vocab[value];
      } else {
        dd.appendChild(make("pre", null, typeof value === "number" ? num(value) : String(value)));
      }
      list.appendChild(dd);
    });
    td.appendChild(list);
    tr.appendChild(td);
    return tr;
  }

  function DataTable(mount, spec) {
    // a table of many labels names its vocabulary once (``labels``) for every label column
    spec.columns.concat(spec.details).forEach(function (c) { if (c.vocab === "labels") c.vocab = spec.labels; });
    this.mount = mount;
    this.spec = spec;
    this.n = spec.n;
    this.filter = spec.filters.length ? spec.filters[spec.start || 0].mask : 0;
    this.query = "";
    this.page = 0;
    this.pageSize = spec.page_size || 50;
    this.sortKey = null;
    this.sortDir = 1;
    this.open = {};
    this.haystack = null;
    this.build();
    this.apply();
  }

  DataTable.prototype.build = function () {
    var self = this;
    var spec = this.spec;
    var bar = make("div", "controls");
    var group = make("div", "filters");
    group.setAttribute("role", "group");
    this.buttons = spec.filters.map(function (f) {
      var count = 0;
      for (var i = 0; i < self.n; i++) if ((spec.flags[i] & f.mask) === f.mask) count++;
      var button = make("button", "filter", f.label + " ");
      button.type = "button";
      button.dataset.filter = f.label;
      button.appendChild(make("span", "count", num(count)));
      button.addEventListener("click", function () {
        self.filter = f.mask;
        self.page = 0;
        self.apply();
      });
      group.appendChild(button);
      return { button: button, mask: f.mask };
    });
    bar.appendChild(group);
    var search = make("input", "search");
    search.type = "search";
    search.placeholder = spec.search_hint || "search";
    search.setAttribute("aria-label", "search " + (spec.title || "rows"));
    var timer = null;
    search.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        self.query = search.value.trim().toLowerCase();
        self.page = 0;
        self.apply();
      }, 120);
    });
    bar.appendChild(search);
    this.mount.appendChild(bar);

    var wrap = make("div", "tablewrap");
    var table = make("table", "data");
    var head = make("tr");
    spec.columns.forEach(function (column) {
      var th = make("th", "k-" + column.kind, column.title);
      if (column.width) th.style.width = column.width;
      th.addEventListener("click", function () {
        if (self.sortKey === column.key) self.sortDir = -self.sortDir;
        else {
          self.sortKey = column.key;
          self.sortDir = 1;
        }
        self.page = 0;
        self.apply();
      });
      th.title = "sort by " + column.title;
      head.appendChild(th);
    });
    var thead = make("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    this.headCells = head.children;
    this.body = make("tbody");
    table.appendChild(this.body);
    wrap.appendChild(table);
    this.mount.appendChild(wrap);

    var pager = make("div", "pager");
    this.info = make("span", "info");
    var prev = make("button", "page-prev", "‹ previous");
    var next = make("button", "page-next", "next ›");
    prev.type = next.type = "button";
    prev.addEventListener("click", function () { if (self.page > 0) { self.page--; self.render(); } });
    next.addEventListener("click", function () {
      if ((self.page + 1) * self.pageSize < self.visible.length) { self.page++; self.render(); }
    });
    var size = make("select", "page-size");
    size.setAttribute("aria-label", "rows per page");
    [10, 15, 25, 50, 100, 250].filter(function (v) { return v >= 25 || v === self.pageSize; }).forEach(function (v) {
      var option = make("option", null, v + " rows");
      option.value = String(v);
      if (v === self.pageSize) option.selected = true;
      size.appendChild(option);
    });
    size.addEventListener("change", function () {
      self.pageSize = parseInt(size.value, 10);
      self.page = 0;
      self.render();
    });
    pager.appendChild(prev);
    pager.appendChild(this.info);
    pager.appendChild(next);
    pager.appendChild(size);
    this.prev = prev;
    this.next = next;
    this.mount.appendChild(pager);
  };

  DataTable.prototype.searchText = function () {
    if (this.haystack) return this.haystack;
    var spec = this.spec;
    var cols = spec.columns.concat(spec.details).filter(function (c) { return spec.search.indexOf(c.key) >= 0; });
    var out = new Array(this.n);
    for (var i = 0; i < this.n; i++) {
      var parts = [];
      for (var j = 0; j < cols.length; j++) parts.push(cellText(cols[j], spec.rows[cols[j].key][i]));
      out[i] = parts.join("\u0001").toLowerCase();
    }
    this.haystack = out;
    return out;
  };

  DataTable.prototype.apply = function () {
    var spec = this.spec;
    var mask = this.filter;
    var query = this.query;
    var hay = query ? this.searchText() : null;
    var visible = [];
    for (var i = 0; i < this.n; i++) {
      if ((spec.flags[i] & mask) !== mask) continue;
      if (hay && hay[i].indexOf(query) < 0) continue;
      visible.push(i);
    }
    if (this.sortKey !== null) {
      var column = spec.columns.filter(function (c) { return c.key === this.sortKey; }, this)[0];
      var values = spec.rows[this.sortKey];
      var dir = this.sortDir;
      var numeric = column.kind === "num" || column.kind === "conf";
      visible.sort(function (a, b) {
        var x = values[a], y = values[b];
        if (numeric) {
          var xm = typeof x !== "number", ym = typeof y !== "number";
          if (xm || ym) return xm === ym ? a - b : xm ? 1 : -1;
          return (x - y) * dir || a - b;
        }
        var sx = cellText(column, x), sy = cellText(column, y);
        return (sx < sy ? -1 : sx > sy ? 1 : 0) * dir || a - b;
      });
    }
    this.visible = visible;
    this.buttons.forEach(function (b) {
      b.button.classList.toggle("active", b.mask === mask);
      b.button.setAttribute("aria-pressed", b.mask === mask ? "true" : "false");
    });
    for (var h = 0; h < this.headCells.length; h++) {
      var key = spec.columns[h].key;
      this.headCells[h].dataset.sort = key === this.sortKey ? (this.sortDir > 0 ? "asc" : "desc") : "";
    }
    this.render();
  };

  DataTable.prototype.render = function () {
    var self = this;
    var spec = this.spec;
    var start = this.page * this.pageSize;
    var rows = this.visible.slice(start, start + this.pageSize);
    var fragment = document.createDocumentFragment();
    rows.forEach(function (i) {
      var tr = make("tr", "row");
      tr.dataset.row = String(i);
      spec.columns.forEach(function (column) {
        tr.appendChild(renderCell(column, spec.rows[column.key][i]));
      });
      if (spec.details.length) {
        tr.classList.add("expandable");
        tr.addEventListener("click", function () {
          self.open[i] = !self.open[i];
          self.render();
        });
      }
      fragment.appendChild(tr);
      if (self.open[i]) fragment.appendChild(renderDetail(spec, i, spec.columns.length));
    });
    if (!rows.length) {
      var empty = make("tr", "empty");
      var td = make("td", null, spec.empty || "nothing to show");
      td.colSpan = spec.columns.length;
      empty.appendChild(td);
      fragment.appendChild(empty);
    }
    this.body.replaceChildren(fragment);
    var total = this.visible.length;
    this.info.textContent = total
      ? num(start + 1) + "–" + num(start + rows.length) + " of " + num(total)
      : "0 of " + num(this.n);
    this.prev.disabled = this.page === 0;
    this.next.disabled = start + this.pageSize >= total;
    this.mount.dataset.visible = String(total);
  };

  function start() {
    var mounts = document.querySelectorAll("[data-table]");
    for (var m = 0; m < mounts.length; m++) {
      var mount = mounts[m];
      var block = document.getElementById(mount.dataset.table);
      if (!block) continue;
      var spec = JSON.parse(block.textContent);
      mount.table = new DataTable(mount, spec);
    }
    document.body.dataset.ready = "1";
    window.decguardRenderMs = performance.now();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
