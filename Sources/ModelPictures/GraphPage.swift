/// The `--graph OUT.html` page: one file with the SVG inline, a few lines of
/// CSS and script for pan (drag), zoom (wheel, buttons) and search (names,
/// kinds, parameters, tooltips; `#search=TEXT` in the URL searches on
/// load), and no reference to anything outside it.
enum GraphPage {
    static func html(svg: String, title: String) -> String {
        """
        \(XMLText.pageHead(title: title))
        <style>
        html, body { margin: 0; height: 100%; font: 14px Helvetica, Arial, sans-serif; color: #1d2433; }
        body { display: flex; flex-direction: column; }
        header { display: flex; gap: 10px; align-items: center; padding: 8px 12px; border-bottom: 1px solid #d5dae1; background: #f8f9fb; }
        header h1 { font-size: 15px; margin: 0 12px 0 0; font-weight: 600; }
        header input { width: 300px; padding: 4px 8px; border: 1px solid #b8c0cc; border-radius: 4px; font-size: 14px; }
        header button { padding: 3px 10px; border: 1px solid #b8c0cc; border-radius: 4px; background: white; cursor: pointer; }
        #matches { color: #5b6577; min-width: 90px; }
        #view { flex: 1; overflow: hidden; cursor: grab; background: white; }
        #view.dragging { cursor: grabbing; }
        #view > svg { width: 100%; height: 100%; display: block; }
        g.node.hit polygon, g.node.hit path, g.node.hit rect { stroke: #d6336c; stroke-width: 3px; }
        g.node.dim, g.edge.dim { opacity: 0.25; }
        </style>
        </head>
        <body>
        <header>
        <h1>\(XMLText.escaped(title))</h1>
        <input id="search" type="search" placeholder="Search names, kinds, weights (/)" autocomplete="off">
        <span id="matches"></span>
        <button id="zoom-in" type="button" title="Zoom in">+</button>
        <button id="zoom-out" type="button" title="Zoom out">&#8722;</button>
        <button id="fit" type="button" title="Show the whole graph">Fit</button>
        </header>
        <div id="view">
        \(svg)
        </div>
        <script>
        \(script)
        </script>
        </body>
        </html>

        """
    }

    static let script = """
        (function () {
          "use strict";
          var view = document.getElementById("view");
          var svg = view.querySelector("svg");
          if (!svg) { return; }
          var base = svg.viewBox.baseVal;
          var full = { x: base.x, y: base.y, w: base.width, h: base.height };
          svg.removeAttribute("width");
          svg.removeAttribute("height");
          function box() { var b = svg.viewBox.baseVal; return { x: b.x, y: b.y, w: b.width, h: b.height }; }
          var moved = false;
          function set(x, y, w, h) { svg.setAttribute("viewBox", x + " " + y + " " + w + " " + h); }
          function move(x, y, w, h) { moved = true; set(x, y, w, h); }
          function scale() { var r = view.getBoundingClientRect(), b = box(); return Math.max(b.w / r.width, b.h / r.height); }
          function toGraph(clientX, clientY) {
            var p = svg.createSVGPoint(); p.x = clientX; p.y = clientY;
            return p.matrixTransform(svg.getScreenCTM().inverse());
          }
          function start() {
            var r = view.getBoundingClientRect();
            if (r.width === 0 || r.height === 0) { return; }
            var k = Math.min(r.width / full.w, 1.5);
            var w = r.width / k, h = r.height / k;
            set(full.x - (w - full.w) / 2, full.h * k <= r.height ? full.y - (h - full.h) / 2 : full.y, w, h);
          }
          function fit() { move(full.x, full.y, full.w, full.h); }
          function zoom(factor, clientX, clientY) {
            var b = box(), p = toGraph(clientX, clientY);
            move(p.x - (p.x - b.x) * factor, p.y - (p.y - b.y) * factor, b.w * factor, b.h * factor);
          }
          function center() { var r = view.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }
          view.addEventListener("wheel", function (event) {
            event.preventDefault();
            zoom(event.deltaY > 0 ? 1.15 : 1 / 1.15, event.clientX, event.clientY);
          }, { passive: false });
          var drag = null;
          view.addEventListener("mousedown", function (event) {
            drag = { x: event.clientX, y: event.clientY, b: box(), s: scale() };
            view.classList.add("dragging");
          });
          window.addEventListener("mousemove", function (event) {
            if (!drag) { return; }
            move(drag.b.x - (event.clientX - drag.x) * drag.s, drag.b.y - (event.clientY - drag.y) * drag.s, drag.b.w, drag.b.h);
          });
          window.addEventListener("mouseup", function () { drag = null; view.classList.remove("dragging"); });
          document.getElementById("zoom-in").addEventListener("click", function () { var c = center(); zoom(1 / 1.3, c[0], c[1]); });
          document.getElementById("zoom-out").addEventListener("click", function () { var c = center(); zoom(1.3, c[0], c[1]); });
          document.getElementById("fit").addEventListener("click", fit);

          var nodes = Array.prototype.slice.call(svg.querySelectorAll("g.node"));
          var edges = Array.prototype.slice.call(svg.querySelectorAll("g.edge"));
          var texts = nodes.map(function (node) {
            var words = [node.textContent];
            node.querySelectorAll("a").forEach(function (a) { words.push(a.getAttribute("xlink:title") || a.getAttribute("title") || ""); });
            return words.join(" ").toLowerCase();
          });
          var search = document.getElementById("search"), matches = document.getElementById("matches");
          var hits = [], current = -1;
          function show(node) {
            var r = node.getBoundingClientRect(), b = box();
            var p = toGraph(r.left + r.width / 2, r.top + r.height / 2);
            move(p.x - b.w / 2, p.y - b.h / 2, b.w, b.h);
          }
          search.addEventListener("input", function () {
            var query = search.value.trim().toLowerCase();
            hits = []; current = -1;
            nodes.forEach(function (node, index) {
              var hit = query !== "" && texts[index].indexOf(query) >= 0;
              node.classList.toggle("hit", hit);
              node.classList.toggle("dim", query !== "" && !hit);
              if (hit) { hits.push(node); }
            });
            edges.forEach(function (edge) { edge.classList.toggle("dim", query !== ""); });
            matches.textContent = query === "" ? "" : hits.length + (hits.length === 1 ? " match" : " matches");
            if (hits.length > 0) { current = 0; show(hits[0]); }
          });
          search.addEventListener("keydown", function (event) {
            if (event.key === "Enter" && hits.length > 0) {
              current = (current + 1) % hits.length;
              show(hits[current]);
              matches.textContent = (current + 1) + " of " + hits.length;
            }
          });
          document.addEventListener("keydown", function (event) {
            if (event.key === "/" && document.activeElement !== search) { event.preventDefault(); search.focus(); }
          });
          // A new window size starts over, unless the view was moved.
          window.addEventListener("resize", function () { if (!moved) { start(); } });
          start();
          // A link may ask for a search: page.html#search=conv1
          var asked = /^#search=(.*)$/.exec(window.location.hash);
          if (asked) {
            search.value = decodeURIComponent(asked[1]);
            search.dispatchEvent(new Event("input"));
          }
        })();
        """
}
