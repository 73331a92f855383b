// The explorer page: one attention step's graph (laid out by dagre), a panel for the tensor or op
// clicked, backward one op at a time (← / → and a slider), the attention weights head by head,
// the weights at every recorded training step (a slider, when the run kept snapshots), and an
// overlay of the gradient check. Reads the JSON in #explorer-data; needs no network.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("explorer-data").textContent);
  var STEP = DATA.step, TENSORS = STEP.tensors, OPS = STEP.ops, STEPS = STEP.steps;   // replaced by load()
  var SVG_NS = "http://www.w3.org/2000/svg";
  var FILL = {parameter: "#cfe2ff", input: "#fff3bf", constant: "#eeeeee", intermediate: "#ffffff",
              output: "#c3f0c8", mask: "#e5dbff"};
  var state = {step: 0, selected: null, view: null, check: false, nodes: {}};

  // ------------------------------------------------------------------ arrays
  var decoded = new Map();
  function decode(enc) {           // {dtype: "f4"|"f8"|"u1", b64} -> Float32Array / Float64Array (cached)
    if (!decoded.has(enc)) {
      var text = atob(enc.b64), bytes = new Uint8Array(text.length);
      for (var j = 0; j < text.length; j++) bytes[j] = text.charCodeAt(j);     // a plain loop: megabytes of snapshots
      if (enc.dtype === "u1") {    // a weight in [0, 1] as round(255 w): training_steps.encode_fractions
        var fractions = new Float32Array(bytes.length);
        for (var i = 0; i < bytes.length; i++) fractions[i] = bytes[i] / 255;
        decoded.set(enc, fractions);
      } else decoded.set(enc, enc.dtype === "f8" ? new Float64Array(bytes.buffer) : new Float32Array(bytes.buffer));
    }
    return decoded.get(enc);
  }
  function shapeText(shape) { return "(" + shape.join(", ") + (shape.length === 1 ? "," : "") + ")"; }
  function num(v) {
    if (typeof v === "string") return v;
    if (!isFinite(v)) return String(v);
    var a = Math.abs(v);
    return (a !== 0 && (a < 1e-3 || a >= 1e4)) ? v.toExponential(3) : String(+v.toPrecision(4));
  }
  function stats(values) {
    var min = Infinity, max = -Infinity, sum = 0, sq = 0, finite = 0;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v < min) min = v;
      if (v > max) max = v;
      if (isFinite(v)) { sum += v; sq += v * v; finite++; }
    }
    return {min: min, max: max, mean: finite === values.length ? sum / values.length : NaN, norm: Math.sqrt(sq)};
  }
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    return node;
  }

  // ------------------------------------------------------- gradients by step
  function tensorName(t) {
    if (t.name) return t.name;
    if (t.op !== null) return OPS[t.op].name + "'s output";
    if (t.kind === "constant" && t.shape.reduce(function (a, b) { return a * b; }, 1) === 1)
      return "constant " + num(decode(t.value)[0]);       // e.g. √d_k, which scores are divided by
    return shapeText(t.shape) + " " + t.kind;
  }
  function arrivedCount(t, step) {          // how many gradient parts reached t by the end of `step`
    var n = 0;
    for (var i = 0; i < t.arrivals.length; i++) if (t.arrivals[i] <= step) n++;
    return n;
  }
  function gradientAt(t, step) {            // the gradient t holds after backward step `step`, or null
    var n = arrivedCount(t, step);
    if (n === 0) return null;
    if (n === t.arrivals.length) return decode(t.grad);          // complete: the engine's own array
    var parts = t.parts.slice(0, n).map(decode), total = new Float64Array(parts[0].length);
    parts.forEach(function (p) { for (var i = 0; i < p.length; i++) total[i] += p[i]; });
    return total;
  }
  function gradLine(t, step) {
    if (!t.requires_grad) return {text: "no ∇ (constant)", none: true};
    var n = arrivedCount(t, step);
    if (step === 0) return {text: "∇ backward not started", none: true};
    if (n === 0) return {text: "∇ not yet", none: true};
    var g = gradientAt(t, step), norm = stats(g).norm;
    var sum = n > 1 ? "= " + Array.from({length: n}, function (_, i) { return "g" + (i + 1); }).join(" + ") + " " : "";
    return {text: "∇ " + sum + "‖·‖ " + num(norm), none: false, accumulated: n > 1};
  }

  function gradStatus(t, step) {          // one line for the tooltip: the gradient, or why there is none yet
    if (!t.requires_grad) return "no grad (constant)";
    if (step === 0) return "∇: backward has not started (→ runs its first op)";
    var n = arrivedCount(t, step);
    if (n === 0) return t.arrivals.length ? "∇: has not arrived yet (at backward step " + t.arrivals[0] + ")"
                                          : "∇: backward does not reach it";
    var g = gradientAt(t, step), first = Array.from(g.slice(0, 3)).map(num).join(", ");
    return "‖grad‖ " + num(stats(g).norm) + ", grad [" + first + (g.length > 3 ? ", …" : "") + "]" +
      (n > 1 ? " (" + n + " parts summed)" : "");
  }

  // ------------------------------------------------------------------ layout
  function measure(lines) {
    var width = 0;
    lines.forEach(function (l) { width = Math.max(width, l.length * 6.6); });
    return {width: Math.max(40, width + 16), height: 15 * lines.length + 8};
  }
  function tensorLines(t) { return [tensorName(t), shapeText(t.shape) + " " + t.dtype, "∇ ‖·‖ 0.000e+00 = g1 + g2"]; }

  function layout() {
    var g = new dagre.graphlib.Graph({multigraph: true});   // a tensor can feed one op twice (x * x)
    g.setGraph({rankdir: "TB", nodesep: 18, ranksep: 28, edgesep: 8, marginx: 10, marginy: 10});
    g.setDefaultEdgeLabel(function () { return {}; });
    TENSORS.forEach(function (t) {
      var size = measure(tensorLines(t));
      g.setNode("t" + t.id, {width: size.width, height: size.height});
    });
    OPS.forEach(function (op) {
      g.setNode("o" + op.id, {width: op.name.length * 7 + 30, height: 28});
      op.inputs.forEach(function (input, index) {
        var label = op.inputs.length > 1 ? {label: String(index), width: 8, height: 10} : {};
        g.setEdge("t" + input, "o" + op.id, label, "e" + op.id + "_" + index);
      });
      g.setEdge("o" + op.id, "t" + op.output);
      if (op.mask) {
        var rows = op.mask.may_attend.length, cols = op.mask.may_attend[0].length;
        g.setNode("m" + op.id, {width: Math.max(150, cols * 5 + 12), height: rows * 5 + 52});
        g.setEdge("m" + op.id, "o" + op.id);
      }
    });
    dagre.layout(g);
    return g;
  }

  function drawGraph() {
    var g = layout(), svg = document.getElementById("graph-svg");
    var edges = svgEl("g", {"class": "edges"}), nodes = svgEl("g", {"class": "nodes"});
    var defs = svgEl("defs");
    defs.innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" ' +
      'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#868e96"/></marker>';
    svg.appendChild(defs);
    svg.appendChild(edges);
    svg.appendChild(nodes);
    g.edges().forEach(function (e) {
      var edge = g.edge(e), group = svgEl("g", {"class": "edge" + (e.v[0] === "m" ? " mask" : "")});
      var d = edge.points.map(function (p, i) { return (i ? "L" : "M") + p.x + "," + p.y; }).join(" ");
      group.appendChild(svgEl("path", {d: d, "marker-end": "url(#arrow)"}));
      if (edge.label) {
        var text = svgEl("text", {x: edge.x, y: edge.y + 4, "text-anchor": "middle"});
        text.textContent = edge.label;
        group.appendChild(text);
      }
      edges.appendChild(group);
    });
    TENSORS.forEach(function (t) { nodes.appendChild(tensorNode(t, g.node("t" + t.id))); });
    OPS.forEach(function (op) {
      nodes.appendChild(opNode(op, g.node("o" + op.id)));
      if (op.mask) nodes.appendChild(maskNode(op, g.node("m" + op.id)));
    });
    var size = g.graph();
    state.bounds = {x: 0, y: 0, w: size.width, h: size.height};
    openView();
  }

  function tensorNode(t, box) {
    var group = svgEl("g", {"class": "node tensor " + t.kind, "data-id": "t" + t.id, "data-name": t.name,
                            transform: "translate(" + (box.x - box.width / 2) + "," + (box.y - box.height / 2) + ")"});
    group.appendChild(svgEl("rect", {"class": "shape", width: box.width, height: box.height, rx: t.kind === "intermediate" ? 6 : 1,
                                    fill: FILL[t.kind], stroke: "#495057", "stroke-width": t.kind === "output" ? 2 : 1}));
    var lines = [tensorName(t), shapeText(t.shape) + " " + t.dtype, ""];
    lines.forEach(function (line, i) {
      var text = svgEl("text", {x: box.width / 2, y: 15 * i + 15, "text-anchor": "middle",
                                "class": i === 0 && t.name ? "name" : (i === 2 ? "grad" : "")});
      text.textContent = line;
      group.appendChild(text);
    });
    group.appendChild(svgEl("title"));                   // hover: the same lines as the SVG graphs' tooltips
    group.addEventListener("click", function () { if (!state.dragged) selectTensor(t.id); });
    state.nodes["t" + t.id] = {group: group, box: box};
    return group;
  }

  function opNode(op, box) {
    var group = svgEl("g", {"class": "node op", "data-id": "o" + op.id, "data-op": op.name,
                            transform: "translate(" + box.x + "," + box.y + ")"});
    group.appendChild(svgEl("ellipse", {"class": "shape", rx: box.width / 2, ry: box.height / 2}));
    var text = svgEl("text", {x: 0, y: 4, "text-anchor": "middle"});
    text.textContent = op.name;
    group.appendChild(text);
    group.addEventListener("click", function () { if (!state.dragged) selectOp(op.id); });
    state.nodes["o" + op.id] = {group: group, box: box};
    return group;
  }

  function maskNode(op, box) {         // the attention mask's grid, in the convention: dark = True = may attend
    var m = op.mask, x0 = box.x - box.width / 2, y0 = box.y - box.height / 2;
    var group = svgEl("g", {"class": "node mask", "data-id": "m" + op.id, transform: "translate(" + x0 + "," + y0 + ")"});
    group.appendChild(svgEl("rect", {"class": "shape", width: box.width, height: box.height, fill: FILL.mask,
                                    stroke: "#7048e8", "stroke-dasharray": "4 2"}));
    ["mask: " + m.kind, shapeText(m.shape) + " bool", "dark = True = may attend"].forEach(function (line, i) {
      var text = svgEl("text", {x: box.width / 2, y: 13 + 13 * i, "text-anchor": "middle", "class": i ? "" : "name"});
      text.textContent = line;
      group.appendChild(text);
    });
    m.may_attend.forEach(function (row, r) {
      row.forEach(function (v, c) {
        group.appendChild(svgEl("rect", {x: 6 + c * 5, y: 44 + r * 5, width: 4, height: 4, fill: v ? "#343a40" : "#f1f3f5"}));
      });
    });
    group.addEventListener("click", function () { if (!state.dragged) selectOp(op.id); });
    return group;
  }

  // ---------------------------------------------------------- pan and zoom
  function setView(v) {
    state.view = v;
    document.getElementById("graph-svg").setAttribute("viewBox", [v.x, v.y, v.w, v.h].join(" "));
  }
  function fit() {
    var b = state.bounds, svg = document.getElementById("graph-svg"), r = svg.getBoundingClientRect();
    var scale = Math.max(b.w / Math.max(r.width, 1), b.h / Math.max(r.height, 1));
    var w = r.width * scale, h = r.height * scale;
    setView({x: b.x - (w - b.w) / 2, y: b.y - (h - b.h) / 2, w: w, h: h});
  }
  function openView() {     // the whole graph if it fits at actual size, else actual size on the attention core
    var b = state.bounds, r = document.getElementById("graph-svg").getBoundingClientRect();
    if (b.w <= r.width && b.h <= r.height) { fit(); return; }
    var core = TENSORS.filter(function (t) { return t.name === "scores" || t.name === "weights"; });
    if (!core.length) core = [TENSORS[0]];                   // the loss
    var boxes = core.map(function (t) { return state.nodes["t" + t.id].box; });
    var cx = boxes.reduce(function (a, n) { return a + n.x; }, 0) / boxes.length;
    var cy = boxes.reduce(function (a, n) { return a + n.y; }, 0) / boxes.length;
    setView({x: cx - r.width / 2, y: cy - r.height / 2, w: r.width, h: r.height});
  }
  function setUpPanZoom() {
    var svg = document.getElementById("graph-svg"), start = null;
    svg.addEventListener("wheel", function (event) {
      event.preventDefault();
      var r = svg.getBoundingClientRect(), v = state.view, factor = event.deltaY > 0 ? 1.15 : 1 / 1.15;
      var px = v.x + (event.clientX - r.left) / r.width * v.w, py = v.y + (event.clientY - r.top) / r.height * v.h;
      setView({x: px - (px - v.x) * factor, y: py - (py - v.y) * factor, w: v.w * factor, h: v.h * factor});
    }, {passive: false});
    svg.addEventListener("mousedown", function (event) {
      start = {x: event.clientX, y: event.clientY, view: state.view};
      state.dragged = false;
    });
    window.addEventListener("mousemove", function (event) {
      if (!start) return;
      var r = svg.getBoundingClientRect(), dx = event.clientX - start.x, dy = event.clientY - start.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) { state.dragged = true; svg.classList.add("dragging"); }
      if (!state.dragged) return;
      var v = start.view;
      setView({x: v.x - dx / r.width * v.w, y: v.y - dy / r.height * v.h, w: v.w, h: v.h});
    });
    window.addEventListener("mouseup", function () {
      start = null;
      svg.classList.remove("dragging");
      setTimeout(function () { state.dragged = false; }, 0);
    });
    window.addEventListener("resize", fit);
    document.getElementById("fit").addEventListener("click", fit);
    [["zoom-in", 1 / 1.5], ["zoom-out", 1.5]].forEach(function (pair) {     // around the view's centre
      document.getElementById(pair[0]).addEventListener("click", function () {
        var v = state.view, f = pair[1];
        setView({x: v.x + v.w * (1 - f) / 2, y: v.y + v.h * (1 - f) / 2, w: v.w * f, h: v.h * f});
      });
    });
  }
  function keepInView(id) {            // pan (not zoom) so that node `id` is inside the view
    var node = state.nodes[id], v = state.view;
    if (!node) return;
    var b = node.box, margin = 20;
    var inside = b.x - b.width / 2 >= v.x + margin && b.x + b.width / 2 <= v.x + v.w - margin &&
                 b.y - b.height / 2 >= v.y + margin && b.y + b.height / 2 <= v.y + v.h - margin;
    if (!inside) setView({x: b.x - v.w / 2, y: b.y - v.h / 2, w: v.w, h: v.h});
  }

  // ---------------------------------------------------------------- backward
  function captionOf(step) {
    if (step === 0) return "forward pass done; backward not started: press → (or drag the slider) to run its first op";
    var s = STEPS[step - 1], op = OPS[s.op];
    var sent = s.sent.map(function (i) { return tensorName(TENSORS[i]); }).join(", ") || "no input that needs a gradient";
    return "backward step " + step + "/" + STEPS.length + ": " + op.name + " takes ∇ of " +
      tensorName(TENSORS[op.output]) + ", sends ∇ to " + sent;
  }
  function showStep(step) {
    step = Math.max(0, Math.min(STEPS.length, step));
    state.step = step;
    document.getElementById("step").value = step;
    document.getElementById("step-number").textContent = "step " + step + " / " + STEPS.length;
    document.getElementById("caption").textContent = captionOf(step);
    var current = step ? STEPS[step - 1] : null;
    OPS.forEach(function (op) {
      state.nodes["o" + op.id].group.classList.toggle("current", !!current && current.op === op.id);
    });
    TENSORS.forEach(function (t) {
      var group = state.nodes["t" + t.id].group, line = gradLine(t, step), text = group.querySelector("text.grad");
      text.textContent = line.text;
      group.querySelector("title").textContent = t.hover.concat([gradStatus(t, step), "click for all values"]).join("\n");
      text.classList.toggle("none", line.none);
      group.classList.toggle("accumulated", !!line.accumulated);
      group.classList.toggle("grad-in", !!current && OPS[current.op].output === t.id);
      group.classList.toggle("grad-out", !!current && current.sent.indexOf(t.id) >= 0);
    });
    if (current) keepInView("o" + current.op);
    if (state.selected) (state.selected[0] === "t" ? selectTensor : selectOp)(+state.selected.slice(1), true);
  }
  function setUpStepping() {
    var slider = document.getElementById("step");
    slider.max = STEPS.length;
    slider.addEventListener("input", function () { showStep(+slider.value); });
    document.getElementById("prev").addEventListener("click", function () { showStep(state.step - 1); });
    document.getElementById("next").addEventListener("click", function () { showStep(state.step + 1); });
    document.addEventListener("keydown", function (event) {
      var target = event.target;        // a menu keeps its own arrow keys; the slider and switches do not
      if (target.tagName === "SELECT" || target.tagName === "INPUT" && ["range", "checkbox"].indexOf(target.type) < 0) return;
      if (target.id === "snap-step") return;     // the training-step slider keeps its own arrow keys
      if (event.key === "ArrowRight") { showStep(state.step + 1); event.preventDefault(); }
      if (event.key === "ArrowLeft") { showStep(state.step - 1); event.preventDefault(); }
    });
  }

  // ------------------------------------------------------------------- panel
  function colour(v, scale) {            // diverging: blue < 0 < red; grey for ±inf / nan
    if (!isFinite(v)) return "#adb5bd";
    var a = Math.min(1, Math.abs(v) / (scale || 1)), c = Math.round(255 * (1 - a));
    return v >= 0 ? "rgb(255," + c + "," + c + ")" : "rgb(" + c + "," + c + ",255)";
  }
  function twoD(shape) {                 // rows x columns of the picture: leading axes flattened into rows
    var cols = shape.length ? shape[shape.length - 1] : 1, rows = 1;
    for (var i = 0; i < shape.length - 1; i++) rows *= shape[i];
    return {rows: rows, cols: cols};
  }
  function rowIndex(shape, r) {          // the leading indices of row r, e.g. "[0, 2, 5]"
    var lead = shape.slice(0, -1), idx = [];
    for (var i = lead.length - 1; i >= 0; i--) { idx.unshift(r % lead[i]); r = Math.floor(r / lead[i]); }
    return "[" + idx.join(", ") + (idx.length ? ", " : "") + ":]";
  }
  function characters(t) {               // the query and key characters of an attention-shaped tensor, or null
    var map = ATTENTION.find(function (m) { return m.module === STEP.module; }), n = t.shape.length;
    if (!map || !/scores|weights/.test(t.name) || n < 2 || t.shape[n - 2] !== map.queries.length ||
        t.shape[n - 1] !== map.keys.length) return null;
    return map;
  }
  function axisLabels(container, labels, size, vertical) {   // one label per row (vertical) or column
    container.innerHTML = "";
    labels.forEach(function (label) {
      var span = el("span", {"class": label.length > 1 ? "special" : ""}, label);
      span.style[vertical ? "height" : "width"] = size + "px";
      span.style.lineHeight = vertical ? size + "px" : "";
      container.appendChild(span);
    });
  }
  function labelled(canvas, rowLabels, colLabels, cellW, cellH) {  // the canvas with tokens along both axes
    var grid = el("div", {"class": "labelled"}), cols = el("div", {"class": "col-labels"});
    var rows = el("div", {"class": "row-labels"});
    axisLabels(cols, colLabels, cellW, false);
    axisLabels(rows, rowLabels, cellH, true);
    [el("span"), cols, rows, canvas].forEach(function (part) { grid.appendChild(part); });
    return grid;
  }
  function arrayView(values, shape, id, t) {  // statistics, a heatmap of every value, a table of the first ones
    var box = el("div", {id: id}), s = stats(values), dims = twoD(shape);
    box.appendChild(el("div", {"class": "stat"}, "shape " + shapeText(shape) + "   min " + num(s.min) + "   max " +
                                                num(s.max) + "   mean " + num(s.mean) + "   ‖·‖ " + num(s.norm)));
    var cell = Math.max(2, Math.min(14, Math.floor(400 / dims.cols))), shownRows = Math.min(dims.rows, 256);
    var tall = shownRows <= 4 ? Math.max(cell, 12) : cell;        // a bias (one row) stays visible
    var canvas = el("canvas", {width: dims.cols * cell, height: shownRows * tall, "class": "values-heatmap"});
    var ctx = canvas.getContext("2d"), scale = Math.max(Math.abs(isFinite(s.min) ? s.min : 0), Math.abs(isFinite(s.max) ? s.max : 0));
    for (var r = 0; r < shownRows; r++) for (var c = 0; c < dims.cols; c++) {
      ctx.fillStyle = colour(values[r * dims.cols + c], scale);
      ctx.fillRect(c * cell, r * tall, cell, tall);
    }
    var hover = el("div", {"class": "hover"}, shownRows < dims.rows ? "first " + shownRows + " rows of " + dims.rows : " ");
    canvas.addEventListener("mousemove", function (event) {
      var rect = canvas.getBoundingClientRect();
      var c = Math.floor((event.clientX - rect.left) / rect.width * dims.cols);
      var r = Math.floor((event.clientY - rect.top) / rect.height * shownRows);
      if (r < 0 || c < 0 || r >= shownRows || c >= dims.cols) return;
      hover.textContent = rowIndex(shape, r).replace(":]", c + "]") + " = " + values[r * dims.cols + c];
      var map = t && characters(t), q = r % shape[shape.length - 2];
      if (map) hover.textContent += "   query " + q + " '" + map.queries[q] + "' → key " + c + " '" + map.keys[c] + "'";
    });
    var scroll = el("div", {"class": "scroll"}), tokens = t && characters(t);
    if (tokens) {                          // rows are (heads x) queries, columns keys: label them with their tokens
      var rowTokens = [];
      for (var lr = 0; lr < shownRows; lr++) rowTokens.push(tokens.queries[lr % tokens.queries.length]);
      scroll.appendChild(labelled(canvas, rowTokens, tokens.keys, cell, tall));
    } else scroll.appendChild(canvas);
    box.appendChild(scroll);
    box.appendChild(hover);
    var table = el("table", {"class": "values"}), head = el("tr");
    var showCols = Math.min(dims.cols, 6), showRows = Math.min(dims.rows, 6);
    head.appendChild(el("th", {}, "row \\ col"));
    for (var hc = 0; hc < showCols; hc++) head.appendChild(el("th", {}, String(hc)));
    table.appendChild(head);
    for (var tr = 0; tr < showRows; tr++) {
      var row = el("tr");
      row.appendChild(el("th", {}, rowIndex(shape, tr)));
      for (var tc = 0; tc < showCols; tc++) {
        var flat = tr * dims.cols + tc, v = values[flat];
        row.appendChild(el("td", {"data-index": flat, "data-value": String(v), title: String(v)}, num(v)));
      }
      table.appendChild(row);
    }
    var tableBox = el("div", {"class": "scroll"});
    tableBox.appendChild(table);
    box.appendChild(tableBox);
    if (showRows < dims.rows || showCols < dims.cols)
      box.appendChild(el("div", {"class": "hint"}, "table: the first " + showRows + " x " + showCols + "; hover the heatmap for any value"));
    return box;
  }
  function link(text, onclick) {
    var a = el("span", {"class": "link"}, text);
    a.addEventListener("click", onclick);
    return a;
  }
  function markSelected(id) {
    Object.keys(state.nodes).forEach(function (k) { state.nodes[k].group.classList.toggle("selected", k === id); });
  }
  function selectTensor(i, keepScroll) {
    var t = TENSORS[i], panel = document.getElementById("details"), top = document.getElementById("side").scrollTop;
    state.selected = "t" + i;
    markSelected("t" + i);
    panel.innerHTML = "";
    panel.appendChild(el("h2", {id: "detail-name"}, tensorName(t)));
    panel.appendChild(el("div", {id: "detail-kind"}, t.kind + " tensor, " + t.dtype + (t.requires_grad ? "" : ", requires_grad=False")));
    panel.appendChild(el("div", {id: "detail-shape", "class": "stat"}, shapeText(t.shape)));
    panel.appendChild(el("h3", {}, "value"));
    panel.appendChild(arrayView(decode(t.value), t.shape, "value-view", t));
    panel.appendChild(el("h3", {}, "gradient  ∂ loss / ∂ " + tensorName(t)));
    panel.appendChild(gradientSection(t));
    if (t.op !== null) {
      panel.appendChild(el("h3", {}, "made by"));
      panel.appendChild(opSection(OPS[t.op]));
    } else {
      panel.appendChild(el("p", {}, "A leaf: no op made it (" + (t.kind === "parameter" ? "a parameter of the model" :
        t.requires_grad ? "an input backward differentiates with respect to" : "a constant") + ")."));
    }
    if (DATA.check && DATA.check[i]) panel.appendChild(checkSection(DATA.check[i]));
    if (t.name === "weights") linkAttentionToGraph();
    if (keepScroll) document.getElementById("side").scrollTop = top;
  }
  function gradientSection(t) {
    var box = el("div", {id: "grad-section"});
    var step = state.step, n = arrivedCount(t, step);
    if (!t.requires_grad) { box.appendChild(el("p", {id: "grad-status"}, "none: a constant (requires_grad=False) gets no gradient.")); return box; }
    if (n === 0) {
      var when = t.arrivals.length ? " it arrives at backward step " + t.arrivals[0] + " (→ steps through backward)" : "";
      box.appendChild(el("p", {id: "grad-status"}, (step === 0 ? "backward has not started:" : "not arrived yet:") + when + "."));
      return box;
    }
    var from = t.arrivals.slice(0, n).map(function (s, k) {
      return "g" + (k + 1) + " from step " + s + " (" + OPS[STEPS[s - 1].op].name + ")";
    });
    var status = n > 1 ? "∇ = " + from.map(function (f) { return f.split(" ")[0]; }).join(" + ") + ": " + from.join(", ")
                       : "arrived at step " + t.arrivals[0] + " (" + OPS[STEPS[t.arrivals[0] - 1].op].name + ")";
    if (n < t.arrivals.length) status += "; " + (t.arrivals.length - n) + " more to come";
    box.appendChild(el("p", {id: "grad-status"}, status));
    box.appendChild(arrayView(gradientAt(t, step), t.shape, "grad-view", t));
    return box;
  }
  function opSection(op) {
    var box = el("div", {"class": "op-section", "data-op": op.name});
    box.appendChild(el("div", {"class": "op-name"}, op.name + (op.scope ? "   in " + op.scope : "")));
    if (op.source) {
      box.appendChild(el("div", {"class": "source"}, "created at " + op.source));
      if (op.code) box.appendChild(el("code", {}, op.code));
    }
    if (op.defined_at) box.appendChild(el("div", {"class": "defined"}, op.name + "'s forward and backward: " + op.defined_at));
    var inputs = el("div", {}, "inputs: ");
    op.inputs.forEach(function (i, k) {
      if (k) inputs.appendChild(document.createTextNode(", "));
      inputs.appendChild(document.createTextNode(k + ": "));
      inputs.appendChild(link(tensorName(TENSORS[i]), function () { selectTensor(i); }));
    });
    box.appendChild(inputs);
    var out = el("div", {}, "output: ");
    out.appendChild(link(tensorName(TENSORS[op.output]), function () { selectTensor(op.output); }));
    box.appendChild(out);
    var position = STEPS.findIndex(function (s) { return s.op === op.id; }) + 1;
    box.appendChild(el("div", {}, "its backward runs at step " + position + " of " + STEPS.length));
    box.appendChild(el("h3", {}, "saved for backward"));
    if (!op.saved.length) box.appendChild(el("div", {"class": "hint"}, "nothing: its backward needs only the incoming gradient (and shapes)"));
    op.saved.forEach(function (s) {
      var line = "self." + s.name + ": " + shapeText(s.shape) + " " + s.dtype;
      if (s.same_as) line += " = " + s.same_as + "'s array";
      if (s.stats) line += "   min " + num(s.stats[0]) + " max " + num(s.stats[1]) + " mean " + num(s.stats[2]);
      box.appendChild(el("div", {"class": "saved stat"}, line));
      if (s.value && !s.same_as) box.appendChild(arrayView(decode(s.value), s.shape, "saved-" + s.name));
    });
    if (op.mask) box.appendChild(el("div", {}, "its mask: the attention mask's complement (MaskedFill fills where attending is not allowed); " +
                                           "the graph shows the attention mask, dark = True = may attend"));
    return box;
  }
  function selectOp(i, keepScroll) {
    var op = OPS[i], panel = document.getElementById("details"), top = document.getElementById("side").scrollTop;
    state.selected = "o" + i;
    markSelected("o" + i);
    panel.innerHTML = "";
    panel.appendChild(el("h2", {id: "detail-name"}, op.name));
    panel.appendChild(opSection(op));
    if (keepScroll) document.getElementById("side").scrollTop = top;
  }

  // --------------------------------------------------------------- attention
  // What the heatmaps show: the page's input on the checkpoint (DATA.attention), or one probe row of
  // the run's snapshots at one recorded training step. Every map: {module, kind, layer, queries, keys,
  // mask_kind, may_attend, weights [head][query][key]}. The focused head is drawn large with its mask.
  var ATTENTION = DATA.attention;
  var SNAPSHOTS = DATA.snapshots || null;
  var view = {source: "input", row: 0, step: 0, module: null, head: 0, playing: null};
  var MOVED = {};            // "module/head" -> its rank among the heads that changed most (0 = most)
  var CIRCUIT = {};          // "module/head" -> "binder" or "reader": a next-word run's recall circuit
  var CIRCUIT_COLOURS = {binder: "#7048e8", reader: "#d6336c"};
  var KIND_COLOURS = ["#1c7ed6", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#0c8599", "#5c940d"];

  function snapshotMap(m, index) {     // one module of a probe row at recorded step `index`, as a map
    var values = decode(m.weights), rows = m.queries.length, cols = m.keys.length;
    var heads = values.length / (SNAPSHOTS.steps.length * rows * cols), weights = [];
    for (var h = 0; h < heads; h++) {
      var base = (index * heads + h) * rows * cols, grid = [];
      for (var q = 0; q < rows; q++) grid.push(Array.from(values.subarray(base + q * cols, base + (q + 1) * cols)));
      weights.push(grid);
    }
    return {module: m.module, kind: m.kind, layer: m.layer, queries: m.queries, keys: m.keys,
            mask_kind: m.mask_kind, may_attend: m.may_attend, weights: weights, step: SNAPSHOTS.steps[index]};
  }
  function currentMaps() {
    if (view.source === "input" || !SNAPSHOTS) return ATTENTION;
    return SNAPSHOTS.rows[view.row].modules.map(function (m) { return snapshotMap(m, view.step); });
  }
  function focusedMap(maps) {
    maps = maps || currentMaps();
    return maps.find(function (m) { return m.module === view.module; }) || maps[0];
  }
  function moduleLabel(m) { return m.kind + " " + m.layer; }
  function isDecoderRow(m) { return m.kind === "decoder-self" || m.kind === "cross"; }

  function snapshotLabel(index) {
    var last = SNAPSHOTS.steps.length - 1, loss = SNAPSHOTS.loss[index], accuracy = SNAPSHOTS.accuracy[index];
    return "training step " + SNAPSHOTS.steps[index] + " (" + SNAPSHOTS.steps[0] + "–" + SNAPSHOTS.steps[last] + ")" +
      (loss === null ? "" : " · loss " + loss.toFixed(4)) +
      (accuracy === null ? "" : " · " + SNAPSHOTS.accuracy_name + " " + (100 * accuracy).toFixed(1) + "%");
  }
  function showSnapshot(index) {
    var slider = document.getElementById("snap-step");
    index = Math.max(0, Math.min(SNAPSHOTS.steps.length - 1, index));
    slider.value = index;
    view.step = index;
    if (view.source === "input") setSource("row" + view.row, true);
    document.getElementById("snap-label").textContent = snapshotLabel(index);
    drawAttention();
    drawCurves();
  }
  function play() {                    // ▶: one recorded step every 120 ms, from the start when at the end
    var button = document.getElementById("play");
    if (view.playing) { clearInterval(view.playing); view.playing = null; button.textContent = "▶ play"; return; }
    if (view.step >= SNAPSHOTS.steps.length - 1) showSnapshot(0);
    button.textContent = "❚❚ pause";
    view.playing = setInterval(function () {
      showSnapshot(view.step + 1);
      if (view.step >= SNAPSHOTS.steps.length - 1) play();          // the last step: stop there
    }, 120);
  }
  function setSource(value, quiet) {
    var select = document.getElementById("source");
    select.value = value;
    view.source = value === "input" ? "input" : "row";
    if (value !== "input") view.row = +value.slice(3);
    document.getElementById("training").classList.toggle("off", view.source === "input");
    if (!quiet) drawAttention();
  }
  function sourceOptions() {
    var select = document.getElementById("source"), kind = DATA.input ? DATA.input.kind : "date";
    select.innerHTML = "";
    var input = el("option", {value: "input"}, "this page's " + kind + ": " + DATA.input.text);
    if (!SNAPSHOTS) { select.appendChild(input); return; }
    // the groups say when, so each option is only its words: the menu is narrow enough to show them
    var probes = select.appendChild(el("optgroup", {label: "while it trained (the recorded steps)"}));
    SNAPSHOTS.rows.forEach(function (row, p) {
      probes.appendChild(el("option", {value: "row" + p}, "probe " + (p + 1) + " · " + row.text));
    });
    select.appendChild(el("optgroup", {label: "the trained model"})).appendChild(input);
  }
  function setUpSnapshots() {
    if (!SNAPSHOTS) return;
    var slider = document.getElementById("snap-step");
    document.getElementById("training").hidden = false;
    slider.max = SNAPSHOTS.steps.length - 1;
    slider.addEventListener("input", function () { showSnapshot(+slider.value); });
    document.getElementById("play").addEventListener("click", play);
    document.getElementById("curves").addEventListener("click", function (event) {
      var c = event.target, rect = c.getBoundingClientRect(), x = (event.clientX - rect.left) / rect.width;
      var steps = SNAPSHOTS.steps, target = steps[0] + x * (steps[steps.length - 1] - steps[0]), best = 0;
      steps.forEach(function (s, i) { if (Math.abs(s - target) < Math.abs(steps[best] - target)) best = i; });
      showSnapshot(best);
    });
    document.addEventListener("keydown", function (event) {
      var target = event.target;
      if (target.tagName === "SELECT" || target.tagName === "INPUT" && ["range", "checkbox"].indexOf(target.type) < 0) return;
      if (event.key === "ArrowUp") { showSnapshot(+slider.value + 1); event.preventDefault(); }
      if (event.key === "ArrowDown") { showSnapshot(+slider.value - 1); event.preventDefault(); }
    });
    SNAPSHOTS.changes.forEach(function (c, rank) { MOVED[c.module + "/" + c.head] = rank; });
    var probeNote = document.getElementById("snap-probe"), circuit = SNAPSHOTS.circuit;
    if (circuit) {
      // a next-word run: open on its recall circuit's reader, on the recall probe it is shown on
      circuit.binder.heads.forEach(function (h) { CIRCUIT[circuit.binder.module + "/" + h] = "binder"; });
      CIRCUIT[circuit.reader.module + "/" + circuit.reader.head] = "reader";
      view.module = circuit.reader.module;
      view.head = circuit.reader.head;
      view.row = circuit.row;
      probeNote.textContent = circuitNote(circuit);
    } else {
      // open on the head that changed most over training, on the probe row where it changed most
      var top = SNAPSHOTS.changes[0];
      view.module = top.module;
      view.head = top.head;
      view.row = bestRow(top);
      probeNote.textContent = "Opened on " + moduleLabel(moduleOf(top.module)) + ", head " + top.head +
        ": of every head, its weights changed most between the first and the last recorded step " +
        "(mean |Δw| " + num(top.change) + "). ▶ plays the training steps; ↑ / ↓ step through them.";
    }
    view.source = "row";
    curveLegend();
    showSnapshot(SNAPSHOTS.steps.length - 1);        // the last recorded step: the trained model
    setSource("row" + view.row);
  }
  function moduleOf(name) { return SNAPSHOTS.rows[0].modules.find(function (m) { return m.module === name; }); }
  function formed(step) { return step === null ? "not by the last recorded step" : "from step " + step; }
  function headList(heads) {
    return (heads.length > 1 ? "heads " + heads.slice(0, -1).join(", ") + " and " : "head ") + heads[heads.length - 1];
  }
  function circuitNote(c) {           // what the marked heads are, and when each part of the circuit formed
    var places = c.binder.places.map(function (p) { return p.place + " " + formed(p.step); }).join(", ");
    return "Opened on the recall circuit of this run, on the recall probe. The binder (" +
      moduleLabel(moduleOf(c.binder.module)) + ", " + headList(c.binder.heads) + ", framed violet) makes each " +
      "place read the name stated before it: every place bound " + formed(c.binder.step) + " (" + places + "). " +
      "The reader (" + moduleLabel(moduleOf(c.reader.module)) + ", head " + c.reader.head + ", framed pink, " +
      "focused) reads, from the last word, the place of the name asked: the right place in both orders " +
      formed(c.reader.step) + ". Held-out recall at 95% " + formed(c.recall_step) + ". " +
      "▶ plays the training steps; ↑ / ↓ step through them.";
  }
  function bestRow(top) {              // the probe row on which the top head moved most
    var best = 0, most = -1, last = SNAPSHOTS.steps.length - 1;
    SNAPSHOTS.rows.forEach(function (row, p) {
      var m = row.modules.find(function (x) { return x.module === top.module; });
      var values = decode(m.weights), size = m.queries.length * m.keys.length, heads = values.length / ((last + 1) * size);
      var first = top.head * size, end = (last * heads + top.head) * size, sum = 0;
      for (var i = 0; i < size; i++) sum += Math.abs(values[end + i] - values[first + i]);
      if (sum / size > most) { most = sum / size; best = p; }
    });
    return best;
  }

  // ------------------------------------------------------------------ curves
  function curveSeries() {             // [{name, values, colour, log}] : the loss, then each kind's accuracy
    var series = [{name: "loss (log scale)", values: SNAPSHOTS.loss, colour: "#495057", log: true, dash: [4, 3]}];
    if (SNAPSHOTS.kinds.length) SNAPSHOTS.kinds.forEach(function (kind, i) {
      series.push({name: kind, values: SNAPSHOTS.kind_accuracy[i], colour: KIND_COLOURS[i % KIND_COLOURS.length]});
    });
    else series.push({name: SNAPSHOTS.accuracy_name, values: SNAPSHOTS.accuracy, colour: KIND_COLOURS[0]});
    var c = SNAPSHOTS.circuit;       // its weights (0-1) on the same steps: when each part formed
    if (c) series.push(
      {name: "binder: each place on its own name", values: c.binder.curve, colour: CIRCUIT_COLOURS.binder, dash: [2, 2], circuit: true},
      {name: "reader: the last word on the asked place", values: c.reader.curve, colour: CIRCUIT_COLOURS.reader, dash: [2, 2], circuit: true});
    return series;
  }
  function curveLegend() {
    var box = document.getElementById("curve-legend");
    box.innerHTML = "";
    box.appendChild(document.createTextNode(SNAPSHOTS.kinds.length ? "held-out accuracy per kind (0–100%): " : "accuracy (0–100%): "));
    curveSeries().forEach(function (s) {
      if (s.circuit && !box.querySelector(".circuit-keys"))
        box.appendChild(el("div", {"class": "circuit-keys"}, "the recall circuit's weights (0–1, dotted): "));
      var span = el("span", {"class": "key" + (s.circuit ? " circuit" : "")}, s.name);
      span.style.borderColor = s.colour;
      span.style.color = s.colour;
      box.appendChild(span);
    });
  }
  function drawCurves() {
    var canvas = document.getElementById("curves"), width = canvas.clientWidth || 400, height = 90;
    canvas.width = width; canvas.height = height;
    var ctx = canvas.getContext("2d"), steps = SNAPSHOTS.steps, first = steps[0], last = steps[steps.length - 1];
    var pad = 4, x = function (s) { return pad + (s - first) / Math.max(1, last - first) * (width - 2 * pad); };
    ctx.clearRect(0, 0, width, height);
    ctx.strokeStyle = "#dee2e6";
    [0, 0.5, 1].forEach(function (f) { var y = pad + (1 - f) * (height - 2 * pad); ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(width, y); ctx.stroke(); });
    curveSeries().forEach(function (s) {
      var values = s.values, low = Infinity, high = -Infinity;
      if (s.log) values.forEach(function (v) { if (v !== null && v > 0) { low = Math.min(low, Math.log(v)); high = Math.max(high, Math.log(v)); } });
      var y = function (v) {
        var f = s.log ? (Math.log(v) - low) / Math.max(1e-9, high - low) : v;
        return pad + (1 - f) * (height - 2 * pad);
      };
      ctx.strokeStyle = s.colour; ctx.lineWidth = 1.5; ctx.setLineDash(s.dash || []);
      ctx.beginPath();
      var drawing = false;
      values.forEach(function (v, i) {
        if (v === null || (s.log && !(v > 0))) { drawing = false; return; }
        if (drawing) ctx.lineTo(x(steps[i]), y(v)); else ctx.moveTo(x(steps[i]), y(v));
        drawing = true;
      });
      ctx.stroke();
    });
    ctx.setLineDash([]);
    ctx.strokeStyle = "#c92a2a"; ctx.lineWidth = 2;       // the step the heatmaps show
    ctx.beginPath(); ctx.moveTo(x(steps[view.step]), 0); ctx.lineTo(x(steps[view.step]), height); ctx.stroke();
    canvas.dataset.marker = Math.round(x(steps[view.step]));
    canvas.dataset.step = steps[view.step];
  }

  // -------------------------------------------------------------------- grid
  function heatmap(canvas, map, head, cell) {     // white 0 → blue 1; masked cells light grey
    var rows = map.queries.length, cols = map.keys.length, weights = map.weights[head];
    canvas.width = cols * cell; canvas.height = rows * cell;
    canvas.dataset.rows = rows; canvas.dataset.cols = cols;
    var ctx = canvas.getContext("2d");
    for (var q = 0; q < rows; q++) for (var k = 0; k < cols; k++) {
      var w = weights[q][k], shade = Math.round(255 * (1 - w));
      ctx.fillStyle = map.may_attend[q][k] || w > 0 ? "rgb(" + shade + "," + shade + ",255)" : "#f1f3f5";
      ctx.fillRect(k * cell, q * cell, cell, cell);
    }
  }
  function drawGrid(maps) {
    // one cell size for every heatmap, as large as lets all of them fit the panel's width and, down
    // to 4 px, the window's height below the grid's top: every layer and head visible at once
    var box = document.getElementById("grid"), heads = maps[0].weights.length;
    var side = document.getElementById("side"), width = Math.max(200, side.clientWidth - 120);
    var cols = Math.max.apply(null, maps.map(function (m) { return m.keys.length; }));
    var rows = maps.reduce(function (n, m) { return n + m.queries.length; }, 0);
    var top = box.getBoundingClientRect().top + side.scrollTop - side.getBoundingClientRect().top;
    var height = side.clientHeight - top - maps.length * 18 - 8;
    var cell = Math.max(3, Math.min(12, Math.floor((width / heads - 6) / cols), Math.max(4, Math.floor(height / rows))));
    box.innerHTML = "";
    maps.forEach(function (m) {
      var row = el("div", {"class": "grid-row"});
      row.appendChild(el("div", {"class": "grid-label", title: m.module}, moduleLabel(m) +
        (isDecoderRow(m) && DATA.input.kind === "date" ? "\nrows: the answer shifted right" : "")));
      for (var h = 0; h < heads; h++) {
        var c = el("canvas", {"class": "cell", "data-module": m.module, "data-head": h});
        heatmap(c, m, h, cell);
        var key = m.module + "/" + h, rank = MOVED[key], part = CIRCUIT[key];
        // a next-word run frames its recall circuit; a date run the two heads that changed most
        var moved = !SNAPSHOTS || !SNAPSHOTS.circuit ? rank !== undefined && rank < 2 : false;
        c.title = moduleLabel(m) + ", head " + h + (moved ? " · changed most over training (#" + (rank + 1) + ")" : "") +
          (part ? " · the recall circuit's " + part : "") + " · click to focus";
        c.classList.toggle("focused", m.module === view.module && h === view.head);
        c.classList.toggle("moved", moved);
        if (part) c.classList.add(part);
        if (part) c.dataset.circuit = part;
        (function (module, head) {
          c.addEventListener("click", function () { view.module = module; view.head = head; drawAttention(); });
        })(m.module, h);
        var figure = el("figure", {"class": "grid-cell"});
        figure.appendChild(c);
        figure.appendChild(el("figcaption", {}, "head " + h + (part ? " · " + part : "")));
        row.appendChild(figure);
      }
      box.appendChild(row);
    });
    box.dataset.step = view.source === "input" ? "input" : SNAPSHOTS.steps[view.step];
  }

  function drawAttention() {
    var maps = currentMaps(), map = focusedMap(maps);
    view.module = map.module;
    view.head = Math.min(view.head, map.weights.length - 1);
    drawGrid(maps);
    var select = document.getElementById("att-module"), heads = document.getElementById("att-head");
    select.value = ATTENTION.findIndex(function (m) { return m.module === map.module; });
    heads.value = view.head;
    var rows = map.queries.length, cols = map.keys.length;
    var cell = Math.max(4, Math.min(16, Math.floor(280 / cols)));
    var canvas = document.getElementById("att-canvas"), mask = document.getElementById("mask-canvas");
    heatmap(canvas, map, view.head, cell);
    mask.width = cols * cell; mask.height = rows * cell;
    mask.dataset.rows = rows; mask.dataset.cols = cols;
    var mctx = mask.getContext("2d");
    for (var q = 0; q < rows; q++) for (var k = 0; k < cols; k++) {
      mctx.fillStyle = map.may_attend[q][k] ? "#343a40" : "#f1f3f5";
      mctx.fillRect(k * cell, q * cell, cell, cell);
    }
    ["att", "mask"].forEach(function (prefix) {
      axisLabels(document.getElementById(prefix + "-keys"), map.keys, cell, false);
      axisLabels(document.getElementById(prefix + "-queries"), map.queries, cell, true);
    });
    document.getElementById("mask-caption").textContent = "mask (" + map.mask_kind + "): dark = True = may attend";
    document.getElementById("focus-title").textContent = moduleLabel(map) + ", head " + view.head +
      (map.step !== undefined ? " at training step " + map.step : " on this page's " + (DATA.input ? DATA.input.kind : "date"));
    document.getElementById("shifted").hidden = !(isDecoderRow(map) && DATA.input && DATA.input.kind === "date");
    canvas.dataset.module = map.module;
    canvas.dataset.head = view.head;
    if (map.step !== undefined) canvas.dataset.step = map.step; else delete canvas.dataset.step;
  }
  function hoverAttention(event) {
    var canvas = event.target, map = focusedMap(), rect = canvas.getBoundingClientRect();
    var k = Math.floor((event.clientX - rect.left) / rect.width * map.keys.length);
    var q = Math.floor((event.clientY - rect.top) / rect.height * map.queries.length);
    if (q < 0 || k < 0 || q >= map.queries.length || k >= map.keys.length) return;
    var hover = document.getElementById("att-hover");
    var reads = isDecoderRow(map) && DATA.input && DATA.input.kind === "date" && q + 1 < map.queries.length ?
      "; this row predicts '" + map.queries[q + 1] + "', the next row's input" : "";
    hover.textContent = "query " + q + " '" + map.queries[q] + "' → key " + k + " '" + map.keys[k] + "': weight " +
      num(map.weights[view.head][q][k]) + (map.may_attend[q][k] ? " (may attend)" : " (masked: may not attend)") + reads;
    hover.dataset.query = map.queries[q];
    hover.dataset.key = map.keys[k];
    var inGraph = map.module === STEP.module;
    var weightsNode = TENSORS.find(function (t) { return t.name === "weights"; });
    if (weightsNode) state.nodes["t" + weightsNode.id].group.classList.toggle("linked", inGraph);
  }
  function linkAttentionToGraph() {      // the heatmaps show the graph's own module
    if (view.module !== STEP.module) { view.module = STEP.module; drawAttention(); }
  }
  function moduleOptions() {
    var select = document.getElementById("att-module"), heads = document.getElementById("att-head");
    select.innerHTML = ""; heads.innerHTML = "";
    ATTENTION.forEach(function (m, i) {
      select.appendChild(el("option", {value: i}, m.kind + ", layer " + m.layer + (m.module === STEP.module ? " (the graph's)" : "")));
    });
    for (var h = 0; h < ATTENTION[0].weights.length; h++) heads.appendChild(el("option", {value: h}, "head " + h));
  }
  function setUpAttention() {
    var select = document.getElementById("att-module"), heads = document.getElementById("att-head");
    moduleOptions();
    view.module = STEP.module;
    sourceOptions();
    document.getElementById("source").addEventListener("change", function (e) { setSource(e.target.value); });
    select.addEventListener("change", function () { view.module = ATTENTION[+select.value].module; drawAttention(); });
    heads.addEventListener("change", function () { view.head = +heads.value; drawAttention(); });
    ["att-canvas", "mask-canvas"].forEach(function (id) {
      var c = document.getElementById(id);
      c.addEventListener("mousemove", hoverAttention);
      c.addEventListener("mouseleave", function () {
        TENSORS.forEach(function (t) { state.nodes["t" + t.id].group.classList.remove("linked"); });
      });
    });
    setSource("input", true);
    drawAttention();
  }

  // ------------------------------------------------------------------ ladder
  function drawLadder() {
    var section = document.getElementById("ladder"), box = document.getElementById("ladder-rungs");
    section.hidden = !DATA.ladder;
    if (!DATA.ladder) return;
    var L = DATA.ladder, n = L.tokens.length, cell = Math.max(3, Math.min(8, Math.floor(150 / n)));
    document.getElementById("ladder-note").textContent = "Each rung of the attention ladder on this sentence, trained here " +
      L.steps + " steps as attention-ladder trains it: row t is how much position t's context vector takes from each word; " +
      "below, the word it predicts after '" + L.tokens[n - 1] + "'.";
    box.innerHTML = "";
    L.rungs.forEach(function (r) {
      var figure = el("figure", {"class": "rung", title: r.idea}), canvas = el("canvas", {"data-rung": r.name});
      var may = r.weights.map(function (row, q) { return row.map(function (_, k) { return k <= q ? 1 : 0; }); });
      heatmap(canvas, {queries: L.tokens, keys: L.tokens, weights: [r.weights], may_attend: may}, 0, cell);
      figure.appendChild(el("figcaption", {"class": "rung-name"}, r.name));
      figure.appendChild(canvas);
      figure.appendChild(el("figcaption", {"class": "rung-word"}, "→ " + r.predicted + " (" + Math.round(100 * r.probability) + "%)"));
      box.appendChild(figure);
    });
  }

  // -------------------------------------------------------------- prediction
  function showPrediction() {
    var p = DATA.prediction, box = document.getElementById("prediction");
    if (!p) { box.hidden = true; return; }
    box.textContent = "the model " + (p.words ? "predicts next: " + p.words.map(function (w) {
      return w[0] + " " + Math.round(100 * w[1]) + "%"; }).join(", ") : "writes: " + p.text);
    box.dataset.text = p.text;
  }

  // ------------------------------------------------------------ the check
  function checkSection(c) {
    var box = el("div", {"class": "check-section"});
    box.appendChild(el("h3", {}, "gradient check (central differences, float64 copy of the model)"));
    box.appendChild(el("div", {"class": c.ok ? "ok" : "bad"}, (c.ok ? "agrees" : "DISAGREES") +
      ": the largest difference is " + num(c.max_error) + " of the tolerance (atol " + DATA.check_tolerance.atol +
      " + rtol " + DATA.check_tolerance.rtol + " × |finite difference|, gradcheck's)"));
    var table = el("table", {"class": "values"}), head = el("tr");
    ["element", "∇ from backward", "finite difference"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    table.appendChild(head);
    c.rows.forEach(function (r) {
      var row = el("tr");
      row.appendChild(el("th", {}, r[0]));
      row.appendChild(el("td", {}, num(r[1])));
      row.appendChild(el("td", {}, num(r[2])));
      table.appendChild(row);
    });
    box.appendChild(table);
    return box;
  }
  function applyCheck() {               // colour each checked tensor by its check, while the switch is on
    var toggle = document.getElementById("check-toggle");
    Object.keys(DATA.check || {}).forEach(function (i) {
      var group = state.nodes["t" + i].group;
      group.classList.toggle("check-ok", toggle.checked && DATA.check[i].ok);
      group.classList.toggle("check-bad", toggle.checked && !DATA.check[i].ok);
    });
  }
  function setUpCheck() {
    var toggle = document.getElementById("check-toggle");
    if (!DATA.check && !DATA.live) { toggle.disabled = true; toggle.parentNode.title = "written without the check (--no-check)"; return; }
    toggle.addEventListener("change", applyCheck);
  }

  function legend() {
    var box = document.getElementById("legend");
    [["parameter", "parameter"], ["input", "input (requires grad)"], ["constant", "constant"],
     ["intermediate", "intermediate"], ["output", "loss"], ["mask", "mask: dark = True = may attend"]].forEach(function (p) {
      var span = el("span", {}, p[1]);
      span.style.background = FILL[p[0]];
      box.appendChild(span);
    });
    var op = el("span", {}, "op"); op.style.background = "#ffd8a8"; op.style.borderRadius = "8px"; box.appendChild(op);
  }

  // -------------------------------------------------------------------- live
  // Served by dates-explore --serve / next-word-explore --serve: the learner types an input, the
  // server runs the step on the checkpoint and answers with the same data the page was built from.
  function load(data) {
    ["date", "input", "prediction", "step", "attention", "check", "check_tolerance", "ladder"].forEach(function (k) {
      if (k in data) DATA[k] = data[k]; else delete DATA[k];
    });
    STEP = DATA.step; TENSORS = STEP.tensors; OPS = STEP.ops; STEPS = STEP.steps; ATTENTION = DATA.attention;
    decoded = new Map();
    document.getElementById("graph-svg").innerHTML = "";
    state.nodes = {}; state.selected = null;
    document.getElementById("details").innerHTML = '<p class="hint">Click a tensor (box) or an op (oval) in the graph.</p>';
    document.getElementById("title").textContent = "one attention step: " + STEP.module + " on " + DATA.input.text;
    drawGraph();
    document.getElementById("step").max = STEPS.length;
    moduleOptions();
    sourceOptions();
    setSource("input", true);
    drawAttention();
    drawLadder();
    showPrediction();
    applyCheck();
    showStep(0);
  }
  function setUpLive() {
    var form = document.getElementById("ask");
    if (!DATA.live) return;
    form.hidden = false;
    var text = document.getElementById("ask-text"), status = document.getElementById("ask-status");
    text.value = DATA.input.text;
    text.placeholder = DATA.live.placeholder;
    document.getElementById("ask-what").textContent = "your " + DATA.input.kind + ":";
    function ask(withCheck) {
      var started = performance.now();
      status.textContent = "running the step …"; status.className = "";
      var body = JSON.stringify({text: text.value, check: withCheck});
      fetch(DATA.live.endpoint, {method: "POST", headers: {"Content-Type": "application/json"}, body: body})
        .then(function (response) { return response.json().then(function (json) { return [response.ok, json]; }); })
        .then(function (answer) {
          if (!answer[0]) { status.textContent = answer[1].error; status.className = "bad"; status.dataset.error = "true"; return; }
          delete status.dataset.error;
          var drawing = performance.now();
          load(answer[1]);
          document.body.dataset.drawMs = Math.round(performance.now() - drawing);      // the page's own part
          var ms = Math.round(performance.now() - started);
          status.textContent = "redrawn in " + ms + " ms"; status.className = "ok";
          document.body.dataset.redrawMs = ms;
          document.body.dataset.loads = (+document.body.dataset.loads || 0) + 1;
        })
        .catch(function (error) { status.textContent = "no answer from the server (" + error + ")"; status.className = "bad"; });
    }
    form.addEventListener("submit", function (event) { event.preventDefault(); ask(document.getElementById("check-toggle").checked); });
    document.getElementById("check-toggle").addEventListener("change", function (event) {
      if (event.target.checked && !DATA.check) ask(true);     // the check runs on request only
    });
  }

  drawGraph();
  setUpPanZoom();
  setUpStepping();
  setUpAttention();
  setUpSnapshots();
  setUpCheck();
  setUpLive();
  drawLadder();
  showPrediction();
  legend();
  showStep(0);
  document.body.dataset.readyMs = Math.round(performance.now());    // since navigation started
  document.body.dataset.ready = "true";
})();
