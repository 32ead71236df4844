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
    var under = path !== "/admin" && (location.pathname === path || location.pathname.indexOf(path + "/") === 0);
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
