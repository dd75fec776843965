// passviz report: draws each diff from the stored texts when it comes into view (see report_diffs.py).
(function () {
  "use strict";
  var store = document.getElementById("passviz-texts");
  if (!store || typeof DecompressionStream === "undefined") {
    document.querySelectorAll(".diffbody, pre.lazy").forEach(function (el) {
      el.textContent = "This browser cannot decompress the stored texts (it needs DecompressionStream).";
    });
    return;
  }
  var bytes = Uint8Array.from(atob(store.textContent.trim()), function (c) { return c.charCodeAt(0); });
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then(function (json) { start(JSON.parse(json)); });

  function start(data) {
    var cache = {};
    function text(n) {
      if (!cache[n]) {
        var runs = data.texts[n], out = [];
        for (var k = 0; k < runs.length; k += 2)
          for (var i = 0; i < runs[k + 1]; i++) out.push(data.lines[runs[k] + i]);
        cache[n] = out;
      }
      return cache[n];
    }
    var wide = window.matchMedia("(min-width: 1000px)");
    function el(tag, cls, content) {
      var e = document.createElement(tag);
      if (cls) e.className = cls;
      if (content !== undefined) e.textContent = content;
      return e;
    }
    function tokens(line) { return line.match(/\w+|\s+|[^\w\s]/g) || []; }
    // Word-level changes of a line pair: marks on tokens not in their longest common subsequence.
    function words(a, b) {
      var x = tokens(a), y = tokens(b), n = x.length, m = y.length;
      if (n * m > 60000) return null;
      var t = [], i, j;
      for (i = 0; i <= n; i++) t.push(new Uint16Array(m + 1));
      for (i = n - 1; i >= 0; i--)
        for (j = m - 1; j >= 0; j--)
          t[i][j] = x[i] === y[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
      var ka = [], kb = [];
      i = 0; j = 0;
      while (i < n || j < m) {
        if (i < n && j < m && x[i] === y[j]) { ka.push([x[i], 0]); kb.push([y[j], 0]); i++; j++; }
        else if (j < m && (i >= n || t[i][j + 1] >= t[i + 1][j])) { kb.push([y[j], 1]); j++; }
        else { ka.push([x[i], 1]); i++; }
      }
      return [ka, kb];
    }
    function fill(cell, line, marks) {
      if (!marks) { cell.textContent = line; return; }
      var plain = "";
      marks.forEach(function (tk) {
        if (!tk[1] || !tk[0].trim()) { plain += tk[0]; return; }
        if (plain) { cell.appendChild(document.createTextNode(plain)); plain = ""; }
        cell.appendChild(el("span", "w", tk[0]));
      });
      if (plain) cell.appendChild(document.createTextNode(plain));
    }
    function row(table, cells) {
      var tr = table.insertRow();
      cells.forEach(function (c) { tr.appendChild(c); });
      return tr;
    }
    // Hunks: the changed blocks with CONTEXT lines around them, merged where they touch.
    function hunks(blocks, oldLen) {
      var out = [], C = CONTEXT_LINES;
      blocks.forEach(function (b) {
        var last = out[out.length - 1];
        if (last && b[0] - C <= last.i2 + C) { last.blocks.push(b); last.i2 = b[1]; last.j2 = b[3]; }
        else out.push({ blocks: [b], i2: b[1], j2: b[3] });
      });
      return out;
    }
    function render(details) {
      var body = details.querySelector(".diffbody");
      var a = text(+details.dataset.a), b = text(+details.dataset.b);
      var blocks = (details.dataset.ops || "").split(";").filter(Boolean).map(function (s) {
        return s.split(",").map(Number);
      });
      var side = wide.matches, table = el("table"), C = CONTEXT_LINES;
      if (side) {
        var cols = el("colgroup");
        ["n", "t", "n", "t"].forEach(function (c) { var col = el("col"); if (c === "n") col.style.width = "5ch"; cols.appendChild(col); });
        table.appendChild(cols);
      }
      function same(i, j) {
        if (side) row(table, [el("td", "n", i + 1), lines(el("td", "t", a[i]), i + 1, null), el("td", "n", j + 1), lines(el("td", "t", a[i]), null, j + 1)]);
        else row(table, [el("td", "n", i + 1), el("td", "s", " "), lines(el("td", "t", a[i]), i + 1, j + 1)]);
      }
      hunks(blocks, a.length).forEach(function (h) {
        var first = h.blocks[0], i = Math.max(0, first[0] - C), j = first[2] - (first[0] - i);
        var head = "@@ -" + (i + 1) + " +" + (j + 1) + " @@";
        var hr = row(table, [el("td", "", head)]);
        hr.className = "hunk"; hr.firstChild.colSpan = side ? 4 : 3;
        h.blocks.forEach(function (blk) {
          for (; i < blk[0]; i++, j++) same(i, j);
          var dels = blk[1] - blk[0], ins = blk[3] - blk[2], k, marks;
          if (side) {
            for (k = 0; k < Math.max(dels, ins); k++) {
              var o = k < dels ? a[blk[0] + k] : null, nw = k < ins ? b[blk[2] + k] : null;
              marks = o !== null && nw !== null && o.trim() !== nw.trim() ? words(o, nw) : null;
              var re = o !== null && nw !== null && o.trim() === nw.trim();
              var lc = el("td", "t " + (o === null ? "gap" : re ? "re" : "del")), rc = el("td", "t " + (nw === null ? "gap" : re ? "re" : "ins"));
              if (o !== null) { fill(lc, o, marks && marks[0]); lines(lc, blk[0] + k + 1, null); }
              if (nw !== null) { fill(rc, nw, marks && marks[1]); lines(rc, null, blk[2] + k + 1); }
              row(table, [el("td", "n", o === null ? "" : blk[0] + k + 1), lc, el("td", "n", nw === null ? "" : blk[2] + k + 1), rc]);
            }
          } else {
            var pairs = [];
            for (k = 0; k < Math.min(dels, ins); k++) {
              var oo = a[blk[0] + k], nn = b[blk[2] + k];
              pairs.push(oo.trim() === nn.trim() ? null : words(oo, nn));
            }
            for (k = 0; k < dels; k++) {
              var c = lines(el("td", "t"), blk[0] + k + 1, null); fill(c, a[blk[0] + k], pairs[k] && pairs[k][0]);
              row(table, [el("td", "n", blk[0] + k + 1), el("td", "s", "-"), c]).className = "del";
            }
            for (k = 0; k < ins; k++) {
              var d = lines(el("td", "t"), null, blk[2] + k + 1); fill(d, b[blk[2] + k], pairs[k] && pairs[k][1]);
              row(table, [el("td", "n", blk[2] + k + 1), el("td", "s", "+"), d]).className = "ins";
            }
          }
          i = blk[1]; j = blk[3];
        });
        for (var stop = Math.min(a.length, i + C); i < stop; i++, j++) same(i, j);
      });
      body.textContent = "";
      if (!blocks.length) body.textContent = "(only normalized-away changes)";
      else body.appendChild(table);
      details.dataset.drawn = side ? "side" : "unified";
      markDiff(details);
    }
    // A code cell's line numbers in the old (o) and new (n) text, for the Python-line marks.
    function lines(cell, o, n) {
      if (o !== null) cell.dataset.o = o;
      if (n !== null) cell.dataset.n = n;
      return cell;
    }
    // Python lines (source maps, report_source.py): a click on a kernel line lists the IR lines it
    // became after every pass and marks them in the run's diffs. Only numbers come from the maps.
    var pymaps = {}, chosen = {};
    document.querySelectorAll("script.pymap").forEach(function (s) {
      try { pymaps[s.dataset.run] = JSON.parse(s.textContent); } catch (err) { /* no marks for it */ }
    });
    function hits(run, number) {
      var map = pymaps[run] && pymaps[run].maps[+number], line = chosen[run];
      var found = number !== "" && number !== undefined && map && line !== undefined ? map[line] : null;
      return new Set(found || []);
    }
    function markDiff(details) {
      var run = details.dataset.run;
      if (!run || chosen[run] === undefined) return;
      var old = hits(run, details.dataset.pya), neu = hits(run, details.dataset.pyb);
      details.querySelectorAll("td[data-o], td[data-n]").forEach(function (td) {
        var hit = (td.dataset.o && old.has(+td.dataset.o)) || (td.dataset.n && neu.has(+td.dataset.n));
        td.classList.toggle("pyhit", !!hit);
      });
    }
    function showThrough(box, run) {
      var panel = box.querySelector(".pythrough"), line = chosen[run];
      var entries = (pymaps[run] && pymaps[run].through[line]) || [];
      panel.textContent = "";
      var sass = pymaps[run] && pymaps[run].sass;
      if (sass) {
        var counts = sass.lines[line], words = "SASS instructions: none located on this line";
        if (counts) {
          words = "SASS instructions: " + sass.classes.map(function (name, i) { return counts[i] + " " + name; })
            .join(", ") + " (" + counts[counts.length - 1] + " in all)";
        }
        panel.appendChild(el("p", "pysass", words));
      }
      var notRun = pymaps[run] && (pymaps[run].not_run || {})[line];
      if (notRun) { panel.appendChild(el("p", "pyvalue", notRun.charAt(0).toUpperCase() + notRun.slice(1) + ".")); return; }
      var value = pymaps[run] && (pymaps[run].values || {})[line];
      if (value) panel.appendChild(el("p", "pyvalue", "Line " + line + " made no statement of its own: " + value + "; its IR lines stand for it."));
      panel.appendChild(el("p", "", "Line " + line + " after each pass (" + entries.length + " runs of passes):"));
      entries.forEach(function (entry) {
        var part = el("div", "pyentry"), head = el("h4");
        part.dataset.first = entry[0]; part.dataset.last = entry[1];
        var name = entry[2] + (entry[1] !== entry[0] ? " … " + entry[3] : "");
        if (entry[4]) { var link = el("a", "", name); link.href = "#" + entry[4]; head.appendChild(link); }
        else head.textContent = name;
        part.appendChild(head);
        var pre = el("pre"), shown = text(entry[5]), irs = (pymaps[run].maps[entry[6]] || {})[line] || [];
        var carried = new Set(((pymaps[run].carried || [])[entry[6]] || {})[line] || []);
        irs.forEach(function (n) {
          var span = el("span", carried.has(n) ? "pyhit carried" : "pyhit", String(n).padStart(5) + "  " + (shown[n - 1] === undefined ? "" : shown[n - 1]));
          span.dataset.ir = n;
          pre.appendChild(span);
        });
        part.appendChild(pre);
        panel.appendChild(part);
      });
    }
    document.addEventListener("click", function (e) {
      var line = e.target.closest ? e.target.closest(".pysrc [data-py]") : null;
      if (!line) return;
      var box = line.closest(".pysrc"), run = box.dataset.run;
      chosen[run] = +line.dataset.py;
      box.querySelectorAll("[data-py].chosen").forEach(function (x) { x.classList.remove("chosen"); });
      line.classList.add("chosen");
      showThrough(box, run);
      document.querySelectorAll("details.diff[data-drawn]").forEach(function (d) {
        if (d.dataset.run === run) markDiff(d);
      });
    });
    function draw(details) {
      if (details.open && details.dataset.drawn !== (wide.matches ? "side" : "unified")) render(details);
    }
    function drawText(pre) {
      if (!pre.dataset.drawn) { pre.textContent = text(+pre.dataset.t).join("\n"); pre.dataset.drawn = "1"; }
    }
    var seen = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (!e.isIntersecting) return;
        if (e.target.tagName === "PRE") drawText(e.target); else draw(e.target);
      });
    }, { rootMargin: "800px 0px" });
    document.querySelectorAll("details.diff").forEach(function (d) {
      seen.observe(d);
      d.addEventListener("toggle", function () { draw(d); });
    });
    document.querySelectorAll("pre.lazy").forEach(function (p) { seen.observe(p); });
    // Fragments of HTML the report escaped when it wrote them, kept compressed until near the window.
    var near = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (!e.isIntersecting) return;
        near.unobserve(e.target);
        e.target.innerHTML = data.html[+e.target.dataset.h];
        e.target.querySelectorAll(".lazyhtml").forEach(function (inner) { near.observe(inner); });
        e.target.querySelectorAll("pre.lazy").forEach(function (inner) { seen.observe(inner); });
      });
    }, { rootMargin: "800px 0px" });
    document.querySelectorAll(".lazyhtml").forEach(function (d) { near.observe(d); });
    wide.addEventListener("change", function () {
      document.querySelectorAll("details.diff[data-drawn]").forEach(function (d) {
        var r = d.getBoundingClientRect();
        if (r.bottom > -2000 && r.top < window.innerHeight + 2000) draw(d); else delete d.dataset.drawn;
      });
    });
    // Opening a link to a diff (from a drawing or the pass list) opens the diff.
    function follow() {
      var target = location.hash && document.getElementById(location.hash.slice(1));
      if (target && target.tagName === "DETAILS") { target.open = true; draw(target); }
    }
    window.addEventListener("hashchange", follow);
    follow();
    document.body.dataset.ready = "1";
  }
})();
