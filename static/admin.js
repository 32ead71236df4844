// Holdfast admin: small helps over pages that work without them.
// The menu entry for the page on screen is marked (aria-current), so a
// screen reader and the eye both know where they are. Nothing here
// asks the browser to load a page again: live figures are fetched and
// written into the page.
(function () {
  "use strict";
  var here = location.pathname + location.search;
  var best = null;
  var links = document.querySelectorAll(".admin-nav a[href]");
  for (var i = 0; i < links.length; i++) {
    var href = links[i].getAttribute("href");
    var path = href.split("?")[0];
    var exact = href === here;
    // a link with a query is its page only with that query
    var under = href === path && path !== "/admin" &&
      (location.pathname === path || location.pathname.indexOf(path + "/") === 0);
    if (exact || (under && (!best || (best.getAttribute("href").length < href.length && !best.exact)))) {
      best = links[i];
      best.exact = exact;
      if (exact) break;
    }
  }
  if (!best && (location.pathname === "/admin" || location.pathname === "/admin/")) {
    best = document.querySelector('.admin-nav a[href="/admin"]');
  }
  if (best) best.setAttribute("aria-current", "page");
})();

// The home page follows the sale through the shop's own stream of stock
// changes (every hold, payment, release and refund moves a counter): on
// each change it reads the page again and puts the new figures in place.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource || !live.dataset.watch) return;
  var first = true;
  var waiting = null;
  function read() {
    waiting = null;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (!fresh) return;
        var focused = document.activeElement && document.activeElement.id;
        live.innerHTML = fresh.innerHTML;
        var note = document.getElementById("live-note");
        if (note) note.textContent = "Updated just now, as the sale moved: the figures follow it as it happens.";
        if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      })
      .catch(function () {});
  }
  var stream = new EventSource("/availability/stream?ids=" + encodeURIComponent(live.dataset.watch));
  stream.onmessage = function () {
    // the first event is what the stream starts from: the page has it
    if (first) { first = false; return; }
    if (!waiting) waiting = setTimeout(read, 400);
  };
})();

// The refund form says what the units chosen give back as they change,
// worked out as the server works it out (each line's share of what it was
// paid, never more); on the review page, once the numbers are not the
// ones reviewed, only "Review again" is left to press.
(function () {
  "use strict";
  var lines = document.querySelector("#refund .refund-lines");
  var said = document.getElementById("refund-amount");
  if (!lines || !said) return;
  var inputs = lines.querySelectorAll("input[type=number][data-paid]");
  // a line of seats: each box ticked is one of its units
  var seatLines = lines.querySelectorAll("fieldset.refund-seats[data-paid]");
  function share(paid, qty, before, units) {
    qty = Math.max(qty, 1);
    function upto(n) { return Math.floor(paid * Math.min(n, qty) / qty); }
    return upto(before + units) - upto(before);
  }
  function money(minor) {
    var cents = String(minor % 100);
    if (cents.length < 2) cents = "0" + cents;
    return lines.dataset.moneyBefore + Math.floor(minor / 100) + "." + cents + lines.dataset.moneyAfter;
  }
  function update() {
    var total = 0, units = 0, wrong = false;
    for (var i = 0; i < inputs.length; i++) {
      var input = inputs[i];
      var n = input.value.trim() === "" ? 0 : Number(input.value);
      var left = Number(input.dataset.qty) - Number(input.dataset.refunded);
      if (!Number.isInteger(n) || n < 0 || n > left) { wrong = true; continue; }
      units += n;
      total += share(Number(input.dataset.paid), Number(input.dataset.qty), Number(input.dataset.refunded), n);
    }
    for (var j = 0; j < seatLines.length; j++) {
      var line = seatLines[j];
      var ticked = line.querySelectorAll("input[type=checkbox]:checked").length;
      units += ticked;
      total += share(Number(line.dataset.paid), Number(line.dataset.qty), Number(line.dataset.refunded), ticked);
    }
    said.hidden = false;
    if (wrong) {
      said.textContent = "Some numbers are not units left to refund: the review will say which.";
      return;
    }
    said.textContent = units === 0 ? "No units chosen: nothing would be refunded." :
      "The " + units + (units === 1 ? " unit chosen gives back " : " units chosen give back ") + money(total) + ".";
    var send = document.getElementById("refund-send");
    var stated = document.querySelector("#refund input[name=amount_minor]");
    // on the review, other numbers than the ones reviewed are reviewed again
    if (send && stated) send.hidden = total !== Number(stated.value) || units === 0;
  }
  for (var i = 0; i < inputs.length; i++) inputs[i].addEventListener("input", update);
  var boxes = lines.querySelectorAll("fieldset.refund-seats input[type=checkbox]");
  for (var k = 0; k < boxes.length; k++) boxes[k].addEventListener("change", update);
  update();
})();

// The seat plan page (templates/seats/section.html): a seat on the
// drawing is ticked by a click as well as by its box (the boxes stay
// the keyboard's way, and what is sent); the plan's fields are drawn as
// they are typed, laid out as the database lays seats out (hf_seat_plan:
// ten apart, an aisle twenty, rows twelve apart from the stage back); and
// "Add a row" gives another blank line.
(function () {
  "use strict";
  var map = document.querySelector(".staff-map");
  if (map) {
    var boxOf = function (label) {
      return document.querySelector('input[name=seat][value="' + label.replace(/"/g, "") + '"]');
    };
    var mark = function (circle) {
      var box = boxOf(circle.getAttribute("data-seat"));
      circle.classList.toggle("ticked", !!(box && box.checked));
    };
    var circles = map.querySelectorAll("circle[data-seat]");
    for (var i = 0; i < circles.length; i++) mark(circles[i]);
    map.addEventListener("click", function (e) {
      var circle = e.target.closest ? e.target.closest("circle[data-seat]") : null;
      if (!circle) return;
      var box = boxOf(circle.getAttribute("data-seat"));
      if (!box) return;
      box.checked = !box.checked;
      mark(circle);
    });
    document.addEventListener("change", function (e) {
      if (e.target.name !== "seat") return;
      var circle = map.querySelector('circle[data-seat="' + e.target.value.replace(/"/g, "") + '"]');
      if (circle) mark(circle);
    });
  }
  var rows = document.getElementById("plan-rows");
  var svg = document.getElementById("plan-preview");
  if (!rows || !svg) return;
  var NS = "http://www.w3.org/2000/svg";
  function numbers(text) {
    return text.split(/[\s,]+/).filter(function (n) { return n !== ""; }).map(Number)
      .filter(function (n) { return Number.isInteger(n); });
  }
  function draw() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var lines = rows.querySelectorAll(".plan-row");
    var seats = [], labels = [], rank = 0, minX = 0, maxX = 0;
    for (var i = 0; i < lines.length; i++) {
      var get = function (name) { return lines[i].querySelector("[name=" + name + "]").value.trim(); };
      var out = lines[i].querySelector("[name=out]");
      var first = parseInt(get("first"), 10), last = parseInt(get("last"), 10);
      if (!get("row") || isNaN(first) || isNaN(last) || last < first || last - first >= 1000 || (out && out.checked)) continue;
      rank += 1;
      var aisles = numbers(get("aisles")).filter(function (a) { return a >= first && a < last; });
      var wheel = numbers(get("wheelchair")), comp = numbers(get("companion"));
      var shift = Math.trunc((10 * (first + last) + 20 * aisles.length) / 2);
      for (var n = first; n <= last; n++) {
        var before = aisles.filter(function (a) { return a < n; }).length;
        var x = n * 10 + 20 * before - shift;
        minX = Math.min(minX, x); maxX = Math.max(maxX, x);
        seats.push({ x: x, y: rank * 12, access: wheel.indexOf(n) >= 0 ? "W" : comp.indexOf(n) >= 0 ? "C" : "" });
      }
      labels.push({ text: get("row"), y: rank * 12 });
    }
    var box = document.getElementById("plan-preview-box");
    box.hidden = seats.length === 0;
    if (!seats.length) return;
    svg.setAttribute("viewBox", (minX - 24) + " -18 " + (maxX - minX + 36) + " " + (rank * 12 + 28));
    var stage = document.createElementNS(NS, "text");
    stage.setAttribute("x", (minX + maxX) / 2); stage.setAttribute("y", -4);
    stage.setAttribute("text-anchor", "middle"); stage.setAttribute("font-size", "6");
    stage.textContent = "STAGE";
    svg.appendChild(stage);
    labels.forEach(function (l) {
      var t = document.createElementNS(NS, "text");
      t.setAttribute("x", minX - 20); t.setAttribute("y", l.y + 2); t.setAttribute("font-size", "5");
      t.textContent = l.text;
      svg.appendChild(t);
    });
    seats.forEach(function (s) {
      var c = document.createElementNS(NS, "circle");
      c.setAttribute("cx", s.x); c.setAttribute("cy", s.y); c.setAttribute("r", "4.5");
      c.setAttribute("class", "seat" + (s.access === "W" ? " wheelchair" : s.access === "C" ? " companion" : ""));
      if (!s.access && /^#[0-9a-f]{6}$/.test(svg.getAttribute("data-colour") || "")) c.setAttribute("fill", svg.getAttribute("data-colour"));
      svg.appendChild(c);
      if (s.access) {
        var t = document.createElementNS(NS, "text");
        t.setAttribute("x", s.x); t.setAttribute("y", s.y + 1.6); t.setAttribute("font-size", "4.5");
        t.setAttribute("text-anchor", "middle"); t.setAttribute("fill", "#fff");
        t.textContent = s.access;
        svg.appendChild(t);
      }
    });
  }
  rows.addEventListener("input", draw);
  rows.addEventListener("change", draw);
  var add = document.getElementById("add-row");
  if (add) {
    add.hidden = false;
    add.addEventListener("click", function () {
      var spare = rows.querySelector(".plan-row:last-child");
      var line = spare.cloneNode(true);
      var inputs = line.querySelectorAll("input");
      for (var i = 0; i < inputs.length; i++) inputs[i].value = "";
      rows.appendChild(line);
      line.querySelector("input[name=row]").focus();
    });
  }
  draw();
})();

// An editor's lists (the dining room's set-up): "Add a …" gives another
// blank line, a copy of the last one with its fields cleared. Without a
// script the page has spare lines, and more after each save.
(function () {
  "use strict";
  var buttons = document.querySelectorAll("button[data-add-line]");
  for (var i = 0; i < buttons.length; i++) {
    (function (button) {
      var list = document.getElementById(button.getAttribute("data-add-line"));
      if (!list) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        var lines = list.querySelectorAll(".line");
        var line = lines[lines.length - 1].cloneNode(true);
        var out = line.querySelector(".line-out");
        if (out) out.parentNode.removeChild(out);
        var fields = line.querySelectorAll("input");
        for (var j = 0; j < fields.length; j++) {
          if (fields[j].type === "checkbox") fields[j].checked = false;
          else fields[j].value = "";
        }
        var legend = line.querySelector("legend");
        if (legend && list.getAttribute("data-new")) legend.textContent = list.getAttribute("data-new");
        list.appendChild(line);
        var first = line.querySelector("input");
        if (first) first.focus();
      });
    })(buttons[i]);
  }
})();

// A long list of boxes (fields.html's picks): a filter shows the boxes
// whose words (or whose group's) hold what is typed, opening their groups.
(function () {
  "use strict";
  var filters = document.querySelectorAll("input[data-picks]");
  for (var i = 0; i < filters.length; i++) {
    (function (filter) {
      var list = document.getElementById(filter.getAttribute("data-picks"));
      if (!list) return;
      filter.parentNode.hidden = false;
      var groups = list.querySelectorAll(".pick-group");
      var opened = [];
      for (var g = 0; g < groups.length; g++) opened.push(groups[g].open);
      filter.addEventListener("input", function () {
        var words = filter.value.trim().toLowerCase();
        for (var g = 0; g < groups.length; g++) {
          var head = groups[g].querySelector("summary").textContent.toLowerCase();
          var labels = groups[g].querySelectorAll(".pick-items label");
          var shown = 0;
          for (var l = 0; l < labels.length; l++) {
            var match = !words || head.indexOf(words) >= 0 || labels[l].textContent.toLowerCase().indexOf(words) >= 0;
            labels[l].hidden = !match;
            if (match) shown += 1;
          }
          groups[g].hidden = shown === 0;
          groups[g].open = words ? shown > 0 : opened[g];
        }
      });
    })(filters[i]);
  }
})();
