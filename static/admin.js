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
        if (note) note.textContent = "Updated " + new Date().toLocaleTimeString() + ": the figures follow the sale as it happens.";
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
